"""A linear layer, y = act(x @ W^T + bias), in the form of Triton's tutorial 03: x (M, K), W (N, K) as nn.Linear stores it (so W^T is a K-major B operand), bias (N,), fp32 accumulator, bias and activation fused before the single store of y (M, N).

ACTIVATION: "" (none), "relu", "leaky_relu" (slope 0.01) or "gelu" (tanh approximation, as
torch's `gelu(approximate="tanh")`). The output dtype is y's element type.
"""

import triton
import triton.language as tl


@triton.jit
def linear_kernel(
        x_ptr, w_ptr, bias_ptr, y_ptr,
        M, N, K,
        stride_xm, stride_xk,  #
        stride_wn, stride_wk,  #
        stride_ym, stride_yn,
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,  #
        GROUP_SIZE_M: tl.constexpr,  #
        ACTIVATION: tl.constexpr  #
):
    # Grouped program order (tutorial 03): GROUP_SIZE_M block rows share W columns in L2.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_xm = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_wn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    x_ptrs = x_ptr + (offs_xm[:, None] * stride_xm + offs_k[None, :] * stride_xk)
    # A BLOCK_SIZE_K x BLOCK_SIZE_N tile of W^T: row k, column n is W[n, k].
    wT_ptrs = w_ptr + (offs_k[:, None] * stride_wk + offs_wn[None, :] * stride_wn)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        x = tl.load(x_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        wT = tl.load(wT_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(x, wT, acc)
        x_ptrs += BLOCK_SIZE_K * stride_xk
        wT_ptrs += BLOCK_SIZE_K * stride_wk

    offs_ym = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_yn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    # Bias and activation on the fp32 accumulator, before the one rounding to y's dtype.
    bias = tl.load(bias_ptr + offs_yn, mask=offs_yn < N, other=0.0)
    acc += bias.to(tl.float32)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    elif ACTIVATION == "gelu":
        acc = gelu_tanh(acc)
    y = acc.to(y_ptr.dtype.element_ty)

    y_ptrs = y_ptr + stride_ym * offs_ym[:, None] + stride_yn * offs_yn[None, :]
    tl.store(y_ptrs, y, mask=(offs_ym[:, None] < M) & (offs_yn[None, :] < N))


@triton.jit
def gelu_tanh(x):
    # 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
    return x * tl.sigmoid(1.5957691216057308 * x * (1.0 + 0.044715 * x * x))
