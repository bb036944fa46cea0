# 2-D blocks for the backend GPU tests: row and column reductions (slice layouts), expand_dims and
# broadcast, a reduce result stored directly (layout conversion), argmax/max (multi-operand reduce).

import triton
import triton.language as tl


@triton.jit
def rows_kernel(out_ptr, sums_ptr, in_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * stride + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(in_ptr + offs, mask=mask, other=0.0)
    s = tl.sum(x, axis=1)
    tl.store(sums_ptr + rm, s, mask=rm < M)
    centered = x - tl.broadcast_to(tl.expand_dims(s, 1), (BM, BN)) / N
    tl.store(out_ptr + offs, centered, mask=mask)


@triton.jit
def cols_kernel(colmax_ptr, colsum_ptr, in_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = pid * BN + tl.arange(0, BN)
    offs = rm[:, None] * stride + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(in_ptr + offs, mask=mask, other=-float('inf'))
    tl.store(colmax_ptr + rn, tl.max(x, axis=0), mask=rn < N)
    y = tl.where(mask, x, 0.0)
    tl.store(colsum_ptr + rn, tl.sum(y, axis=0), mask=rn < N)


@triton.jit
def argmax_kernel(idx_ptr, in_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * stride + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(in_ptr + offs, mask=mask, other=-float('inf'))
    tl.store(idx_ptr + rm, tl.argmax(x, axis=1), mask=rm < M)
