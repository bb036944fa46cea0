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


@triton.jit
def colsum_plain_kernel(x_ptr, y_ptr, M, N, stride_m, BN: tl.constexpr):
    """colsum_kernel over a plain `range`: Triton leaves such a loop (no dot) unpipelined."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    for m in range(0, M):
        acc += tl.load(x_ptr + m * stride_m + cols, mask=cmask, other=0.0)
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def colsum_step_kernel(x_ptr, y_ptr, M, N, stride_m, start, step, BN: tl.constexpr, STAGES: tl.constexpr):
    """Sum of rows start, start+step, ... < M: a loop whose lower bound and step are runtime values."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    for m in tl.range(start, M, step, num_stages=STAGES):
        acc += tl.load(x_ptr + m * stride_m + cols, mask=cmask, other=0.0).to(tl.float32)
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def gather_kernel(idx_ptr, x_ptr, y_ptr, M, N, BN: tl.constexpr, STAGES: tl.constexpr):
    """y[n] = sum over m of x[idx[m, n]]: the idx load is pipelined, the x load (its address comes
    from a load in the loop) stays a tt.load."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    for m in tl.range(0, M, num_stages=STAGES):
        idx = tl.load(idx_ptr + m * N + cols, mask=cmask, other=0)
        acc += tl.load(x_ptr + idx, mask=cmask, other=0.0)
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def tilesum_kernel(x_ptr, y_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
    """Column sums by [BM, BN] tiles: a 2-D pipelined load, reduced along rows across warps in
    the loop (shared-memory scratch live beside the ring buffers)."""
    pid = tl.program_id(0)
    rows = tl.arange(0, BM)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    for m0 in tl.range(0, M, BM, num_stages=STAGES):
        r = m0 + rows
        mask = (r[:, None] < M) & cmask[None, :]
        x = tl.load(x_ptr + r[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def colsum_ptr_kernel(x_ptr, y_ptr, M, N, stride_m, BN: tl.constexpr, STAGES: tl.constexpr):
    """colsum_kernel with the row pointers advanced through a loop-carried value
    (`ptrs += stride_m`, the form of Triton's matmul tutorial): the copies of the next
    iterations read the pointer advanced ahead of the loop."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    ptrs = x_ptr + cols
    for _ in tl.range(0, M, num_stages=STAGES):
        acc += tl.load(ptrs, mask=cmask, other=0.0).to(tl.float32)
        ptrs += stride_m
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def tilesum_ptr_kernel(x_ptr, y_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
    """Column sums by [BM, BN] tiles, pointers and the row offset of the tail mask both carried
    (`ptrs += BM * stride_m`, `r0 += BM`); the loop counts tiles."""
    pid = tl.program_id(0)
    rows = tl.arange(0, BM)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    ptrs = x_ptr + rows[:, None] * stride_m + cols[None, :]
    acc = tl.zeros([BN], tl.float32)
    r0 = 0
    for _ in tl.range(0, tl.cdiv(M, BM), num_stages=STAGES):
        mask = (rows[:, None] < M - r0) & cmask[None, :]
        acc += tl.sum(tl.load(ptrs, mask=mask, other=0.0).to(tl.float32), axis=0)
        ptrs += BM * stride_m
        r0 += BM
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def tilesum_bp_kernel(x_ptr, y_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
    """tilesum over a block pointer advanced through the loop (carried as its i64 offsets), both
    dimensions bounds-checked with zero padding."""
    pid = tl.program_id(0)
    bp = tl.make_block_ptr(x_ptr, (M, N), (stride_m, 1), (0, pid * BN), (BM, BN), (1, 0))
    acc = tl.zeros([BN], tl.float32)
    for _ in tl.range(0, tl.cdiv(M, BM), num_stages=STAGES):
        acc += tl.sum(tl.load(bp, boundary_check=(0, 1), padding_option="zero").to(tl.float32), axis=0)
        bp = tl.advance(bp, (BM, 0))
    cols = pid * BN + tl.arange(0, BN)
    tl.store(y_ptr + cols, acc, mask=cols < N)


@triton.jit
def colsum_ptr_after_kernel(x_ptr, y_ptr, z_ptr, M, N, stride_m, BN: tl.constexpr, STAGES: tl.constexpr):
    """y = column sums of rows 0..M-2 through a carried pointer, z = row M-1 read through that
    pointer after the loop: the loop's own (not advanced) pointer must survive pipelining."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    ptrs = x_ptr + cols
    for _ in tl.range(0, M - 1, num_stages=STAGES):
        acc += tl.load(ptrs, mask=cmask, other=0.0)
        ptrs += stride_m
    tl.store(y_ptr + cols, acc, mask=cmask)
    tl.store(z_ptr + cols, tl.load(ptrs, mask=cmask & (M > 0), other=0.0), mask=cmask)


@triton.jit
def colsum_jump_kernel(x_ptr, jump_ptr, y_ptr, M, N, BN: tl.constexpr, STAGES: tl.constexpr):
    """Rows visited by jumps read from memory (`ptrs += tl.load(jump_ptr + m)`): the carried
    pointer's update reads a load, so its load stays a tt.load (CPU test only)."""
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    cmask = cols < N
    acc = tl.zeros([BN], tl.float32)
    ptrs = x_ptr + cols
    for m in tl.range(0, M, num_stages=STAGES):
        acc += tl.load(ptrs, mask=cmask, other=0.0)
        ptrs += tl.load(jump_ptr + m)
    tl.store(y_ptr + cols, acc, mask=cmask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  stride_ak: tl.constexpr, stride_bn: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B in the form of Triton's matmul tutorial (grouped program order, rows and columns
    wrapped with % at the loads, K masked, pointers advanced through the loop): the dot loop is
    pipelined at the variant's num_stages. The unit strides are constexprs (Triton's launcher
    specializes an integer argument equal to 1 the same way); C is stored in fp32."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + offs_cn[None, :]
    tl.store(c_ptrs, acc, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def dot_other_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B with A's masked-off K columns read as 1 (a non-zero `other`): A's load stays in
    registers (a zero-filled ring slot would not hold the 1s), B's is pipelined (CPU test only)."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * BN + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=1.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * BN
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


@triton.jit
def matmul_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_PROGS: tl.constexpr):
    """C = A @ B with each program looping over output tiles (a persistent grid): the pipelined
    K loop is nested in the tile loop, so its prologue, rings and epilogue (whose scratch shares
    bytes with the rings) run once per tile."""
    num_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_n
    for tile in range(tl.program_id(0), num_tiles, NUM_PROGS):
        pid_m = tile // num_n
        pid_n = tile % num_n
        offs_am = (pid_m * BM + tl.arange(0, BM)) % M
        offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
        offs_k = tl.arange(0, BK)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK * stride_bk
        offs_cm = pid_m * BM + tl.arange(0, BM)
        offs_cn = pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + stride_cm * offs_cm[:, None] + offs_cn[None, :], acc,
                 mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def matmul_rowsum_kernel(a_ptr, b_ptr, c_ptr, r_ptr, M, N, K, stride_am, stride_bk,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    """C = A @ B + rowsum(R) for one BM x BN tile, the K loop a tl.range(num_stages=STAGES) (it
    wins over the variant's num_stages) holding a dot and another load: the dot operands get
    swizzled rings, R's rows (r[k * BM + m]) a plain one."""
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    rs = tl.zeros((BM,), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), num_stages=STAGES):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        rs += tl.load(r_ptr + k * BM + offs_m)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc + rs[:, None])
