# Philox on the GPU (tests/test_backend_gpu_random.py): every tl.rand* entry point stored raw, so
# ours and Triton's kernel from this same source can be compared bit for bit.

import triton
import triton.language as tl


@triton.jit
def random_kernel(u_ptr, i_ptr, n_ptr, q_ptr, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(u_ptr + offs, tl.rand(seed, offs), mask=mask)
    tl.store(i_ptr + offs, tl.randint(seed, offs), mask=mask)
    tl.store(n_ptr + offs, tl.randn(seed, offs), mask=mask)
    r0, r1, r2, r3 = tl.randint4x(seed, offs, 7)
    tl.store(q_ptr + 4 * offs, r0, mask=mask)
    tl.store(q_ptr + 4 * offs + 1, r1, mask=mask)
    tl.store(q_ptr + 4 * offs + 2, r2, mask=mask)
    tl.store(q_ptr + 4 * offs + 3, r3, mask=mask)
