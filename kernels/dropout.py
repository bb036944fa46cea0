"""Dropout whose keep decision is recomputed from (seed, element index) by Philox (tl.rand), so no mask is stored.

out[i] = x[i] / (1 - p) where rand(seed, i) > p, else 0, for i < n_elements; p is an fp32 drop
probability in [0, 1), seed an integer. Launch cdiv(n_elements, BLOCK_SIZE) programs.
"""

import triton
import triton.language as tl


@triton.jit
def _seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    elem = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = elem < n_elements
    vals = tl.load(x_ptr + elem, mask=live)
    # Same seed and index, same draw: the backward pass regenerates this exact keep mask.
    survives = tl.rand(seed, elem) > p
    # Survivors grow by 1 / (1 - p) so that the expected output equals the input.
    scaled = tl.where(survives, vals / (1 - p), 0.0)
    tl.store(output_ptr + elem, scaled, mask=live)
