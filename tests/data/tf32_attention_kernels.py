"""Test kernels: attention forward on fp32 tiles (tl.dot's default tf32), the causal form prefill libraries write, for the wgmma RS tf32 path and its shuffle conversion of P."""

import triton
import triton.language as tl


@triton.jit
def tf32_causal_attn(Q, K, V, Out, scale, n_rows, row_stride,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD)
    keys0 = tl.arange(0, BLOCK_N)
    q = tl.load(Q + rows[:, None] * row_stride + dims[None, :], mask=rows[:, None] < n_rows, other=0.0)
    run_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    run_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    out = tl.zeros([BLOCK_M, HEAD], dtype=tl.float32)
    last = tl.minimum((pid + 1) * BLOCK_M, n_rows)
    for lo in range(0, last, BLOCK_N):
        keys = lo + keys0
        kt = tl.load(K + keys[None, :] * row_stride + dims[:, None], mask=keys[None, :] < last, other=0.0)
        s = tl.dot(q, kt)
        s = tl.where(rows[:, None] >= keys[None, :], s * scale, -1.0e8)
        new_max = tl.maximum(run_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        decay = tl.math.exp2(run_max - new_max)
        run_sum = run_sum * decay + tl.sum(p, 1)
        v = tl.load(V + keys[:, None] * row_stride + dims[None, :], mask=keys[:, None] < last, other=0.0)
        out = tl.dot(p, v, out * decay[:, None])
        run_max = new_max
    tl.store(Out + rows[:, None] * row_stride + dims[None, :], out / run_sum[:, None], mask=rows[:, None] < n_rows)
