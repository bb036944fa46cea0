"""A fused linear layer, y (M, N) = act(x (M, K) @ W^T + bias), with W (N, K) stored as nn.Linear stores it and bias (N,).

W^T is read in place as a K-major operand (no transposed copy). The product accumulates in fp32;
the bias is added and the activation applied to that fp32 tile, which is rounded once to y's
element type. ACTIVATION: "" (none), "relu", "leaky_relu" (slope 0.01) or "gelu" (the tanh form,
torch's `gelu(approximate="tanh")`). Tile order and edge handling are those of matmul.py.
"""

import triton
import triton.language as tl


@triton.jit
def _grouped_tile(M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """(tile row, tile column) of this program: ids run down the columns of a band of
    GROUP_SIZE_M tile rows (so a band's programs share W tiles in L2), band after band."""
    t = tl.program_id(axis=0)
    tile_rows = tl.cdiv(M, BLOCK_SIZE_M)
    band_tiles = GROUP_SIZE_M * tl.cdiv(N, BLOCK_SIZE_N)
    band_top = (t // band_tiles) * GROUP_SIZE_M
    band_rows = min(tile_rows - band_top, GROUP_SIZE_M)
    t_in_band = t % band_tiles
    return band_top + t_in_band % band_rows, t_in_band // band_rows


@triton.jit
def linear_kernel(x_ptr, w_ptr, bias_ptr, y_ptr, M, N, K,
                  stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    tile_m, tile_n = _grouped_tile(M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    rows = (tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    outs = (tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    x_tile = x_ptr + (rows[:, None] * stride_xm + ks[None, :] * stride_xk)
    # The K x N tile of W^T: element (k, n) is W[n, k].
    w_tile = w_ptr + (ks[:, None] * stride_wk + outs[None, :] * stride_wn)

    # Carried in Triton's sorted order: acc, w_tile, x_tile.
    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        xs = tl.load(x_tile, mask=ks[None, :] < K - step * BLOCK_SIZE_K, other=0.0)
        wts = tl.load(w_tile, mask=ks[:, None] < K - step * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(xs, wts, acc)
        x_tile += BLOCK_SIZE_K * stride_xk
        w_tile += BLOCK_SIZE_K * stride_wk

    out_rows = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    # Epilogue in fp32: one rounding, after bias and activation.
    bias = tl.load(bias_ptr + out_cols, mask=out_cols < N, other=0.0)
    acc += bias.to(tl.float32)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    elif ACTIVATION == "gelu":
        acc = gelu_tanh(acc)
    y = acc.to(y_ptr.dtype.element_ty)
    dst = y_ptr + stride_ym * out_rows[:, None] + stride_yn * out_cols[None, :]
    tl.store(dst, y, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


@triton.jit
def gelu_tanh(x):
    # 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
    return x * tl.sigmoid(1.5957691216057308 * x * (1.0 + 0.044715 * x * x))
