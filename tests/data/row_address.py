"""Rows of a strided 2-D tensor scaled by 2: test data for tests/backend/nvptx/test_mad_wide.py (each
program's row address is `pointer + program_id * stride`)."""

import triton
import triton.language as tl


@triton.jit
def scale_rows(y_ptr, y_stride, x_ptr, x_stride, n, BLOCK: tl.constexpr):
    """y[row, :n] = 2 * x[row, :n], one row per program."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row * y_stride + cols, x * 2, mask=cols < n)
