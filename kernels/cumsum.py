"""Row-wise inclusive prefix sum: each program scans one row of an (n_rows, n_cols) matrix with `tl.cumsum` over a block of BLOCK_SIZE >= n_cols."""

import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0)
    y = tl.cumsum(x, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)
