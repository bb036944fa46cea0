"""libdevice through both import forms Triton kernels use: fp32/fp64 pairs, int32/int64 pairs, a two-argument function with a number, an int result."""

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def libdevice_calls(X, Y, I, J, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    i = tl.load(I + offs)
    j = tl.load(J + offs)
    a = libdevice.asin(x) + tl.extra.cuda.libdevice.erfinv(x) + libdevice.pow(x, 2.0)
    b = libdevice.asin(y) + libdevice.cbrt(y)
    c = libdevice.clz(i) + libdevice.isnan(x)
    d = libdevice.clz(j)
    tl.store(X + offs, a)
    tl.store(Y + offs, b)
    tl.store(I + offs, c)
    tl.store(N + offs, d)
