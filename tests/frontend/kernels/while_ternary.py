# `while` → scf.while with carried values; runtime conditional expressions → scf.if;
# tl.trans / tl.reshape; static_print and device_assert leave no IR.

import triton
import triton.language as tl


@triton.jit
def while_kernel(p, n, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(p + r[:, None] * B + r[None, :])
    acc = tl.reshape(tl.trans(x), (B * B,))
    i = n
    while i > 0:
        acc = acc * 0.5
        i = i - 1
    s = n * 2 if n > 0 else n + 1
    tl.static_print("s is", s)
    tl.device_assert(n > 0, "n must be positive")
    tl.store(p + tl.arange(0, B * B), acc + s)
