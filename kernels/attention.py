"""Fused multi-head attention (FlashAttention-2: online softmax, no N_CTX x N_CTX matrix in memory), forward and backward.

Q, K, V, O: fp16, shape (Z, H, N_CTX, HEAD_DIM) (batch, heads, tokens, head size). softmax statistics
and Delta: fp32, one value per (z, h, token), laid out as (Z * H, N_CTX). Scores are kept in the
base-2 domain (exp2 on sm_scale / ln 2 scaled scores, which is exp on the natural-scale ones).
Kernels:
- `_attn_fwd`: O and the row statistic M = m + log2(l) (m the row max, l the row sum, base-2 domain),
  through masked pointer loads, so N_CTX may be any length;
- `_attn_fwd_desc`: the same through host tensor descriptors (TMA on sm_90); N_CTX a multiple of BLOCK_M;
- `_attn_bwd_preprocess`: Delta = rowsum(O * dO);
- `_attn_bwd`: dQ, dK, dV, given K already multiplied by sm_scale / ln 2 on the host; writes dQ in
  natural scale (times ln 2) and dK times sm_scale.
STAGE (forward) is 3 for causal attention, 1 for full; CAUSAL (backward) says the same.
"""

import triton
import triton.language as tl


@triton.jit
def _kv_span(start_m, BLOCK_M: tl.constexpr, STAGE: tl.constexpr, N_CTX):
    """[first, end) of the key positions that one pass of the forward loop visits for query block start_m:
    pass 1 the keys wholly before the diagonal block (causal), pass 2 the diagonal block (causal,
    masked), pass 3 every key (full attention)."""
    if STAGE == 1:
        first, end = 0, start_m * BLOCK_M
    elif STAGE == 2:
        # The multiple_of hint lets the loop's loads keep their vector width.
        first = tl.multiple_of(start_m * BLOCK_M, BLOCK_M)
        end = (start_m + 1) * BLOCK_M
    else:
        first, end = 0, N_CTX
    return first, end


@triton.jit
def _fwd_pass(acc, l_i, m_i, q, K, V, stride_kn, stride_kk, stride_vk, stride_vn, dtype: tl.constexpr, start_m, qk_scale,
              BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
              offs_m: tl.constexpr, offs_n: tl.constexpr, N_CTX: tl.constexpr):
    """One pass of the forward over the key blocks `_kv_span` gives. acc (BLOCK_M, HEAD_DIM) fp32 is
    the unnormalized output, l_i and m_i (BLOCK_M,) the running row sum and row max; returns all three.
    Keys at or past N_CTX read as 0 and score -1e6, so they drop out of both max and sum."""
    first, end = _kv_span(start_m, BLOCK_M, STAGE, N_CTX)
    d = tl.arange(0, HEAD_DIM)
    # K comes in as (HEAD_DIM, BLOCK_N), already transposed for q @ k; V as (BLOCK_N, HEAD_DIM).
    # (The four carried names sort as Triton orders them: acc, k_cols, l_i, m_i, v_rows.)
    k_cols = K + d[:, None] * stride_kk + (first + offs_n)[None, :] * stride_kn
    v_rows = V + (first + offs_n)[:, None] * stride_vk + d[None, :] * stride_vn
    for n0 in range(first, end, BLOCK_N):
        n0 = tl.multiple_of(n0, BLOCK_N)
        key_ok = (n0 + offs_n) < N_CTX
        k = tl.load(k_cols, mask=key_ok[None, :], other=0.0)
        s = tl.dot(q, k)
        if STAGE == 2:
            # Diagonal block: query i attends to key j only for j <= i.
            visible = offs_m[:, None] >= (n0 + offs_n[None, :])
            s = s * qk_scale + tl.where(visible, 0, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s -= m_new[:, None]
        elif STAGE == 3:
            s = s * qk_scale + tl.where(key_ok, 0, -1.0e6)[None, :]
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s -= m_new[:, None]
        else:
            # No masking: take the max of the raw scores and scale once (one multiply per row).
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        # Whatever was summed under the old max shrinks by 2^(m_old - m_new) <= 1.
        shrink = tl.math.exp2(m_i - m_new)
        p_sum = tl.sum(p, 1)
        acc = acc * shrink[:, None]
        v = tl.load(v_rows, mask=key_ok[:, None], other=0.0)
        acc = tl.dot(p.to(dtype), v, acc)
        l_i = l_i * shrink + p_sum
        m_i = m_new
        k_cols += BLOCK_N * stride_kn
        v_rows += BLOCK_N * stride_vk
    return acc, l_i, m_i


@triton.jit
def _head_offset(z, h, stride_z, stride_h):
    """Element offset of head (z, h), in int64: Z * H * N_CTX * HEAD_DIM can pass 2**31."""
    return z.to(tl.int64) * stride_z + h.to(tl.int64) * stride_h


@triton.jit
def _attn_fwd(Q, K, V, sm_scale, M, Out,
              stride_qz, stride_qh, stride_qm, stride_qk, stride_kz, stride_kh, stride_kn, stride_kk,
              stride_vz, stride_vh, stride_vk, stride_vn, stride_oz, stride_oh, stride_om, stride_on,
              Z, H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    """Out = softmax(Q K^T * sm_scale, causal when STAGE == 3) V for BLOCK_M query rows of one head.
    Grid (cdiv(N_CTX, BLOCK_M), Z * H); strides in elements; M (Z * H * N_CTX,) fp32 receives the
    per-row statistic the backward needs."""
    tl.static_assert(BLOCK_N <= HEAD_DIM, "a key block wider than the head")
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    z = off_hz // H
    h = off_hz % H
    q_head = _head_offset(z, h, stride_qz, stride_qh)
    k_head = _head_offset(z, h, stride_kz, stride_kh)
    v_head = _head_offset(z, h, stride_vz, stride_vh)
    o_head = _head_offset(z, h, stride_oz, stride_oh)

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    # Online softmax state: row max (starts at -inf), row sum (starts at 1), unnormalized output.
    m_i = tl.zeros((BLOCK_M,), tl.float32) - float("inf")
    l_i = tl.zeros((BLOCK_M,), tl.float32) + 1.0
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    # e^x = 2^(x * log2(e)): fold log2(e) into the score scale once.
    qk_scale = sm_scale * 1.44269504
    # The query block is loaded once and reused against every key block.
    q_tile = Q + q_head + offs_m[:, None] * stride_qm + d[None, :] * stride_qk
    q = tl.load(q_tile, mask=offs_m[:, None] < N_CTX, other=0.0)
    # Full attention: one unmasked pass (pass 3). Causal: the blocks left of the diagonal (pass 1),
    # then the diagonal block with its triangle mask (pass 2).
    if STAGE & 1:
        acc, l_i, m_i = _fwd_pass(acc, l_i, m_i, q, K + k_head, V + v_head, stride_kn, stride_kk, stride_vk, stride_vn,
                                  V.dtype.element_ty, start_m, qk_scale, BLOCK_M, HEAD_DIM, BLOCK_N,
                                  4 - STAGE, offs_m, offs_n, N_CTX)
    if STAGE & 2:
        acc, l_i, m_i = _fwd_pass(acc, l_i, m_i, q, K + k_head, V + v_head, stride_kn, stride_kk, stride_vk, stride_vn,
                                  V.dtype.element_ty, start_m, qk_scale, BLOCK_M, HEAD_DIM, BLOCK_N,
                                  2, offs_m, offs_n, N_CTX)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    q_ok = offs_m < N_CTX
    tl.store(M + off_hz * N_CTX + offs_m, m_i, mask=q_ok)
    out_tile = Out + o_head + offs_m[:, None] * stride_om + d[None, :] * stride_on
    tl.store(out_tile, acc.to(Out.type.element_ty), mask=q_ok[:, None])


@triton.jit
def _fwd_pass_desc(acc, l_i, m_i, q, desc_k, desc_v, head_row, dtype: tl.constexpr, start_m, qk_scale,
                   BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                   offs_m: tl.constexpr, offs_n: tl.constexpr, N_CTX: tl.constexpr,
                   WARP_SPECIALIZE: tl.constexpr = False):
    """`_fwd_pass` reading K and V through descriptors over (Z * H * N_CTX, HEAD_DIM), from row
    head_row + first. N_CTX is a multiple of the block here, so only the diagonal is masked.
    WARP_SPECIALIZE: a producer warp issues the K and V loads (tl.range's warp_specialize)."""
    first, end = _kv_span(start_m, BLOCK_M, STAGE, N_CTX)
    y_kv = head_row + first  # sorts after m_i, as a carried name must here
    for n0 in tl.range(first, end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        n0 = tl.multiple_of(n0, BLOCK_N)
        k = desc_k.load([y_kv, 0])  # (BLOCK_N, HEAD_DIM); the dot takes its transpose
        s = tl.dot(q, k.T)
        if STAGE == 2:
            visible = offs_m[:, None] >= (n0 + offs_n[None, :])
            s = s * qk_scale + tl.where(visible, 0, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s -= m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        shrink = tl.math.exp2(m_i - m_new)
        p_sum = tl.sum(p, 1)
        acc = acc * shrink[:, None]
        v = desc_v.load([y_kv, 0])
        acc = tl.dot(p.to(dtype), v, acc)
        l_i = l_i * shrink + p_sum
        m_i = m_new
        y_kv += BLOCK_N
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_desc(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                   WARP_SPECIALIZE: tl.constexpr = False):
    """`_attn_fwd` through host tensor descriptors: Q, K, V, Out seen as (Z * H * N_CTX, HEAD_DIM)
    with blocks [BLOCK_M, HEAD_DIM] (Q, Out) and [BLOCK_N, HEAD_DIM] (K, V), loaded by TMA on sm_90
    (ttbuild.tma). N_CTX must be a multiple of BLOCK_M so that no block spans two heads; grid
    (N_CTX / BLOCK_M, Z * H). WARP_SPECIALIZE: the K / V loop runs warp-specialized (a producer
    warp issues its TMA loads)."""
    dtype = desc_q.dtype
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    z = off_hz // H
    h = off_hz % H
    head_row = z * (N_CTX * H) + h * N_CTX
    q_row = head_row + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros((BLOCK_M,), tl.float32) - float("inf")
    l_i = tl.zeros((BLOCK_M,), tl.float32) + 1.0
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e)
    q = desc_q.load([q_row, 0])
    if STAGE & 1:
        acc, l_i, m_i = _fwd_pass_desc(acc, l_i, m_i, q, desc_k, desc_v, head_row, dtype, start_m, qk_scale,
                                       BLOCK_M, HEAD_DIM, BLOCK_N, 4 - STAGE, offs_m, offs_n, N_CTX, WARP_SPECIALIZE)
    if STAGE & 2:
        acc, l_i, m_i = _fwd_pass_desc(acc, l_i, m_i, q, desc_k, desc_v, head_row, dtype, start_m, qk_scale,
                                       BLOCK_M, HEAD_DIM, BLOCK_N, 2, offs_m, offs_n, N_CTX, WARP_SPECIALIZE)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([q_row, 0], acc.to(dtype))


@triton.jit
def _attn_bwd_preprocess(O, DO, Delta, Z, H, N_CTX, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Delta[hz, i] = sum over d of O[hz, i, d] * dO[hz, i, d], fp32, for contiguous (Z, H, N_CTX,
    HEAD_DIM) O and dO; grid (cdiv(N_CTX, BLOCK_M), Z * H)."""
    tok = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    hz = tl.program_id(1)
    d = tl.arange(0, HEAD_DIM)
    tok_ok = tok < N_CTX
    at = hz.to(tl.int64) * HEAD_DIM * N_CTX + tok[:, None] * HEAD_DIM + d[None, :]
    o = tl.load(O + at, mask=tok_ok[:, None], other=0.0)
    grad_o = tl.load(DO + at, mask=tok_ok[:, None], other=0.0).to(tl.float32)
    delta = tl.sum(o * grad_o, axis=1)
    tl.store(Delta + hz * N_CTX + tok, delta, mask=tok_ok)


@triton.jit
def _bwd_kv_steps(dk, dv, Q, k, v, sm_scale, DO, M, D, stride_tok, stride_d, H, N_CTX,
                  BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, HEAD_DIM: tl.constexpr,
                  start_n, start_m, num_steps, MASK: tl.constexpr):
    """Adds to dk, dv (BLOCK_N1, HEAD_DIM) fp32 the terms of keys start_n.. over num_steps blocks of
    BLOCK_M1 query rows from start_m. Works on transposed scores (keys along rows), so that P^T and
    dS^T feed the two dots directly. Query rows past N_CTX read 0 (q, dO, M, Delta): their terms vanish.
    (Carried names sort as Triton orders them: cur_m, dk, do_tile, dv, m_idx, qT_tile.)"""
    m_idx = start_m + tl.arange(0, BLOCK_M1)
    n_idx = start_n + tl.arange(0, BLOCK_N1)
    d = tl.arange(0, HEAD_DIM)
    qT_tile = Q + m_idx[None, :] * stride_tok + d[:, None] * stride_d
    do_tile = DO + m_idx[:, None] * stride_tok + d[None, :] * stride_d
    # The masked diagonal is covered by whole query blocks.
    tl.static_assert(BLOCK_N1 % BLOCK_M1 == 0, "BLOCK_N1 must hold whole query blocks")
    cur_m = start_m
    for _ in range(num_steps):
        m_idx = cur_m + tl.arange(0, BLOCK_M1)
        q_ok = m_idx < N_CTX
        qT = tl.load(qT_tile, mask=q_ok[None, :], other=0.0)
        # The statistic is loaded ahead of the dot that needs it, so its latency overlaps the dot.
        stat = tl.load(M + m_idx, mask=q_ok, other=0.0)
        sT = tl.dot(k, qT)
        pT = tl.math.exp2(sT - stat[None, :])
        if MASK:
            # Key j is visible from query i only for j <= i.
            pT = tl.where(m_idx[None, :] >= n_idx[:, None], pT, 0.0)
        grad_o = tl.load(do_tile, mask=q_ok[:, None], other=0.0)
        # dV += P^T dO (P rounded to fp16 for the tensor cores).
        dv += tl.dot(pT.to(tl.float16), grad_o)
        # dS^T = P^T * (dP^T - Delta) with dP^T = V dO^T.
        delta = tl.load(D + m_idx, mask=q_ok, other=0.0)
        dpT = tl.dot(v, tl.trans(grad_o)).to(tl.float32)
        dsT = (pT * (dpT - delta[None, :])).to(tl.float16)
        dk += tl.dot(dsT, qT.T)
        cur_m += BLOCK_M1
        qT_tile += BLOCK_M1 * stride_tok
        do_tile += BLOCK_M1 * stride_tok
    return dk, dv


@triton.jit
def _bwd_q_steps(dq, q, K, V, grad_o, m, D, stride_tok, stride_d, H, N_CTX,
                 BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr,
                 start_m, start_n, num_steps, MASK: tl.constexpr):
    """Adds to dq (BLOCK_M2, HEAD_DIM) fp32 the terms of query rows start_m.. over num_steps blocks of
    BLOCK_N2 keys from start_n; m is the rows' statistic as a (BLOCK_M2, 1) column. Keys past N_CTX
    read 0, so their dS meets a zero K row. (Carried names sort as Triton orders them: cur_n, dq,
    kT_tile, n_idx, vT_tile.)"""
    m_idx = start_m + tl.arange(0, BLOCK_M2)
    n_idx = start_n + tl.arange(0, BLOCK_N2)
    d = tl.arange(0, HEAD_DIM)
    kT_tile = K + n_idx[None, :] * stride_tok + d[:, None] * stride_d
    vT_tile = V + n_idx[None, :] * stride_tok + d[:, None] * stride_d
    delta = tl.load(D + m_idx, mask=m_idx < N_CTX, other=0.0)
    # The masked diagonal is covered by whole key blocks.
    tl.static_assert(BLOCK_M2 % BLOCK_N2 == 0, "BLOCK_M2 must hold whole key blocks")
    cur_n = start_n
    for _ in range(num_steps):
        n_idx = cur_n + tl.arange(0, BLOCK_N2)
        key_ok = n_idx < N_CTX
        kT = tl.load(kT_tile, mask=key_ok[None, :], other=0.0)
        vT = tl.load(vT_tile, mask=key_ok[None, :], other=0.0)
        s = tl.dot(q, kT)
        p = tl.math.exp2(s - m)
        if MASK:
            p = tl.where(m_idx[:, None] >= n_idx[None, :], p, 0.0)
        # dS = P * (dP - Delta), dP = dO V^T.
        dp = tl.dot(grad_o, vT).to(tl.float32)
        ds = (p * (dp - delta[:, None])).to(tl.float16)
        # dQ += dS K. K carries the sm_scale / ln 2 factor; the caller undoes the ln 2 at the end.
        dq += tl.dot(ds, kT.T)
        cur_n += BLOCK_N2
        kT_tile += BLOCK_N2 * stride_tok
        vT_tile += BLOCK_N2 * stride_tok
    return dq


@triton.jit
def _token_tile(base, idx, d, stride_tok, stride_d):
    """Pointers to the (len(idx), HEAD_DIM) block of tokens idx of one head."""
    return base + idx[:, None] * stride_tok + d[None, :] * stride_d


@triton.jit
def _attn_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, D, stride_z, stride_h, stride_tok, stride_d, H, N_CTX,
              BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
              BLK_SLICE_FACTOR: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    """dQ, dK, dV of one head. Q, K, V, DO, DQ, DK, DV share one (z, h, token, d) layout; M, D are the
    forward's statistic and Delta. Program pid owns keys [pid * BLOCK_N1, +BLOCK_N1) for dK, dV and
    queries [pid * BLOCK_M2, +BLOCK_M2) for dQ; grid (cdiv(N_CTX, BLOCK_N1), 1, Z * H), BLOCK_N1 ==
    BLOCK_M2. Diagonal blocks are walked in steps BLK_SLICE_FACTOR times smaller, with the mask."""
    LN2: tl.constexpr = 0.6931471824645996  # ln(2) as an fp32
    hz = tl.program_id(2)
    stat_base = (hz * N_CTX).to(tl.int64)
    head = (stride_h * (hz % H) + stride_z * (hz // H)).to(tl.int64)
    pid = tl.program_id(0)
    Q += head
    K += head
    V += head
    DO += head
    DQ += head
    DK += head
    DV += head
    M += stat_base
    D += stat_base
    d = tl.arange(0, HEAD_DIM)

    # dK and dV of this program's keys: k and v stay in registers while query blocks stream by.
    start_n = pid * BLOCK_N1
    start_m = 0
    SLICE_M1: tl.constexpr = BLOCK_M1 // BLK_SLICE_FACTOR
    keys = start_n + tl.arange(0, BLOCK_N1)
    key_ok = keys < N_CTX
    dv = tl.zeros((BLOCK_N1, HEAD_DIM), tl.float32)
    dk = tl.zeros((BLOCK_N1, HEAD_DIM), tl.float32)
    k = tl.load(_token_tile(K, keys, d, stride_tok, stride_d), mask=key_ok[:, None], other=0.0)
    v = tl.load(_token_tile(V, keys, d, stride_tok, stride_d), mask=key_ok[:, None], other=0.0)
    if CAUSAL:
        # Queries before the keys see none of them: start at the diagonal, masked and in slices.
        start_m = start_n
        n_slices = BLOCK_N1 // SLICE_M1
        dk, dv = _bwd_kv_steps(dk, dv, Q, k, v, sm_scale, DO, M, D, stride_tok, stride_d, H, N_CTX,
                               SLICE_M1, BLOCK_N1, HEAD_DIM, start_n, start_m, n_slices, MASK=True)
        start_m += n_slices * SLICE_M1
    # Every later query block sees all of these keys: no mask.
    n_blocks = tl.cdiv(N_CTX - start_m, BLOCK_M1)
    dk, dv = _bwd_kv_steps(dk, dv, Q, k, v, sm_scale, DO, M, D, stride_tok, stride_d, H, N_CTX,
                           BLOCK_M1, BLOCK_N1, HEAD_DIM, start_n, start_m, n_blocks, MASK=False)
    tl.store(_token_tile(DV, keys, d, stride_tok, stride_d), dv, mask=key_ok[:, None])
    dk *= sm_scale
    tl.store(_token_tile(DK, keys, d, stride_tok, stride_d), dk, mask=key_ok[:, None])

    # dQ of this program's queries: q, dO and the statistic stay in registers while key blocks stream by.
    start_m = pid * BLOCK_M2
    start_n = 0
    n_steps = tl.cdiv(N_CTX, BLOCK_N2)
    SLICE_N2: tl.constexpr = BLOCK_N2 // BLK_SLICE_FACTOR
    queries = start_m + tl.arange(0, BLOCK_M2)
    q_ok = queries < N_CTX
    q = tl.load(_token_tile(Q, queries, d, stride_tok, stride_d), mask=q_ok[:, None], other=0.0)
    dq = tl.zeros((BLOCK_M2, HEAD_DIM), tl.float32)
    grad_o = tl.load(_token_tile(DO, queries, d, stride_tok, stride_d), mask=q_ok[:, None], other=0.0)
    stat = tl.load(M + queries, mask=q_ok, other=0.0)
    stat = stat[:, None]
    if CAUSAL:
        # The diagonal block in masked slices (keys start_m .. start_m + BLOCK_M2), then every whole
        # key block before it, unmasked; keys after the diagonal are invisible.
        diag_end = start_m + BLOCK_M2
        n_steps = BLOCK_M2 // SLICE_N2
        dq = _bwd_q_steps(dq, q, K, V, grad_o, stat, D, stride_tok, stride_d, H, N_CTX,
                          BLOCK_M2, SLICE_N2, HEAD_DIM, start_m, diag_end - n_steps * SLICE_N2, n_steps, MASK=True)
        diag_end -= n_steps * SLICE_N2
        n_steps = diag_end // BLOCK_N2
        start_n = diag_end - n_steps * BLOCK_N2
    dq = _bwd_q_steps(dq, q, K, V, grad_o, stat, D, stride_tok, stride_d, H, N_CTX,
                      BLOCK_M2, BLOCK_N2, HEAD_DIM, start_m, start_n, n_steps, MASK=False)
    dq_tile = _token_tile(DQ, queries, d, stride_tok, stride_d)
    dq *= LN2
    tl.store(dq_tile, dq, mask=q_ok[:, None])
