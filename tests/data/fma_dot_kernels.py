"""Our kernels with an fp32 `tl.dot` that lowers to FMAs (input_precision="ieee"): a tile product with a row-scaled operand, a K loop accumulating with an int32 operand converted in the loop, and a product of index-made tiles (for the LLIR evaluator); see tests/backend/llir/test_backend_fma_dot.py."""

import triton
import triton.language as tl


@triton.jit
def scaled_tile_dot(x_ptr, y_ptr, w_ptr, out_ptr, n_rows,
                    BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """out[r, :] = x[r, :] @ (y * w[:, None]) for the BM rows of this program (BK == BM)."""
    r = tl.program_id(0) * BM + tl.arange(0, BM)
    kk = tl.arange(0, BK)
    cc = tl.arange(0, BN)
    live = r < n_rows
    w = tl.load(w_ptr + r, mask=live, other=0.0)
    x = tl.load(x_ptr + r[:, None] * BK + kk[None, :], mask=live[:, None], other=0.0)
    y = tl.load(y_ptr + r[:, None] * BN + cc[None, :], mask=live[:, None], other=0.0)
    z = tl.dot(x, y * w[:, None], input_precision="ieee")
    tl.store(out_ptr + r[:, None] * BN + cc[None, :], z, mask=live[:, None])


@triton.jit
def ieee_matmul_int_rhs(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                        stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ float(B), fp32 accumulation over K in BK steps (B may be int32 or fp32)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
        acc += tl.dot(a, b.to(tl.float32), input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def index_tile_dot(out_ptr, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """out = A @ B + 1 with A[i, k] = (3i + 5k) % 7 - 3 and B[k, j] = (2k + j) % 5 - 2: small
    integers, so every fp32 sum is exact whatever the order."""
    i = tl.arange(0, BM)
    k = tl.arange(0, BK)
    j = tl.arange(0, BN)
    a = ((i[:, None] * 3 + k[None, :] * 5) % 7).to(tl.float32) - 3.0
    b = ((k[:, None] * 2 + j[None, :]) % 5).to(tl.float32) - 2.0
    z = tl.dot(a, b, tl.full((BM, BN), 1.0, tl.float32), input_precision="ieee")
    tl.store(out_ptr + i[:, None] * BN + j[None, :], z)


@triton.jit
def index_tile_dot_f64(out_ptr, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """index_tile_dot in fp64 (FMA path at every precision)."""
    i = tl.arange(0, BM)
    k = tl.arange(0, BK)
    j = tl.arange(0, BN)
    a = ((i[:, None] * 3 + k[None, :] * 5) % 7).to(tl.float64) - 3.0
    b = ((k[:, None] * 2 + j[None, :]) % 5).to(tl.float64) - 2.0
    z = tl.dot(a, b, tl.full((BM, BN), 1.0, tl.float64))
    tl.store(out_ptr + i[:, None] * BN + j[None, :], z)


@triton.jit
def index_batched_dot(out_ptr, BB: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    """Per batch p: A_p @ B_p + 1 with A_p[i, k] = (3i + 5k + p) % 7 - 3, B_p[k, j] = (2k + j + p) % 5 - 2."""
    p = tl.arange(0, BB)[:, None, None]
    i = tl.arange(0, BM)[None, :, None]
    k = tl.arange(0, BK)
    j = tl.arange(0, BN)[None, None, :]
    a = ((i * 3 + k[None, None, :] * 5 + p) % 7).to(tl.float32) - 3.0
    b = ((k[None, :, None] * 2 + j + p) % 5).to(tl.float32) - 2.0
    z = tl.dot(a, b, tl.full((BB, BM, BN), 1.0, tl.float32), input_precision="ieee")
    tl.store(out_ptr + (p * BM + i) * BN + j, z)
