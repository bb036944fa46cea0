"""Tiled GEMM with fp8 (e4m3) operands: C (M, N) fp16 = A (M, K) @ B (K, N), accumulated in fp32.

The same tiling as matmul.py (grouped tile order, wrapped edge loads, masked K tail and store), under
a name of its own: B comes K-major (stride_bk == 1, B = Bt.T of a row-major (N, K) Bt, the layout
fp8 wgmma wants), and a launch with an integer argument equal to 1 specializes that argument, so fp8
calls and fp16 calls (stride_bn == 1) would specialize different parameters. variants.toml spells
those as constexprs, and one kernel name must keep one set of constexpr parameters for the runtime
to choose among its variants.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_fp8_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr):
    """C = A x B for fp8 A (M, K) and K-major fp8 B (K, N); strides in elements."""
    # Bands of GROUP_SIZE_M tile rows; program ids run down the columns of a band.
    t = tl.program_id(axis=0)
    tile_rows = tl.cdiv(M, BLOCK_SIZE_M)
    band_tiles = GROUP_SIZE_M * tl.cdiv(N, BLOCK_SIZE_N)
    band_top = (t // band_tiles) * GROUP_SIZE_M
    band_rows = min(tile_rows - band_top, GROUP_SIZE_M)
    t_in_band = t % band_tiles
    tile_m = band_top + t_in_band % band_rows
    tile_n = t_in_band // band_rows

    # Wrapped rows and columns keep every load in bounds; the masked store drops them.
    rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + (rows[:, None] * stride_am + ks[None, :] * stride_ak)
    b_tile = b_ptr + (ks[:, None] * stride_bk + cols[None, :] * stride_bn)

    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # The K tail reads zeros (fp8 0.0), which add nothing.
        a = tl.load(a_tile, mask=ks[None, :] < K - step * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < K - step * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk
    c = acc.to(tl.float16)

    out_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dst = c_ptr + stride_cm * out_rows[:, None] + stride_cn * out_cols[None, :]
    tl.store(dst, c, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))
