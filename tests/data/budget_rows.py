"""Row kernels whose loads and stores meet only through a scalar (a reduction's result): test data
for the coalesce pass's slice rule (tests/backend/ttgir/test_coalesce_slice.py)."""

import triton
import triton.language as tl


@triton.jit
def spend_budget(cost_ptr, x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Counts how many of a row's fp32 costs fit a unit budget in order (a running sum), and
    lowers a bf16 row by the mean cost of those: the costs reach the bf16 row only as a scalar."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    keep = cols < n
    cost = tl.load(cost_ptr + row * n + cols, mask=keep, other=0.0)
    spent = tl.cumsum(cost, 0)
    fits = (spent <= 1.0) & keep
    count = tl.maximum(tl.sum(fits.to(tl.int32), 0), 1)
    mean = tl.sum(tl.where(fits, cost, 0.0), 0) / count.to(tl.float32)
    x = tl.load(x_ptr + row * n + cols, mask=keep, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n + cols, (x - mean).to(tl.bfloat16), mask=keep)


@triton.jit
def spread_total(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Writes a bf16 row's total into every fp32 slot of an output row: a store whose group only
    stores, next to a wider load in its slice."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    keep = cols < n
    total = tl.sum(tl.load(x_ptr + row * n + cols, mask=keep, other=0.0).to(tl.float32), 0)
    tl.store(out_ptr + row * n + cols, tl.zeros([BLOCK], tl.float32) + total, mask=keep)
