"""Layer normalization over the last dimension of an fp16 (rows, N) matrix: a fused forward, and a backward in two kernels.

Forward: y = (x - mean) * rstd * w + b per row, rstd = 1 / sqrt(var + eps), var the biased variance
(divided by N); the row's mean and rstd are kept (fp32) for the backward.
Backward: `_layer_norm_bwd_dx_fused` gives dx of one row and adds the row's dw/db terms into one of
GROUP_SIZE_M partial buffers (rows share a buffer when their index agrees modulo GROUP_SIZE_M, taken
under a spin lock); `_layer_norm_bwd_dwdb` then sums those GROUP_SIZE_M partial rows into dw and db.
"""

import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    """One program per row. X, Y: fp16, `stride` elements between rows; W, B: (N,) fp16;
    Mean, Rstd: (rows,) fp32 outputs; eps: fp32. Rows longer than BLOCK_SIZE take several chunks."""
    r = tl.program_id(0)
    Y += r * stride
    X += r * stride
    # Pass 1: the sum of the row, chunk by chunk, in fp32 lanes.
    lane_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for chunk in range(0, N, BLOCK_SIZE):
        col = chunk + tl.arange(0, BLOCK_SIZE)
        lane_sum += tl.load(X + col, mask=col < N, other=0.).to(tl.float32)
    mean = tl.sum(lane_sum, axis=0) / N
    # Pass 2: squares of (x - mean), not E[x^2] - mean^2, which cancels badly when |mean| >> std.
    lane_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for chunk in range(0, N, BLOCK_SIZE):
        col = chunk + tl.arange(0, BLOCK_SIZE)
        centred = tl.load(X + col, mask=col < N, other=0.).to(tl.float32)
        # A padding lane would add (0 - mean)^2: zero it after centring.
        centred = tl.where(col < N, centred - mean, 0.)
        lane_sq += centred * centred
    rstd = 1 / tl.sqrt(tl.sum(lane_sq, axis=0) / N + eps)
    tl.store(Mean + r, mean)
    tl.store(Rstd + r, rstd)
    # Pass 3: normalize, scale by w and shift by b (fp16 w and b widen to fp32 in the arithmetic).
    for chunk in range(0, N, BLOCK_SIZE):
        col = chunk + tl.arange(0, BLOCK_SIZE)
        ok = col < N
        gain = tl.load(W + col, mask=ok)
        shift = tl.load(B + col, mask=ok)
        normed = (tl.load(X + col, mask=ok, other=0.).to(tl.float32) - mean) * rstd
        out = normed * gain + shift
        tl.store(Y + col, out, mask=ok)


@triton.jit
def _layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N, GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """One program per row (N <= BLOCK_SIZE_N). DX, DY, X: fp16 rows `stride` apart; W: (N,) fp16;
    Mean, Rstd: the forward's fp32 statistics; DW, DB: (GROUP_SIZE_M, N) fp16 partial sums, zeroed by
    the caller; Lock: 2 * GROUP_SIZE_M int32, zeroed (a lock word, then a "written once" flag per buffer).

    dx = (w*dy - (xhat * mean(xhat * w*dy) + mean(w*dy))) * rstd, xhat = (x - mean) * rstd."""
    r = tl.program_id(0)
    col = tl.arange(0, BLOCK_SIZE_N)
    ok = col < N
    X += r * stride
    DY += r * stride
    DX += r * stride
    # Rows r, r + GROUP_SIZE_M, ... accumulate into partial buffer `slot`.
    slot = r % GROUP_SIZE_M
    spin = Lock + slot
    written = spin + GROUP_SIZE_M
    DW = DW + slot * N + col
    DB = DB + slot * N + col
    x = tl.load(X + col, mask=ok, other=0).to(tl.float32)
    grad_y = tl.load(DY + col, mask=ok, other=0).to(tl.float32)
    gain = tl.load(W + col, mask=ok).to(tl.float32)
    mean = tl.load(Mean + r)
    rstd = tl.load(Rstd + r)
    xhat = (x - mean) * rstd
    g = gain * grad_y
    # Padding lanes must not enter the two row means below.
    xhat = tl.where(ok, xhat, 0.)
    g = tl.where(ok, g, 0.)
    mean_xg = tl.sum(xhat * g, axis=0) / N
    mean_g = tl.sum(g, axis=0) / N
    grad_x = (g - (xhat * mean_xg + mean_g)) * rstd
    tl.store(DX + col, grad_x, mask=ok)
    # This row's terms of dw = sum(dy * xhat) and db = sum(dy), in fp32 until the store.
    part_w = grad_y * xhat
    part_b = grad_y
    while tl.atomic_cas(spin, 0, 1) == 1:
        pass
    # The first row into a buffer overwrites it (and raises the flag); later rows add to it.
    if tl.load(written) == 0:
        tl.atomic_xchg(written, 1)
    else:
        part_w += tl.load(DW, mask=ok)
        part_b += tl.load(DB, mask=ok)
    tl.store(DW, part_w, mask=ok)
    tl.store(DB, part_b, mask=ok)
    tl.atomic_xchg(spin, 0)


@triton.jit
def _layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """Column sums of the (M, N) fp16 partial buffers DW and DB (M = GROUP_SIZE_M of the dx kernel)
    into FINAL_DW and FINAL_DB, (N,) fp16; program p owns columns [p * BLOCK_SIZE_N, +BLOCK_SIZE_N)."""
    col = tl.program_id(0) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc_w = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    # BLOCK_SIZE_M rows per step, kept apart until the end (one reduction over rows, not one per step).
    for first_row in range(0, M, BLOCK_SIZE_M):
        row = first_row + tl.arange(0, BLOCK_SIZE_M)
        inside = (row[:, None] < M) & (col[None, :] < N)
        at = row[:, None] * N + col[None, :]
        acc_w += tl.load(DW + at, mask=inside, other=0.)
        acc_b += tl.load(DB + at, mask=inside, other=0.)
    total_w = tl.sum(acc_w, axis=0)
    total_b = tl.sum(acc_b, axis=0)
    tl.store(FINAL_DW + col, total_w, mask=col < N)
    tl.store(FINAL_DB + col, total_b, mask=col < N)
