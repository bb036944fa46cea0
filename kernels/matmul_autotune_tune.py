"""Tune harness of kernels/matmul_autotune.py (imported by `ttbuild tune` on the GPU machine, never by the build): one shape's launch arguments and grid."""

import torch


def cdiv(a, b):
    return -(-a // b)


def make_args(M, N, K):
    """(args, grid) for C[M, N] = A[M, K] @ B[K, N] in fp16, contiguous: every parameter in
    order as a Triton call passes them (the unit strides are the variants' constexprs); grid
    as in tutorial 03."""
    gen = torch.Generator(device="cuda").manual_seed(M * 31 + N * 7 + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16, generator=gen)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

    def grid(meta):
        return (cdiv(M, meta["BLOCK_SIZE_M"]) * cdiv(N, meta["BLOCK_SIZE_N"]),)

    return args, grid
