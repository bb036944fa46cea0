"""Our kernels in forms whose register allocation differed from Triton's on real libraries (issue 30): fp8 GEMM with per-block scales, gated SiLU, rotary; see benchmarks/bench_regalloc.py."""

import triton
import triton.language as tl


@triton.jit
def fp8_block_gemm_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K,
                          stride_am, stride_bn, stride_cm, stride_as, stride_bs,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # C = (A * a_scale) @ (B * b_scale)^T: A (M, K) fp8 with one scale per row and BK columns,
    # B (N, K) fp8 with one scale per BN x BK block
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rn[None, :] * stride_bn + rk[:, None]
    as_ptrs = as_ptr + rm * stride_as
    bs_ptrs = bs_ptr + pid_n * stride_bs
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        a_s = tl.load(as_ptrs + k)
        b_s = tl.load(bs_ptrs + k)
        acc += tl.dot(a, b) * a_s[:, None] * b_s
        a_ptrs += BK
        b_ptrs += BK
    c = acc.to(c_ptr.dtype.element_ty)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], c, mask=mask)


@triton.jit
def silu_mul_kernel(x_ptr, out_ptr, stride_x, stride_o, D, BLOCK: tl.constexpr):
    # out[r, :] = silu(x[r, :D]) * x[r, D:2D]
    row = tl.program_id(0)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(x_ptr + row * stride_x + D + cols, mask=mask, other=0.0).to(tl.float32)
        y = gate / (1.0 + tl.exp(-gate)) * up
        tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rotary_kernel(q_ptr, cos_ptr, sin_ptr, pos_ptr, stride_qt, stride_qh, stride_c, H,
                  HALF: tl.constexpr, BH: tl.constexpr):
    # q[t, h, :] rotated in place: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), halves of the head dim
    t = tl.program_id(0)
    pos = tl.load(pos_ptr + t)
    heads = tl.arange(0, BH)
    d = tl.arange(0, HALF)
    cos = tl.load(cos_ptr + pos * stride_c + d).to(tl.float32)
    sin = tl.load(sin_ptr + pos * stride_c + d).to(tl.float32)
    hmask = heads[:, None] < H
    p1 = q_ptr + t * stride_qt + heads[:, None] * stride_qh + d[None, :]
    x1 = tl.load(p1, mask=hmask, other=0.0).to(tl.float32)
    x2 = tl.load(p1 + HALF, mask=hmask, other=0.0).to(tl.float32)
    y1 = x1 * cos[None, :] - x2 * sin[None, :]
    y2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(p1, y1.to(q_ptr.dtype.element_ty), mask=hmask)
    tl.store(p1 + HALF, y2.to(q_ptr.dtype.element_ty), mask=hmask)


@triton.jit
def silu_mul_2d_kernel(x_ptr, out_ptr, stride_xm, stride_xn, stride_om, stride_on, M, N,
                       BM: tl.constexpr, BN: tl.constexpr):
    # out[m, n] = silu(x[m, n]) * x[m, N + n] over a BM x BN tile, every stride a runtime value
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    gate_ptrs = x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn
    up_ptrs = x_ptr + rm[:, None] * stride_xm + (rn[None, :] + N) * stride_xn
    gate = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(up_ptrs, mask=mask, other=0.0)
    act = (gate / (1.0 + tl.exp(-gate))).to(up.dtype)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, act * up, mask=mask)


@triton.jit
def rotary_2d_kernel(q_ptr, cos_ptr, sin_ptr, stride_qt, stride_qh, stride_qd, stride_ct, stride_cd, T, H,
                     BT: tl.constexpr, BH: tl.constexpr, HALF: tl.constexpr):
    # q[t, h, :] for BT tokens x BH heads at once; cos/sin indexed by token, strides at runtime
    t = tl.program_id(0) * BT + tl.arange(0, BT)
    h = tl.program_id(1) * BH + tl.arange(0, BH)
    d = tl.arange(0, HALF)
    cs = t[:, None, None] * stride_ct + d[None, None, :] * stride_cd
    cos = tl.load(cos_ptr + cs, mask=t[:, None, None] < T, other=0.0)
    sin = tl.load(sin_ptr + cs, mask=t[:, None, None] < T, other=0.0)
    off = t[:, None, None] * stride_qt + h[None, :, None] * stride_qh + d[None, None, :] * stride_qd
    mask = (t[:, None, None] < T) & (h[None, :, None] < H)
    x1 = tl.load(q_ptr + off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(q_ptr + off + HALF * stride_qd, mask=mask, other=0.0).to(tl.float32)
    tl.store(q_ptr + off, (x1 * cos - x2 * sin).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(q_ptr + off + HALF * stride_qd, (x2 * cos + x1 * sin).to(q_ptr.dtype.element_ty), mask=mask)
