"""Matrix multiplication through tensor descriptors made in the kernel, in the form of Triton tutorial 09's device-descriptor matmul: C = A @ B (fp16 in, fp32 accumulate), A, B and C each a `tl.make_tensor_descriptor`, tiles read with `desc.load` and written with `desc.store`, programs grouped GROUP_SIZE_M rows of tiles at a time.

ttbuild lowers descriptors to pointer loads with bounds masks (ttbuild.frontend.tensordesc), as
Triton does where there is no TMA; out-of-bounds elements load as zeros, so K, M and N need not
be multiples of the tile.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_descriptor_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                             BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N], all three contiguous (row strides K, N, N elements)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows = min(tiles_m - first_m, GROUP_SIZE_M)
    off_m = (first_m + (pid % per_group) % rows) * BLOCK_SIZE_M
    off_n = ((pid % per_group) // rows) * BLOCK_SIZE_N

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([off_m, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))


@triton.jit
def matmul_host_descriptor_kernel(a_desc, b_desc, c_desc, M, N, K, GROUP_SIZE_M: tl.constexpr):
    """The same product with the descriptors made on the host (Triton's `TensorDescriptor`,
    tutorial 09's host-descriptor form): the tile sizes are the descriptors' block shapes."""
    BLOCK_SIZE_M: tl.constexpr = a_desc.block_shape[0]
    BLOCK_SIZE_K: tl.constexpr = a_desc.block_shape[1]
    BLOCK_SIZE_N: tl.constexpr = b_desc.block_shape[1]
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows = min(tiles_m - first_m, GROUP_SIZE_M)
    off_m = (first_m + (pid % per_group) % rows) * BLOCK_SIZE_M
    off_n = ((pid % per_group) // rows) * BLOCK_SIZE_N

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([off_m, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))
