"""Row-wise argmax: each program writes the index of the largest element of its row (the first one on ties, as torch.argmax) using `tl.argmax`."""

import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, out_ptr, x_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=-float("inf"))
    idx = tl.argmax(x, axis=0)
    tl.store(out_ptr + row, idx)
