"""A table row chosen by `tl.where` on a constexpr (one table for every batch, or one per batch), then loaded."""

import triton
import triton.language as tl


@triton.jit
def scale_by_table_row(x_ptr, x_stride, t_ptr, t_stride, sl, PER_BATCH: tl.constexpr, D: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid % sl
    t_ptr = t_ptr + tl.where(PER_BATCH == 0, row * t_stride, (pid // sl) * (sl * t_stride) + row * t_stride)
    cols = tl.arange(0, D)
    t = tl.load(t_ptr + cols, mask=cols < D, other=0.0)
    x = tl.load(x_ptr + pid * x_stride + cols)
    tl.store(x_ptr + pid * x_stride + cols, x * t)
