"""A kernel whose module imports nothing of the project: edits elsewhere never rerun its parse."""
import triton
import triton.language as tl


@triton.jit
def double_it(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
