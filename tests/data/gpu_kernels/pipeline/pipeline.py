"""Test-only kernels for software pipelining (tl.range(..., num_stages=S)): column sums over the rows of a matrix."""

import triton
import triton.language as tl


@triton.jit
def colsum_kernel(x_ptr, y_ptr, M, N, stride_m, BN: tl.constexpr, STAGES: tl.constexpr):
    """y[n] = sum over m < M of x[m, n], one program per block of BN columns; each row's load is
    issued STAGES - 1 iterations ahead (cp.async into shared memory)."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    for m in tl.range(0, M, num_stages=STAGES):
        x = tl.load(x_ptr + m * stride_m + cols, mask=cmask, other=0.0)
        acc += x.to(tl.float32)
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def colmax_kernel(x_ptr, y_ptr, M, N, stride_m, BN: tl.constexpr, STAGES: tl.constexpr):
    """y[n] = max over m < M of x[m, n] with a non-zero `other` (-inf) on masked columns, which must
    survive pipelining (Triton selects it after the shared-memory load)."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.full([BN], float("-inf"), tl.float32)
    for m in tl.range(0, M, num_stages=STAGES):
        x = tl.load(x_ptr + m * stride_m + cols, mask=cmask, other=float("-inf"))
        acc = tl.maximum(acc, x.to(tl.float32))
    tl.store(y_ptr + cols, acc, mask=cmask)
