"""Kernels in the idioms of serving and MoE libraries whose register pressure once exceeded Triton's (issue 30's held-out rows), for tests/backend/ttgir/test_backend_pressure.py.

- `paged_prefill`: causal attention over a paged KV cache (each key's cache slot read from a
  per-request slot table), every stride a runtime argument;
- `grouped_decode_partial`: one decoding step of grouped-query attention over a slot table, all
  query heads of one KV head at once, a partial result per block of positions, stored under a
  trip-count-0-or-1 loop;
- `expert_weight_grad`: the weight gradient of grouped experts, dW_e = dY_e^T X_e, fp32 with
  tf32 dots, tokens walked in blocks per expert.
"""

import triton
import triton.language as tl


@triton.jit
def paged_prefill(q_ptr, k_ptr, v_ptr, scale, o_ptr, first_token, n_new, slot_table, request_of, q_row, q_head, q_col,
                  k_row, k_head, k_col, v_row, v_head, v_col, o_row, o_head, o_col, table_row, table_col,
                  heads_per_kv, cached, HEADS: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    tile = tl.program_id(0)
    seq = tl.program_id(1) // HEADS
    head = tl.program_id(1) % HEADS
    kv_head = head // heads_per_kv
    start = tl.load(first_token + seq)
    n_cached = tl.load(cached + seq)
    n_q = tl.load(n_new + seq) - n_cached
    request = tl.load(request_of + seq)
    rows = tile * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + (start + rows[:, None]) * q_row + head * q_head + dims[None, :] * q_col,
                mask=rows[:, None] < n_q, other=0.0)
    run_max = tl.zeros([BM], dtype=tl.float32) - float("inf")
    run_sum = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    end = tl.minimum(tile * BM + BM + n_cached, n_q + n_cached)
    for lo in range(0, tl.where(tile * BM < n_q, 1, 0) * end, BN):
        lo = tl.multiple_of(lo, BN)
        slots = tl.load(slot_table + table_row * request + table_col * (lo + cols), mask=lo + cols < end, other=0)
        kt = tl.load(k_ptr + slots[None, :] * k_row + kv_head * k_head + dims[:, None] * k_col,
                     mask=lo + cols[None, :] < end, other=0.0)
        s = tl.dot(q, kt)
        s = tl.where(rows[:, None] + n_cached >= lo + cols[None, :], s * scale, -1.0e8)
        new_max = tl.maximum(run_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        rescale = tl.math.exp2(run_max - new_max)
        run_sum = run_sum * rescale + tl.sum(p, 1)
        acc = acc * rescale[:, None]
        v = tl.load(v_ptr + slots[:, None] * v_row + kv_head * v_head + dims[None, :] * v_col,
                    mask=lo + cols[:, None] < end, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        run_max = new_max
    acc = acc / run_sum[:, None]
    tl.store(o_ptr + (start + rows[:, None]) * o_row + head * o_head + dims[None, :] * o_col, acc,
             mask=rows[:, None] < n_q)


@triton.jit
def grouped_decode_partial(q_ptr, k_ptr, v_ptr, scale, slot_table, slot_row_of, lengths, part_out, part_lse,
                           table_stride, q_stride_b, q_stride_h, k_stride_t, k_stride_h, o_stride_b, o_stride_h,
                           o_stride_p, lse_stride_b, lse_stride_h, heads_per_kv,
                           HEADS: tl.constexpr, PART: tl.constexpr, D: tl.constexpr, TILE: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    part = tl.program_id(2)
    heads = kv_head * heads_per_kv + tl.arange(0, HEADS)
    head_ok = heads < (kv_head + 1) * heads_per_kv
    dims = tl.arange(0, D)
    length = tl.load(lengths + seq)
    row = tl.load(slot_row_of + seq)
    lo = part * PART
    hi = tl.minimum(length, lo + PART)
    n_tiles = tl.where(hi - lo <= 0, 0, hi - lo + TILE - 1) // TILE
    q_off = seq * q_stride_b + heads[:, None] * q_stride_h + dims[None, :]
    q = tl.load(q_ptr + q_off, mask=head_ok[:, None], other=0.0)
    run_max = tl.zeros([HEADS], dtype=tl.float32) - float("inf")
    run_sum = tl.zeros([HEADS], dtype=tl.float32)
    acc = tl.zeros([HEADS, D], dtype=tl.float32)
    pos0 = lo + tl.arange(0, TILE)
    for t in range(0, n_tiles, 1):
        pos = t * TILE + pos0
        slots = tl.load(slot_table + table_stride * row + pos, mask=pos < hi, other=0)
        k_off = slots[None, :] * k_stride_t + kv_head * k_stride_h + dims[:, None]
        kt = tl.load(k_ptr + k_off, mask=pos[None, :] < hi, other=0.0)
        s = tl.dot(q, kt)
        s *= scale
        s = tl.where(pos[None, :] < hi, s, float("-inf"))
        v_off = slots[:, None] * k_stride_t + kv_head * k_stride_h + dims[None, :]
        vt = tl.load(v_ptr + v_off, mask=pos[:, None] < hi, other=0.0)
        new_max = tl.maximum(tl.max(s, axis=1), run_max)
        p = tl.exp(s - new_max[:, None])
        rescale = tl.exp(run_max - new_max)
        acc *= rescale[:, None]
        acc += tl.dot(p.to(vt.dtype), vt)
        run_sum = run_sum * rescale + tl.sum(p, axis=1)
        run_max = new_max
    for _ in range(0, tl.where(n_tiles == 0, 0, 1), 1):
        o_off = seq * o_stride_b + heads[:, None] * o_stride_h + part * o_stride_p + dims[None, :]
        lse_off = seq * lse_stride_b + heads * lse_stride_h + part
        tl.store(part_out + o_off, acc / run_sum[:, None], mask=head_ok[:, None])
        tl.store(part_lse + lse_off, run_max + tl.log(run_sum), mask=head_ok)


@triton.jit
def expert_weight_grad(x_ptr, dy_ptr, dw_ptr, tokens_per_expert, EXPERTS: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BT: tl.constexpr, PROGRAMS: tl.constexpr):
    n_tiles = tl.cdiv(N, BN)
    rt = tl.arange(0, BT)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    for tile in range(tl.program_id(0), n_tiles * tl.cdiv(K, BK), PROGRAMS):
        n0 = (tile % n_tiles) * BN
        k0 = (tile // n_tiles) * BK
        n_ok = n0 + rn < N
        k_ok = k0 + rk < K
        first = 0
        for e in range(EXPERTS):
            dw = tl.zeros((BN, BK), dtype=tl.float32)
            count = tl.load(tokens_per_expert + e).to(tl.int32)
            if count > 0:
                for t0 in range(0, count, BT):
                    left = tl.minimum(BT, count - t0)
                    if left > 0:
                        tok = first + t0 + rt
                        t_ok = rt < left
                        x = tl.load(x_ptr + tok[:, None] * K + (k0 + rk)[None, :], mask=t_ok[:, None] & k_ok[None, :])
                        dy = tl.load(dy_ptr + tok[:, None] * N + (n0 + rn)[None, :], mask=t_ok[:, None] & n_ok[None, :])
                        dw += tl.dot(dy.T, x)
                tl.store(dw_ptr + (e * N + n0 + rn)[:, None] * K + (k0 + rk)[None, :], dw,
                         mask=n_ok[:, None] & k_ok[None, :])
            first += count


@triton.jit
def gathered_weighted_sum(w_ptr, v_ptr, out_ptr, slot_table, first_of, length_of, table_row, table_col, w_head,
                          w_tok, v_tok, v_head, v_col, o_seq, o_head, o_col, heads_per_kv,
                          D: tl.constexpr, BN: tl.constexpr):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // heads_per_kv
    cols = tl.arange(0, BN)
    dims = tl.arange(0, D)
    length = tl.load(length_of + seq)
    first = tl.load(first_of + seq)
    slot_off = seq * table_row + cols * table_col
    w_off = head * w_head + (first + cols) * w_tok
    v_off = kv_head * v_head + dims[None, :] * v_col
    acc = tl.zeros([D], dtype=tl.float32)
    for lo in range(0, length, BN):
        lo = tl.multiple_of(lo, BN)
        w = tl.load(w_ptr + w_off + lo * w_tok, mask=lo + cols < length, other=0.0)
        slots = tl.load(slot_table + slot_off + lo * table_col, mask=lo + cols < length, other=0)
        v = tl.load(v_ptr + v_off + slots[:, None] * v_tok, mask=lo + cols[:, None] < length, other=0.0)
        acc += tl.sum(w[:, None] * v, 0)
    tl.store(out_ptr + seq * o_seq + head * o_head + dims * o_col, acc.to(out_ptr.dtype.element_ty))


@triton.jit
def scale_columns(q_ptr, scale_ptr, out_ptr, rows, cols, q_row, q_col, o_row, o_col,
                  BR: tl.constexpr, BC: tl.constexpr):
    r = tl.arange(0, BR)
    c = tl.arange(0, BC)
    q_off = (tl.program_id(0) * BR + r[:, None]) * q_row + (tl.program_id(1) * BC + c[None, :]) * q_col
    o_off = (tl.program_id(0) * BR + r[:, None]) * o_row + (tl.program_id(1) * BC + c[None, :]) * o_col
    s_off = tl.program_id(1) * BC + c[None, :]
    col_ok = tl.program_id(1) * BC + c[None, :] < cols
    ok = (tl.program_id(0) * BR + r[:, None] < rows) & col_ok
    q = tl.load(q_ptr + q_off, mask=ok, other=0)
    s = tl.load(scale_ptr + s_off, mask=col_ok, other=0.0)
    tl.store(out_ptr + o_off, q * s, mask=ok)
