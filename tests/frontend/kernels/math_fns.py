# Every tl math function the frontend lowers, on fp32 blocks, plus a cast chain through fp16/bf16/int.
# fp16 → bf16 goes through fp32:
# bf16 → uint8 also goes through fp32 (Triton semantic.cast):

import triton
import triton.language as tl


@triton.jit
def math_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.exp(x) + tl.exp2(x) + tl.log(x) + tl.log2(x) + tl.sqrt(x) + tl.rsqrt(x)
    y += tl.sin(x) + tl.cos(x) + tl.floor(x) + tl.ceil(x) + tl.math.erf(x) + tl.abs(x)
    y = tl.fma(y, x, 1.0)
    z = y.to(tl.float16).to(tl.bfloat16).to(tl.uint8).to(tl.float32)
    bits = z.to(tl.int32, bitcast=True)
    tl.store(y_ptr + offs, z + (bits & 1), mask=m)
