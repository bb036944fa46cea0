# Atomics → tt.atomic_rmw / tt.atomic_cas. Enum numbers checked against Triton's own printing
# (fadd=5 max=6 umin=9 xchg=10 and=1; relaxed=1 acquire=2 release=3 acq_rel=4; gpu=1 cta=2 sys=3).
# Without a mask, an all-true mask:

import triton
import triton.language as tl


@triton.jit
def atomic_kernel(pf, pi, pu, n, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.atomic_add(pf + r, 1.0, mask=r < n)
    b = tl.atomic_max(pi + r, 3)
    c = tl.atomic_min(pu + r, 3, sem="relaxed", scope="cta")
    d = tl.atomic_xchg(pi + r, 7, sem="release")
    e = tl.atomic_and(pi, 1, sem="acquire", scope="sys")
    f = tl.atomic_cas(pi, 1, 2)
    g = tl.atomic_or(pi + r, b) + tl.atomic_xor(pi + r, d) + tl.atomic_add(pi + r, c.to(tl.int32))
    tl.store(pf + r, a + g + e + f)
