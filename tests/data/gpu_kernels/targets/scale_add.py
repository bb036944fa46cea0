"""out = x + a * y over n elements: the multi-target library of the GPU tests (tests/gpu/test_gpu_runtime_targets.py)."""

import triton
import triton.language as tl


@triton.jit
def scale_add(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + a * y, mask=mask)
