"""Tiled fp16 GEMM on tensor cores: C (M, N) fp16 = act(A (M, K) @ B (K, N)), accumulated in fp32.

One program per BLOCK_SIZE_M x BLOCK_SIZE_N tile of C, walking K in BLOCK_SIZE_K steps. Tiles are
handed out in bands of GROUP_SIZE_M tile rows (see `_grouped_tile`) so that programs resident at the
same time share A and B tiles in L2. ACTIVATION is "" or "leaky_relu" (slope 0.01), applied to the
fp32 accumulator before the single rounding to fp16. Strides are in elements; sizes need not be
multiples of the tile. Each tile shape is its own row of variants.toml (ttbuild compiles ahead of
time, so there is no run-time autotuning here).
"""

import triton
import triton.language as tl


@triton.jit
def _grouped_tile(M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """(tile row, tile column) of this program. Program ids run down the columns of one band of
    GROUP_SIZE_M tile rows before moving to the next band (the last band may be shorter)."""
    t = tl.program_id(axis=0)
    tile_rows = tl.cdiv(M, BLOCK_SIZE_M)
    band_tiles = GROUP_SIZE_M * tl.cdiv(N, BLOCK_SIZE_N)
    band_top = (t // band_tiles) * GROUP_SIZE_M
    band_rows = min(tile_rows - band_top, GROUP_SIZE_M)
    t_in_band = t % band_tiles
    return band_top + t_in_band % band_rows, t_in_band // band_rows


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    tile_m, tile_n = _grouped_tile(M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    # Edge rows and columns wrap (% M, % N) so every load is in bounds; the store drops them.
    rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + (rows[:, None] * stride_am + ks[None, :] * stride_ak)
    b_tile = b_ptr + (ks[:, None] * stride_bk + cols[None, :] * stride_bn)
    # (The names of the three loop-carried values keep Triton's sorted order a_tile, acc, b_tile.)
    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # Past the end of K the tiles read zeros, which add nothing to the dot.
        a = tl.load(a_tile, mask=ks[None, :] < K - step * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < K - step * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    c = acc.to(tl.float16)
    out_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dst = c_ptr + stride_cm * out_rows[:, None] + stride_cn * out_cols[None, :]
    tl.store(dst, c, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


@triton.jit
def leaky_relu(x):
    """x where x >= 0, else 0.01 * x (elementwise, x's dtype)."""
    return tl.where(x >= 0, x, 0.01 * x)
