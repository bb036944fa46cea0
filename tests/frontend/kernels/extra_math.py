# clamp (tt.clampf, bf16 widened, PropagateNan NONE=0 / ALL=65535), fdiv, div_rn
# (tt.precise_divf), sqrt_rn (tt.precise_sqrt), umulhi (tt.mulhiui), join / split; enum numbers
# checked against Triton's printer.

import triton
import triton.language as tl


@triton.jit
def extra_kernel(pf, pu, pb, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(pf + r)
    u = tl.load(pu + r)
    bb = tl.load(pb + r)
    c = tl.clamp(x, -1.0, 1.0) + tl.clamp(bb, 0.0, x, propagate_nan=tl.PropagateNan.ALL)
    d = tl.fdiv(c, x) + tl.div_rn(c, x) + tl.sqrt_rn(x) + tl.math.fdiv(x, 2.0, ieee_rounding=True)
    h = tl.umulhi(u, u)
    j = tl.join(d, d)
    p, q = tl.split(j)
    tl.store(pf + r, p + q)
    tl.store(pu + r, h)
