"""A row of gains (64 values, one small load) scales two tiles of different shapes, each in its own layout."""

import triton
import triton.language as tl


@triton.jit
def gain_two_tiles(a_ptr, b_ptr, g_ptr, ROWS_A: tl.constexpr, ROWS_B: tl.constexpr, D: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, D)
    g = tl.load(g_ptr + pid * D + cols, mask=cols < D - 8, other=0.0)
    a_offs = pid * ROWS_A * D + tl.arange(0, ROWS_A)[:, None] * D + cols[None, :]
    b_offs = pid * ROWS_B * D + tl.arange(0, ROWS_B)[:, None] * D + cols[None, :]
    a = tl.load(a_ptr + a_offs)
    b = tl.load(b_ptr + b_offs)
    tl.store(a_ptr + a_offs, a * g[None, :])
    tl.store(b_ptr + b_offs, b * g[None, :])
