# Bool pointers are bytes in memory (Triton semantic._load_legacy / store): a *i1 pointer is
# bitcast to *i8, loads compare the byte with 0, stores widen the bool with extui.
# The store reuses the load's i8 pointers (CSE).

import triton
import triton.language as tl


@triton.jit
def bool_kernel(pb, pi, B: tl.constexpr):
    r = tl.arange(0, B)
    b = tl.load(pb + r, mask=r < 8, other=True)
    tl.store(pb + r, tl.load(pi + r) > 0)
    tl.store(pi + r, b.to(tl.int32))
