# An early return inside a @jit helper that returns nothing, called from a loop: the loop is the
# caller's, so the helper's `if ...: return` still lowers to scf.if (rest of the helper in the
# branch that does not return), inlined into the scf.for body.

import triton
import triton.language as tl


@triton.jit
def store_tile(ptr, start, n, BLOCK: tl.constexpr):
    if start >= n:
        return
    offs = start + tl.arange(0, BLOCK)
    tl.store(ptr + offs, offs.to(tl.float32), mask=offs < n)


@triton.jit
def helper_return_kernel(out_ptr, n, BLOCK: tl.constexpr):
    for t in range(0, 4):
        store_tile(out_ptr, t * BLOCK, n, BLOCK)
