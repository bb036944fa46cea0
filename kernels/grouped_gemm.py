"""A batch of independent fp16 GEMMs C_g (M_g, N_g) = A_g (M_g, K_g) @ B_g (K_g, N_g), fp32 accumulation, on a fixed grid of NUM_SM programs.

The tiles of all GEMMs form one sequence (GEMM 0's tiles, row-major, then GEMM 1's, ...); program p
takes tiles p, p + NUM_SM, p + 2 * NUM_SM, ... Inputs are device tables: group_a_ptrs, group_b_ptrs
and group_c_ptrs hold one int64 address per GEMM; group_gemm_sizes holds (M, N, K) and g_lds the
leading dimensions (lda, ldb, ldc) per GEMM, int32. Matrices are row-major with unit inner stride.
Sizes need not be multiples of the tile: rows and columns wrap at load and are masked at store, and
the last K step is masked.
"""

import triton
import triton.language as tl


@triton.jit
def _fp16_matrix(table, g):
    """The fp16 matrix whose address is entry g of `table` (int64 addresses)."""
    return tl.load(table + g).to(tl.pointer_type(tl.float16))


@triton.jit
def grouped_matmul_kernel(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds, group_size,
                          NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                          BLOCK_SIZE_K: tl.constexpr):
    # `tile` is this program's next tile in the whole sequence; GEMM g's tiles are numbered from
    # `first_tile`. (Carried names in Triton's sorted order: first_tile, then tile.)
    tile = tl.program_id(0)
    first_tile = 0
    for g in range(group_size):
        dims = group_gemm_sizes + g * 3
        gm = tl.load(dims)
        gn = tl.load(dims + 1)
        gk = tl.load(dims + 2)
        m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        count = m_tiles * n_tiles
        while (tile >= first_tile and tile < first_tile + count):
            lds = g_lds + g * 3
            lda = tl.load(lds)
            ldb = tl.load(lds + 1)
            ldc = tl.load(lds + 2)
            a_base = _fp16_matrix(group_a_ptrs, g)
            b_base = _fp16_matrix(group_b_ptrs, g)
            c_base = _fp16_matrix(group_c_ptrs, g)
            local = tile - first_tile
            tm = local // n_tiles
            tn = local % n_tiles

            rows = (tm * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % gm
            cols = (tn * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % gn
            ks = tl.arange(0, BLOCK_SIZE_K)
            a_tile = a_base + rows[:, None] * lda + ks[None, :]
            b_tile = b_base + ks[:, None] * ldb + cols[None, :]
            acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
            for step in range(0, tl.cdiv(gk, BLOCK_SIZE_K)):
                a = tl.load(a_tile, mask=ks[None, :] < gk - step * BLOCK_SIZE_K, other=0.0)
                b = tl.load(b_tile, mask=ks[:, None] < gk - step * BLOCK_SIZE_K, other=0.0)
                acc += tl.dot(a, b)
                a_tile += BLOCK_SIZE_K
                b_tile += BLOCK_SIZE_K * ldb
            out = acc.to(tl.float16)

            out_rows = tm * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            out_cols = tn * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            dst = c_base + ldc * out_rows[:, None] + out_cols[None, :]
            tl.store(dst, out, mask=(out_rows[:, None] < gm) & (out_cols[None, :] < gn))
            tile += NUM_SM

        first_tile = first_tile + count
