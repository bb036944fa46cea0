# where / maximum / minimum / casts / math functions / unary minus / integer ops / Python-number promotion.
# The load's `other` zero and the relu's zero are one constant after CSE.
# The fp32 literal 0.0 defers to the fp16 block (Python numbers never widen a tensor):
# int / int is true division in fp32:

import triton
import triton.language as tl


@triton.jit
def elementwise_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    relu = tl.where(x > 0.0, x, 0.0)
    y = tl.load(y_ptr + offs, mask=mask)
    hi = tl.maximum(relu.to(tl.float32), y)
    lo = tl.minimum(hi, 6.0)
    v = -tl.abs(tl.log(tl.sqrt(lo) + 1.0))
    i = v.to(tl.int32)
    j = tl.maximum((i % 7) // 2, 1) & 0xFF
    j = j << 1
    f = j / 3
    tl.store(z_ptr + offs, j, mask=mask)
    tl.store(x_ptr + offs, f, mask=mask)
