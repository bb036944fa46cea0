"""Persistent matrix multiplication through tensor descriptors, in the form of Triton tutorial 09's descriptor-persistent kernel: NUM_SMS programs walk the output tiles with a `tl.range(..., flatten=True)` loop, B is given N x K (K contiguous) and used as `b.T`, C is written through a descriptor, optionally in two column halves (EPILOGUE_SUBTILE: reshape, permute, split).

Descriptors made in the kernel are lowered to pointer loads with bounds masks
(ttbuild.frontend.tensordesc); host descriptors (matmul_tma_persistent_kernel) load through TMA
on sm_90 and stay pointer loads below it.
"""

import triton
import triton.language as tl


@triton.jit
def _tile_of(tile_id, tiles_per_group, tiles_m, GROUP_SIZE_M: tl.constexpr):
    group = tile_id // tiles_per_group
    first_m = group * GROUP_SIZE_M
    rows = min(tiles_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (tile_id % rows)
    pid_n = (tile_id % tiles_per_group) // rows
    return pid_m, pid_n


@triton.jit
def _tile_product(a_desc, b_desc, off_m, off_n, k_tiles, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr):
    """A[off_m:, :] @ B[off_n:, :].T over k_tiles blocks of K, fp32."""
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for ki in range(k_tiles):
        a = a_desc.load([off_m, ki * BLOCK_SIZE_K])
        b = b_desc.load([off_n, ki * BLOCK_SIZE_K])
        acc = tl.dot(a, b.T, acc)
    return acc


@triton.jit
def _store_tile(c_desc, acc, off_m, off_n, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                EPILOGUE_SUBTILE: tl.constexpr, dtype: tl.constexpr):
    """C's tile at (off_m, off_n) as `dtype`: whole, or in two column halves."""
    if EPILOGUE_SUBTILE:
        halves = tl.permute(tl.reshape(acc, (BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left.to(dtype))
        c_desc.store([off_m, off_n + BLOCK_SIZE_N // 2], right.to(dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(dtype))


@triton.jit
def matmul_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                             BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, NUM_SMS: tl.constexpr):
    """C[M, N] = A[M, K] @ B[N, K].T in fp16 with an fp32 accumulator; launch NUM_SMS programs."""
    dtype = c_ptr.dtype.element_ty
    start = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    tiles = tiles_m * tiles_n
    tiles_per_group = GROUP_SIZE_M * tiles_n

    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    if EPILOGUE_SUBTILE:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                           block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                           block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])

    for tile_id in tl.range(start, tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_of(tile_id, tiles_per_group, tiles_m, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_SIZE_M
        off_n = pid_n * BLOCK_SIZE_N
        acc = _tile_product(a_desc, b_desc, off_m, off_n, k_tiles, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K)
        _store_tile(c_desc, acc, off_m, off_n, BLOCK_SIZE_M, BLOCK_SIZE_N, EPILOGUE_SUBTILE, dtype)


@triton.jit
def matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                                 GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, NUM_SMS: tl.constexpr,
                                 WARP_SPECIALIZE: tl.constexpr = False):
    """The same product with host descriptors (tutorial 09's TMA-persistent form): A [M, K] and B
    [N, K] as `tensordesc<...>` parameters, which load through TMA on sm_90 (ttbuild.tma); the
    tile is the descriptors' blocks, C's block is [BLOCK_SIZE_M, BLOCK_SIZE_N] (or its half along
    N with EPILOGUE_SUBTILE). WARP_SPECIALIZE: the tile loop runs warp-specialized (a producer
    warp issues every tile's TMA loads, running ahead into the next tile during the epilogue)."""
    BLOCK_SIZE_M: tl.constexpr = a_desc.block_shape[0]
    BLOCK_SIZE_K: tl.constexpr = a_desc.block_shape[1]
    BLOCK_SIZE_N: tl.constexpr = b_desc.block_shape[0]
    dtype = c_desc.dtype
    start = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    tiles = tiles_m * tiles_n
    tiles_per_group = GROUP_SIZE_M * tiles_n
    for tile_id in tl.range(start, tiles, NUM_SMS, flatten=True, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_of(tile_id, tiles_per_group, tiles_m, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_SIZE_M
        off_n = pid_n * BLOCK_SIZE_N
        acc = _tile_product(a_desc, b_desc, off_m, off_n, k_tiles, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K)
        _store_tile(c_desc, acc, off_m, off_n, BLOCK_SIZE_M, BLOCK_SIZE_N, EPILOGUE_SUBTILE, dtype)
