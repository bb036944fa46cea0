# fp8 (e4m3 "fp8e4nv", e5m2 "fp8e5"): tt.fp_to_fp for every fp8 conversion, RTNE when narrowing
# unless fp_downcast_rounding="rtz"; fp8 → int goes through an explicit float cast.
# Two different fp8 types add in fp16:

import triton
import triton.language as tl


@triton.jit
def fp8_kernel(p8, q8, pf, pi, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(p8 + r)
    b = tl.load(q8 + r)
    x = a.to(tl.float32) + b.to(tl.float16)
    tl.store(p8 + r, x)
    tl.store(q8 + r, x.to(tl.float16))
    tl.store(pi + r, a.to(tl.float32).to(tl.int32))
    tl.store(q8 + r, x.to(tl.float8e5, fp_downcast_rounding="rtz"))
    tl.store(pf + r, a + b)
