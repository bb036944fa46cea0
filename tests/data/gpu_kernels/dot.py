"""Test kernels for tl.dot on tensor cores (tests/gpu/test_gpu_dot.py): C = A @ B over a K loop with masks on M, N and K, A and B row- or column-major (A_COL / B_COL), accumulating in fp32, fp16 or int32.

Pointers are recomputed from the loop index each iteration (not advanced through a loop-carried
value), so the axis analysis sees which dimension is contiguous and the shared tiles take the
operand's majorness: row-major B and column-major A are read with ldmatrix.trans.
"""

import triton
import triton.language as tl


@triton.jit
def _tile_ptrs(a_ptr, b_ptr, offs_m, offs_n, offs_k, lda, ldb, A_COL: tl.constexpr, B_COL: tl.constexpr):
    if A_COL:
        a_ptrs = a_ptr + offs_m[:, None] + offs_k[None, :] * lda
    else:
        a_ptrs = a_ptr + offs_m[:, None] * lda + offs_k[None, :]
    if B_COL:
        b_ptrs = b_ptr + offs_k[:, None] + offs_n[None, :] * ldb
    else:
        b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_n[None, :]
    return a_ptrs, b_ptrs


@triton.jit
def dot_f32acc_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      A_COL: tl.constexpr, B_COL: tl.constexpr, PREC: tl.constexpr, IMP: tl.constexpr = None):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + offs_k
        a_ptrs, b_ptrs = _tile_ptrs(a_ptr, b_ptr, offs_m, offs_n, kk, lda, ldb, A_COL, B_COL)
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC, max_num_imprecise_acc=IMP)
    c_ptrs = c_ptr + offs_m[:, None] * ldc + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def dot_f16acc_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      A_COL: tl.constexpr, B_COL: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + offs_k
        a_ptrs, b_ptrs = _tile_ptrs(a_ptr, b_ptr, offs_m, offs_n, kk, lda, ldb, A_COL, B_COL)
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    c_ptrs = c_ptr + offs_m[:, None] * ldc + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def dot_i8_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  A_COL: tl.constexpr, B_COL: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + offs_k
        a_ptrs, b_ptrs = _tile_ptrs(a_ptr, b_ptr, offs_m, offs_n, kk, lda, ldb, A_COL, B_COL)
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0)
        acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + offs_m[:, None] * ldc + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def dot_single_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One tile, no loop: C = A @ B + C (the accumulator comes from memory: not loop-carried), all row-major."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a = tl.load(a_ptr + offs_m[:, None] * BK + offs_k[None, :])
    b = tl.load(b_ptr + offs_k[:, None] * BN + offs_n[None, :])
    c_ptrs = c_ptr + offs_m[:, None] * BN + offs_n[None, :]
    c = tl.load(c_ptrs)
    tl.store(c_ptrs, tl.dot(a, b, c))


@triton.jit
def dot_trans_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ trans(Bt): Bt is N x K row-major (the attention Q K^T form)."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a = tl.load(a_ptr + offs_m[:, None] * BK + offs_k[None, :])
    bt = tl.load(b_ptr + offs_n[:, None] * BK + offs_k[None, :])
    c = tl.dot(a, tl.trans(bt))
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], c)


@triton.jit
def dot_batched_kernel(a_ptr, b_ptr, c_ptr, BB: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Rank-3 tl.dot: C[b] = A[b] @ B[b] for BB contiguous row-major batches."""
    ob = tl.arange(0, BB)
    om = tl.arange(0, BM)
    on = tl.arange(0, BN)
    ok = tl.arange(0, BK)
    a = tl.load(a_ptr + ob[:, None, None] * (BM * BK) + om[None, :, None] * BK + ok[None, None, :])
    b = tl.load(b_ptr + ob[:, None, None] * (BK * BN) + ok[None, :, None] * BN + on[None, None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + ob[:, None, None] * (BM * BN) + om[None, :, None] * BN + on[None, None, :], c)


@triton.jit
def dot_batched_fma_kernel(a_ptr, b_ptr, c_ptr, BB: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                           PREC: tl.constexpr):
    """Rank-3 tl.dot on the FMA path (fp64, or fp32 with input_precision="ieee"): C[b] += A[b] @ B[b]."""
    ob = tl.arange(0, BB)[:, None, None]
    om = tl.arange(0, BM)[None, :, None]
    on = tl.arange(0, BN)[None, None, :]
    ok = tl.arange(0, BK)
    a = tl.load(a_ptr + ob * (BM * BK) + om * BK + ok[None, None, :])
    b = tl.load(b_ptr + ob * (BK * BN) + ok[None, :, None] * BN + on)
    c_ptrs = c_ptr + ob * (BM * BN) + om * BN + on
    tl.store(c_ptrs, tl.dot(a, b, tl.load(c_ptrs), input_precision=PREC))


@triton.jit
def dot_fma_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
    """C = A @ B + C for one tile, all row-major: fp64, or fp32 with input_precision="ieee" (the FMA path)."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a = tl.load(a_ptr + offs_m[:, None] * BK + offs_k[None, :])
    b = tl.load(b_ptr + offs_k[:, None] * BN + offs_n[None, :])
    c_ptrs = c_ptr + offs_m[:, None] * BN + offs_n[None, :]
    acc = tl.load(c_ptrs)
    for _ in range(2):
        acc = tl.dot(a, b, acc, input_precision=PREC)
    tl.store(c_ptrs, acc)


@triton.jit
def dot_chain_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N_CTX, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
                     SCALE_ACC: tl.constexpr):
    """Two chained dots per iteration, attention's shape without the softmax: S = Q K^T (K read as
    N x D and transposed), P = fp16(S), O = O * alpha + P V with alpha = 1 (SCALE_ACC 0), 0.5
    (SCALE_ACC 1) or, per row, 0.5 where the row of S has a positive maximum else 0.25 (2)."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for start in range(0, N_CTX, BN):
        rows = start + offs_n
        k = tl.load(k_ptr + rows[:, None] * D + offs_d[None, :])
        v = tl.load(v_ptr + rows[:, None] * D + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        p = s.to(tl.float16)
        if SCALE_ACC == 1:
            acc = acc * 0.5
        if SCALE_ACC == 2:
            alpha = tl.where(tl.max(s, 1) > 0, 0.5, 0.25)
            acc = acc * alpha[:, None]
        acc = tl.dot(p, v, acc)
    tl.store(o_ptr + offs_m[:, None] * D + offs_d[None, :], acc)


@triton.jit
def dot_chain_tf32_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N_CTX, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """dot_chain_kernel on fp32 tiles (both dots tf32): P = S stays fp32, so P V takes P from
    registers (an RS tf32 wgmma, P moved into its A fragments by warp shuffles); O = O * alpha
    + P V with alpha per row as SCALE_ACC 2."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for start in range(0, N_CTX, BN):
        rows = start + offs_n
        k = tl.load(k_ptr + rows[:, None] * D + offs_d[None, :])
        v = tl.load(v_ptr + rows[:, None] * D + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        alpha = tl.where(tl.max(s, 1) > 0, 0.5, 0.25)
        acc = tl.dot(s, v, acc * alpha[:, None])
    tl.store(o_ptr + offs_m[:, None] * D + offs_d[None, :], acc)
