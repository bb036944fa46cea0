"""Math helpers picked by Triton version, with a fallback import path."""
import operator

import triton
from packaging.version import Version


def newer_than(version, op, wanted):
    return op(Version(version), Version(wanted))


if newer_than(triton.__version__, operator.ge, "3.0.0"):
    try:
        from triton.language.extra.libdevice import rsqrt as fast_rsqrt
        from triton.language.extra.libdevice import tanh
    except ModuleNotFoundError:
        from triton.language.extra.cuda.libdevice import rsqrt as fast_rsqrt
        from triton.language.extra.cuda.libdevice import tanh
else:
    from triton.language.math import rsqrt as fast_rsqrt
    from triton.language.math import tanh

try:
    from triton.language.libdevice import erf  # gone from Triton 3.x: ImportError
except ImportError:
    from triton.language.extra.cuda import libdevice

    erf = libdevice.erf

squash = tanh
