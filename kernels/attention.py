"""FlashAttention-2 forward and backward in the form of Triton's tutorial 06, with pointer loads and (forward) with host tensor descriptors: fp16 Q, K, V of shape (Z, H, N_CTX, HEAD_DIM), fp32 softmax statistics, causal (STAGE 3 / CAUSAL) or not.

Every pointer load and store is masked on N_CTX, so N_CTX need not be a multiple of any block
size; the descriptor form (_attn_fwd_desc) needs N_CTX a multiple of BLOCK_M.
Conventions as in the tutorial: the forward writes M = m + log2(l) per row (log2 domain), the
backward takes K pre-scaled by sm_scale / ln(2) and Delta = rowsum(O * dO) from
`_attn_bwd_preprocess`, and returns dQ already scaled (dq *= ln 2) and dK scaled by sm_scale.
"""

import triton
import triton.language as tl


@triton.jit
def _key_range(start_m, BLOCK_M: tl.constexpr, STAGE: tl.constexpr, N_CTX):
    """Which key columns an inner call visits: STAGE 1 those left of the diagonal block (causal),
    STAGE 2 the diagonal block itself (causal, masked), STAGE 3 all of them (non-causal)."""
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    return lo, hi


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q,  #
                    K, V, stride_kn, stride_kk, stride_vk, stride_vn,  #
                    dtype: tl.constexpr, start_m, qk_scale,  #
                    BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,  #
                    STAGE: tl.constexpr, offs_m: tl.constexpr, offs_n: tl.constexpr,  #
                    N_CTX: tl.constexpr):
    lo, hi = _key_range(start_m, BLOCK_M, STAGE, N_CTX)
    offs_d = tl.arange(0, HEAD_DIM)
    # K is read transposed, HEAD_DIM x BLOCK_N, so that q @ k needs no transpose; V as stored.
    kT_ptrs = K + offs_d[:, None] * stride_kk + (lo + offs_n)[None, :] * stride_kn
    v_ptrs = V + (lo + offs_n)[:, None] * stride_vk + offs_d[None, :] * stride_vn
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        in_seq = (start_n + offs_n) < N_CTX
        # -- qk = q k^T, scaled to the log2 domain, with the running row maximum m_ij --
        k = tl.load(kT_ptrs, mask=in_seq[None, :], other=0.0)
        qk = tl.dot(q, k)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        elif STAGE == 3:
            # The last block may run past N_CTX: those columns get a large negative score.
            qk = qk * qk_scale + tl.where(in_seq, 0, -1.0e6)[None, :]
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        # -- rescale what was accumulated under the old maximum --
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        # -- acc += p v --
        v = tl.load(v_ptrs, mask=in_seq[:, None], other=0.0)
        p = p.to(dtype)
        acc = tl.dot(p, v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
        kT_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vk
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, sm_scale, M, Out,  #
              stride_qz, stride_qh, stride_qm, stride_qk,  #
              stride_kz, stride_kh, stride_kn, stride_kk,  #
              stride_vz, stride_vh, stride_vk, stride_vn,  #
              stride_oz, stride_oh, stride_om, stride_on,  #
              Z, H, N_CTX,  #
              HEAD_DIM: tl.constexpr,  #
              BLOCK_M: tl.constexpr,  #
              BLOCK_N: tl.constexpr,  #
              STAGE: tl.constexpr  #
              ):
    """Out = softmax(Q K^T * sm_scale [causal]) V for one BLOCK_M block of query rows of one
    (batch, head); grid (cdiv(N_CTX, BLOCK_M), Z * H). M (Z * H * N_CTX, fp32) gets the row
    statistics the backward pass needs."""
    tl.static_assert(BLOCK_N <= HEAD_DIM)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_offset = off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_offset = off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_offset = off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_offset = off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # Running row maximum m_i and row sum l_i of the online softmax; acc is un-normalized.
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale
    qk_scale *= 1.44269504  # 1/log(2): exp(x) = exp2(x / ln 2)
    # q stays in registers for the whole row of key blocks.
    q_ptrs = Q + q_offset + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    # STAGE 3 (causal): the blocks left of the diagonal unmasked, then the diagonal block with
    # the causal mask. STAGE 1 (non-causal): every block, as _attn_fwd_inner's STAGE 3.
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q,  #
                                        K + k_offset, V + v_offset, stride_kn, stride_kk, stride_vk, stride_vn,  #
                                        V.dtype.element_ty, start_m, qk_scale,  #
                                        BLOCK_M, HEAD_DIM, BLOCK_N,  #
                                        4 - STAGE, offs_m, offs_n, N_CTX)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q,  #
                                        K + k_offset, V + v_offset, stride_kn, stride_kk, stride_vk, stride_vn,  #
                                        V.dtype.element_ty, start_m, qk_scale,  #
                                        BLOCK_M, HEAD_DIM, BLOCK_N,  #
                                        2, offs_m, offs_n, N_CTX)
    # epilogue
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    row_ok = offs_m < N_CTX
    tl.store(M + off_hz * N_CTX + offs_m, m_i, mask=row_ok)
    o_ptrs = Out + o_offset + offs_m[:, None] * stride_om + offs_d[None, :] * stride_on
    tl.store(o_ptrs, acc.to(Out.type.element_ty), mask=row_ok[:, None])


@triton.jit
def _attn_fwd_inner_desc(acc, l_i, m_i, q,  #
                         desc_k, desc_v, offset_y, dtype: tl.constexpr, start_m, qk_scale,  #
                         BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,  #
                         STAGE: tl.constexpr, offs_m: tl.constexpr, offs_n: tl.constexpr,  #
                         N_CTX: tl.constexpr):
    # _attn_fwd_inner with K and V read through descriptors over (Z * H * N_CTX, HEAD_DIM): rows
    # offset_y + lo.. of this (batch, head); N_CTX is a multiple of BLOCK_N, so no column is masked.
    lo, hi = _key_range(start_m, BLOCK_M, STAGE, N_CTX)
    row = offset_y + lo
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([row, 0])  # BLOCK_N x HEAD_DIM, used transposed
        qk = tl.dot(q, k.T)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([row, 0])
        acc = tl.dot(p.to(dtype), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
        row += BLOCK_N
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_desc(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX,  #
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    """_attn_fwd through host tensor descriptors (tutorial 06's descriptor form): Q, K, V and Out
    viewed as (Z * H * N_CTX, HEAD_DIM) with blocks [BLOCK_M, HEAD_DIM] (Q, Out) and [BLOCK_N,
    HEAD_DIM] (K, V), which load through TMA on sm_90 (ttbuild.tma). N_CTX must be a multiple of
    BLOCK_M (a block never straddles two heads); grid (N_CTX / BLOCK_M, Z * H)."""
    dtype = desc_q.dtype
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    offset_y = off_z * (N_CTX * H) + off_h * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale
    qk_scale *= 1.44269504  # 1/log(2)
    q = desc_q.load([qo_offset_y, 0])
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, offset_y, dtype, start_m, qk_scale,  #
                                             BLOCK_M, HEAD_DIM, BLOCK_N, 4 - STAGE, offs_m, offs_n, N_CTX)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, offset_y, dtype, start_m, qk_scale,  #
                                             BLOCK_M, HEAD_DIM, BLOCK_N, 2, offs_m, offs_n, N_CTX)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    desc_o.store([qo_offset_y, 0], acc.to(dtype))


@triton.jit
def _attn_bwd_preprocess(O, DO,  #
                         Delta,  #
                         Z, H, N_CTX,  #
                         BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr  #
                         ):
    """Delta = rowsum(O * dO) in fp32 for contiguous (Z, H, N_CTX, HEAD_DIM) O and dO; grid
    (cdiv(N_CTX, BLOCK_M), Z * H)."""
    off_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hz = tl.program_id(1)
    off_n = tl.arange(0, HEAD_DIM)
    row_ok = off_m < N_CTX
    base = off_hz.to(tl.int64) * HEAD_DIM * N_CTX + off_m[:, None] * HEAD_DIM + off_n[None, :]
    o = tl.load(O + base, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + base, mask=row_ok[:, None], other=0.0).to(tl.float32)
    delta = tl.sum(o * do, axis=1)
    tl.store(Delta + off_hz * N_CTX + off_m, delta, mask=row_ok)


@triton.jit
def _attn_bwd_dkdv(dk, dv,  #
                   Q, k, v, sm_scale,  #
                   DO,  #
                   M, D,  #
                   # Q, K, V, DO share one layout: token and head-dim strides.
                   stride_tok, stride_d,  #
                   H, N_CTX, BLOCK_M1: tl.constexpr,  #
                   BLOCK_N1: tl.constexpr,  #
                   HEAD_DIM: tl.constexpr,  #
                   start_n, start_m, num_steps,  #
                   MASK: tl.constexpr):
    """dK, dV of one BLOCK_N1 block of keys over num_steps blocks of BLOCK_M1 query rows from
    start_m. Rows past N_CTX load as 0 (q, dO, M, Delta), which makes their terms vanish."""
    offs_m = start_m + tl.arange(0, BLOCK_M1)
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    offs_k = tl.arange(0, HEAD_DIM)
    qT_ptrs = Q + offs_m[None, :] * stride_tok + offs_k[:, None] * stride_d
    do_ptrs = DO + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d
    # BLOCK_N1 must be a multiple of BLOCK_M1: the diagonal is walked in whole row blocks.
    tl.static_assert(BLOCK_N1 % BLOCK_M1 == 0)
    curr_m = start_m
    step_m = BLOCK_M1
    for blk_idx in range(num_steps):
        offs_m = curr_m + tl.arange(0, BLOCK_M1)
        row_ok = offs_m < N_CTX
        qT = tl.load(qT_ptrs, mask=row_ok[None, :], other=0.0)
        # m before the dot, so its latency hides behind it.
        m = tl.load(M + offs_m, mask=row_ok, other=0.0)
        qkT = tl.dot(k, qT)
        pT = tl.math.exp2(qkT - m[None, :])
        # Causal mask: key n is visible to query m only when n <= m.
        if MASK:
            mask = (offs_m[None, :] >= offs_n[:, None])
            pT = tl.where(mask, pT, 0.0)
        do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0)
        # dV += P^T dO
        ppT = pT.to(tl.float16)
        dv += tl.dot(ppT, do)
        # dS^T = P^T * (dP^T - Delta), dP^T = V dO^T; Delta is pre-divided as in the forward.
        Di = tl.load(D + offs_m, mask=row_ok, other=0.0)
        dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
        dsT = pT * (dpT - Di[None, :])
        dsT = dsT.to(tl.float16)
        dk += tl.dot(dsT, tl.trans(qT))
        curr_m += step_m
        qT_ptrs += step_m * stride_tok
        do_ptrs += step_m * stride_tok
    return dk, dv


@triton.jit
def _attn_bwd_dq(dq, q, K, V,  #
                 do, m, D,
                 # Q, K, V, DO share one layout: token and head-dim strides.
                 stride_tok, stride_d,  #
                 H, N_CTX,  #
                 BLOCK_M2: tl.constexpr,  #
                 BLOCK_N2: tl.constexpr,  #
                 HEAD_DIM: tl.constexpr,
                 start_m, start_n, num_steps,  #
                 MASK: tl.constexpr):
    """dQ of one BLOCK_M2 block of query rows over num_steps blocks of BLOCK_N2 keys from
    start_n. Keys past N_CTX load as 0, so their dS multiplies a zero K row."""
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    offs_n = start_n + tl.arange(0, BLOCK_N2)
    offs_k = tl.arange(0, HEAD_DIM)
    kT_ptrs = K + offs_n[None, :] * stride_tok + offs_k[:, None] * stride_d
    vT_ptrs = V + offs_n[None, :] * stride_tok + offs_k[:, None] * stride_d
    Di = tl.load(D + offs_m, mask=offs_m < N_CTX, other=0.0)
    # BLOCK_M2 must be a multiple of BLOCK_N2: the diagonal is walked in whole key blocks.
    tl.static_assert(BLOCK_M2 % BLOCK_N2 == 0)
    curr_n = start_n
    step_n = BLOCK_N2
    for blk_idx in range(num_steps):
        offs_n = curr_n + tl.arange(0, BLOCK_N2)
        col_ok = offs_n < N_CTX
        kT = tl.load(kT_ptrs, mask=col_ok[None, :], other=0.0)
        vT = tl.load(vT_ptrs, mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, kT)
        p = tl.math.exp2(qk - m)
        # Causal mask: key n is visible to query m only when n <= m.
        if MASK:
            mask = (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(mask, p, 0.0)
        # dP = dO V^T, dS = P * (dP - Delta)
        dp = tl.dot(do, vT).to(tl.float32)
        ds = p * (dp - Di[:, None])
        ds = ds.to(tl.float16)
        # dQ += dS K; K was pre-scaled, so dQ is de-scaled once at the end.
        dq += tl.dot(ds, tl.trans(kT))
        curr_n += step_n
        kT_ptrs += step_n * stride_tok
        vT_ptrs += step_n * stride_tok
    return dq


@triton.jit
def _attn_bwd(Q, K, V, sm_scale,  #
              DO,  #
              DQ, DK, DV,  #
              M, D,
              # Q, K, V, DO share one layout (z, h, token, head-dim strides).
              stride_z, stride_h, stride_tok, stride_d,  #
              H, N_CTX,  #
              BLOCK_M1: tl.constexpr,  #
              BLOCK_N1: tl.constexpr,  #
              BLOCK_M2: tl.constexpr,  #
              BLOCK_N2: tl.constexpr,  #
              BLK_SLICE_FACTOR: tl.constexpr,  #
              HEAD_DIM: tl.constexpr,  #
              CAUSAL: tl.constexpr):
    """dQ, dK, dV for one (batch, head) and one block: program pid computes dK/dV of keys
    [pid * BLOCK_N1, +BLOCK_N1) and dQ of queries [pid * BLOCK_M2, +BLOCK_M2); grid
    (cdiv(N_CTX, BLOCK_N1), 1, Z * H) with BLOCK_N1 == BLOCK_M2."""
    LN2: tl.constexpr = 0.6931471824645996  # = ln(2)

    bhid = tl.program_id(2)
    off_chz = (bhid * N_CTX).to(tl.int64)
    adj = (stride_h * (bhid % H) + stride_z * (bhid // H)).to(tl.int64)
    pid = tl.program_id(0)

    # Move every base pointer to this (batch, head).
    Q += adj
    K += adj
    V += adj
    DO += adj
    DQ += adj
    DK += adj
    DV += adj
    M += off_chz
    D += off_chz

    offs_k = tl.arange(0, HEAD_DIM)

    # ---- dK and dV of this block of keys ----
    start_n = pid * BLOCK_N1
    start_m = 0

    MASK_BLOCK_M1: tl.constexpr = BLOCK_M1 // BLK_SLICE_FACTOR
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    key_ok = offs_n < N_CTX

    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)

    # K and V stay in registers for the whole inner loop.
    k = tl.load(K + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d, mask=key_ok[:, None], other=0.0)
    v = tl.load(V + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d, mask=key_ok[:, None], other=0.0)

    if CAUSAL:
        # The query rows of the diagonal block, in smaller masked steps.
        start_m = start_n
        num_steps = BLOCK_N1 // MASK_BLOCK_M1
        dk, dv = _attn_bwd_dkdv(dk, dv,  #
                                Q, k, v, sm_scale,  #
                                DO,  #
                                M, D,  #
                                stride_tok, stride_d,  #
                                H, N_CTX,  #
                                MASK_BLOCK_M1, BLOCK_N1, HEAD_DIM,  #
                                start_n, start_m, num_steps,  #
                                MASK=True)
        start_m += num_steps * MASK_BLOCK_M1

    # The remaining query rows need no mask.
    num_steps = tl.cdiv(N_CTX - start_m, BLOCK_M1)
    dk, dv = _attn_bwd_dkdv(dk, dv,  #
                            Q, k, v, sm_scale,  #
                            DO,  #
                            M, D,  #
                            stride_tok, stride_d,  #
                            H, N_CTX,  #
                            BLOCK_M1, BLOCK_N1, HEAD_DIM,  #
                            start_n, start_m, num_steps,  #
                            MASK=False)

    dv_ptrs = DV + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d
    tl.store(dv_ptrs, dv, mask=key_ok[:, None])
    dk *= sm_scale
    dk_ptrs = DK + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d
    tl.store(dk_ptrs, dk, mask=key_ok[:, None])

    # ---- dQ of this block of queries ----
    start_m = pid * BLOCK_M2
    start_n = 0
    num_steps = tl.cdiv(N_CTX, BLOCK_N2)

    MASK_BLOCK_N2: tl.constexpr = BLOCK_N2 // BLK_SLICE_FACTOR
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    row_ok = offs_m < N_CTX

    q = tl.load(Q + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d, mask=row_ok[:, None], other=0.0)
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    do = tl.load(DO + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d, mask=row_ok[:, None], other=0.0)

    m = tl.load(M + offs_m, mask=row_ok, other=0.0)
    m = m[:, None]

    if CAUSAL:
        # The diagonal block first (right to left in masked steps), then every key block left
        # of it without a mask.
        end_n = start_m + BLOCK_M2
        num_steps = BLOCK_M2 // MASK_BLOCK_N2
        dq = _attn_bwd_dq(dq, q, K, V,  #
                          do, m, D,  #
                          stride_tok, stride_d,  #
                          H, N_CTX,  #
                          BLOCK_M2, MASK_BLOCK_N2, HEAD_DIM,  #
                          start_m, end_n - num_steps * MASK_BLOCK_N2, num_steps,  #
                          MASK=True)
        end_n -= num_steps * MASK_BLOCK_N2
        num_steps = end_n // BLOCK_N2
        start_n = end_n - num_steps * BLOCK_N2

    dq = _attn_bwd_dq(dq, q, K, V,  #
                      do, m, D,  #
                      stride_tok, stride_d,  #
                      H, N_CTX,  #
                      BLOCK_M2, BLOCK_N2, HEAD_DIM,  #
                      start_m, start_n, num_steps,  #
                      MASK=False)
    dq_ptrs = DQ + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d
    dq *= LN2
    tl.store(dq_ptrs, dq, mask=row_ok[:, None])
