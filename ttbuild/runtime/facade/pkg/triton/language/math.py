"""Façade `triton.language.math`: placeholders."""

from .. import language as _language


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _language._Placeholder(f"triton.language.math.{name}")
