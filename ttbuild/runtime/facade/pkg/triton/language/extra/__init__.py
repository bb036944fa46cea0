"""Façade `triton.language.extra`: placeholders (libdevice and the like run only inside kernels)."""

from .. import _Placeholder


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Placeholder(f"triton.language.extra.{name}")
