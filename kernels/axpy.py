"""Scaled vector addition in ttbuild's own spelling: `out = a * x + y`, with a masked `other=` load."""

import ttbuild
import ttbuild.language as tl


@ttbuild.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, a * x + y, mask=mask)
