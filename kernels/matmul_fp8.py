"""Matrix multiplication with fp8 (e4m3) inputs, Triton tutorial 03 form: C = A @ B, fp32 accumulator, fp16 C, programs grouped GROUP_SIZE_M rows at a time; B is passed pre-transposed (K-major: stride_bk = 1), as the tutorial does for fp8 inputs.

The same tutorial kernel as matmul.py, under its own name: Triton's JIT makes every integer
argument equal to 1 a constant, so fp8 calls (stride_bk = 1) and fp16 calls (stride_bn = 1)
specialize different parameters; variants.toml spells those as constexprs, and one kernel name
must keep one set of constexpr parameters for the runtime to dispatch among its variants.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_fp8_kernel(
        # Pointers to matrices: A (M, K) and B (K, N) in fp8, C (M, N) in fp16
        a_ptr, b_ptr, c_ptr,
        # Matrix dimensions
        M, N, K,
        # Strides: elements to step to the next row / column of each matrix. B is K-major here:
        # its K stride is 1 and its N stride is K (B = Bt.T for a row-major Bt of shape (N, K)).
        stride_am, stride_ak,  #
        stride_bk, stride_bn,  #
        stride_cm, stride_cn,
        # Meta-parameters
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,  #
        GROUP_SIZE_M: tl.constexpr,  #
):
    """C = A x B for fp8 A (M, K) and K-major fp8 B (K, N); C is (M, N) fp16."""
    # Program id -> (pid_m, pid_n), GROUP_SIZE_M block rows at a time so that the programs
    # running together share their A rows and B columns in L2.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows of A and columns of B wrap around (% M, % N): every load stays in bounds and the
    # rows/columns past the edge are dropped by the masked store.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # The last K block may run past K: masked elements read as 0 and add nothing.
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)
