# 2-D blocks: x[:, None] / x[None, :] (tt.expand_dims), implicit tt.broadcast, 2-D pointer
# arithmetic, reductions along an axis, tl.expand_dims and tl.broadcast_to.

import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(out_ptr, in_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * stride + rn[None, :]
    mask = (rm[:, None] < BM) & (rn[None, :] < stride)
    x = tl.load(in_ptr + offs, mask=mask, other=0.0)
    s = tl.sum(x, axis=1)
    centered = x - tl.broadcast_to(tl.expand_dims(s, 1), (BM, BN)) / BN
    tl.store(out_ptr + offs, centered, mask=mask)
