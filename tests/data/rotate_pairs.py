"""A bf16 rotation of (first half, second half) pairs of each row by per-column angles: test data
for the scalar bf16 arithmetic of tests/backend/nvptx/test_bf16_scalar.py."""

import triton
import triton.language as tl


@triton.jit
def rotate_rows(x_ptr, c_ptr, s_ptr, ROWS: tl.constexpr, HALF: tl.constexpr):
    """x[r, :HALF], x[r, HALF:] <- x1 * c - x2 * s, x2 * c + x1 * s, in bf16 (c and s per column)."""
    rows = tl.arange(0, ROWS)[:, None] * (2 * HALF)
    cols = tl.arange(0, HALF)[None, :]
    c = tl.load(c_ptr + cols)
    s = tl.load(s_ptr + cols)
    x1 = tl.load(x_ptr + rows + cols)
    x2 = tl.load(x_ptr + rows + HALF + cols)
    tl.store(x_ptr + rows + cols, x1 * c - x2 * s)
    tl.store(x_ptr + rows + HALF + cols, x2 * c + x1 * s)
