"""Row softmax of a 2-D fp32 matrix, one program per row: out[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)).

BLOCK_SIZE is a power of two no smaller than n_cols, so a whole row sits in registers at once
(one read, one write per element). Strides count elements between the starts of two rows.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    r = tl.program_id(0)
    row_in = input_ptr + r * input_row_stride
    col = tl.arange(0, BLOCK_SIZE)
    src = row_in + col
    # Padding lanes read -inf: they never win the max, and exp(-inf) = 0 adds nothing to the sum.
    vals = tl.load(src, mask=col < n_cols, other=-float('inf'))
    # Shifting by the row's max keeps every exponent <= 0, so exp cannot overflow.
    shifted = vals - tl.max(vals, axis=0)
    e = tl.exp(shifted)
    probs = e / tl.sum(e, axis=0)
    dst = output_ptr + r * output_row_stride + col
    tl.store(dst, probs, mask=col < n_cols)
