"""Elementwise sum of two equal-length vectors: out[i] = x[i] + y[i] for 0 <= i < n_elements.

x_ptr, y_ptr, output_ptr: 1-D buffers of one dtype (fp32 or fp16 in variants.toml).
Launch cdiv(n_elements, BLOCK_SIZE) programs; each owns one contiguous BLOCK_SIZE slice.
"""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # The slice of program k starts at k * BLOCK_SIZE; only the last slice can overhang n_elements.
    slice_base = tl.program_id(axis=0) * BLOCK_SIZE
    idx = slice_base + tl.arange(0, BLOCK_SIZE)
    in_range = idx < n_elements
    lhs = tl.load(x_ptr + idx, mask=in_range)
    rhs = tl.load(y_ptr + idx, mask=in_range)
    total = lhs + rhs
    tl.store(output_ptr + idx, total, mask=in_range)
