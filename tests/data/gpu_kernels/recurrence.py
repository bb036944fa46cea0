"""A linear-recurrence kernel in the idiom of state-space and linear-attention libraries, for tests/backend/ttgir/test_backend_shared_cheap.py.

`decay_state_scan`: per step t, a D x D state S (rows along the value index, columns along the key
index) is read against a key row, corrected by a value row, updated by an outer product, and read
against a query row: x and k are loaded along S's columns, v along its rows, all under one mask
`cols < n` (the key and value widths are equal, so the three loads and the store share one mask and
one index range).
"""

import triton
import triton.language as tl


@triton.jit
def decay_state_scan(x_ptr, k_ptr, v_ptr, y_ptr, steps, n, stride, scale, D: tl.constexpr):
    seq = tl.program_id(0)
    cols = tl.arange(0, D)
    ok = cols < n
    base = seq * steps * stride
    p_x = x_ptr + base + cols
    p_k = k_ptr + base + cols
    p_v = v_ptr + base + cols
    p_y = y_ptr + base + cols
    state = tl.zeros([D, D], dtype=tl.float32)
    for _ in range(steps):
        x = tl.load(p_x, mask=ok, other=0.0)
        kk = tl.load(p_k, mask=ok, other=0.0)
        vv = tl.load(p_v, mask=ok, other=0.0)
        delta = scale * (vv - tl.sum(state * kk[None, :], 1))
        state += delta[:, None] * kk[None, :]
        tl.store(p_y, tl.sum(state * x[None, :], 1), mask=ok)
        p_x += stride
        p_k += stride
        p_v += stride
        p_y += stride
