"""Façade `triton.language.extra.libdevice`: placeholders (device functions run only inside kernels)."""

from ... import language as _language


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _language._Placeholder(f"triton.language.extra.libdevice.{name}")
