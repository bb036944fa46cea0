"""Grouped GEMM in the pointer form of Triton's tutorial 08: a fixed grid of NUM_SM programs walks the tiles of a group of independent fp16 GEMMs C_g = A_g @ B_g, reading each GEMM's matrices from tables of device addresses.

Tables (device tensors): group_a_ptrs / group_b_ptrs / group_c_ptrs hold one int64 address per
GEMM; group_gemm_sizes holds (M, N, K) and g_lds (lda, ldb, ldc) per GEMM, int32, all matrices
row-major with unit inner stride. Unlike the tutorial, edges are handled: rows and columns wrap
(% M, % N) at load and are masked at store, and the last K block is masked, so sizes need not be
multiples of the tile.
"""

import triton
import triton.language as tl


@triton.jit
def grouped_matmul_kernel(
    # device tensors of matrix addresses, one per GEMM
    group_a_ptrs,
    group_b_ptrs,
    group_c_ptrs,
    # device tensor [group_size, 3]: M, N, K of each GEMM
    group_gemm_sizes,
    # device tensor [group_size, 3]: leading dimensions lda, ldb, ldc of each GEMM
    g_lds,
    # number of GEMMs
    group_size,
    # number of programs launched: each takes every NUM_SM-th tile of the whole group
    NUM_SM: tl.constexpr,
    # tile sizes
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # The tiles of GEMM g are numbered [last_problem_end, last_problem_end + num_tiles).
        while (tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles):
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            # row-major tile order within one GEMM
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles

            offs_am = (tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % gm
            offs_bn = (tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % gn
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k - kk * BLOCK_SIZE_K, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[:, None] < k - kk * BLOCK_SIZE_K, other=0.0)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)

            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            tl.store(c_ptrs, c, mask=(offs_cm[:, None] < gm) & (offs_cn[None, :] < gn))

            # the next tile of this program
            tile_idx += NUM_SM

        last_problem_end = last_problem_end + num_tiles
