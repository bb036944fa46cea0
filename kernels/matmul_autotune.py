"""Autotuned matrix multiplication in Triton tutorial 03's form: C = A @ B (fp16 in, fp32 accumulate), the configs in a `get_autotune_config()` function, keyed on (M, N, K), and `@triton.heuristics` deciding whether K needs masking.

ttbuild reads both decorators from this source without running it: the row with
`autotune = true` in variants.toml builds one variant per config and EVEN_K value, `ttbuild
tune` times them on a GPU for the shapes the row lists (harness: matmul_autotune_tune.py) and
records the winners in artifacts/tuning/tuned_matmul_kernel.json, which the runtime reads.
"""

import triton
import triton.language as tl


def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


def get_cuda_autotune_config():
    # Block shapes for the mma.sync path: large tiles for large problems, small ones so that
    # small problems still fill the GPU.
    shapes = [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
              (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 5), (32, 64, 32, 2, 5)]
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                          num_warps=w, num_stages=s) for m, n, k, w, s in shapes]


def get_autotune_config():
    if is_cuda():
        return get_cuda_autotune_config()
    return [triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
                          num_warps=4, num_stages=2)]


@triton.autotune(configs=get_autotune_config(), key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_SIZE_K"] == 0})
@triton.jit
def tuned_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                        GROUP_SIZE_M: tl.constexpr, EVEN_K: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N]; one program per BLOCK_SIZE_M x BLOCK_SIZE_N tile of C,
    tiles ordered GROUP_SIZE_M rows of tiles at a time so neighbouring programs share A in L2."""
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows = min(tiles_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows

    rm = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    rn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    rk = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:  # every K block is whole: no mask (the heuristic checked K % BLOCK_SIZE_K)
            a = tl.load(a_tile)
            b = tl.load(b_tile)
        else:
            left = K - k * BLOCK_SIZE_K
            a = tl.load(a_tile, mask=rk[None, :] < left, other=0.0)
            b = tl.load(b_tile, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk

    c = acc.to(tl.float16)
    cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, c,
             mask=(cm[:, None] < M) & (cn[None, :] < N))
