"""Kernels of the serve test project: a strided scale (an `== 1` stride, unaligned views), an autotuned row sum, a heuristics masked copy."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, stride, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask)
    tl.store(out_ptr + offs, x * factor, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK_N": 64}, num_warps=2), triton.Config({"BLOCK_N": 256}, num_warps=4)],
                 key=["n_cols"])
@triton.jit
def rowsum_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def scale(x: torch.Tensor, factor: float, block: int = 256) -> torch.Tensor:
    """factor * x for a 1-D (possibly strided) tensor, through `kernel[grid](...)` with a grid callable."""
    out = torch.empty(x.numel(), device=x.device, dtype=x.dtype)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, x.stride(0), factor, BLOCK=block)
    return out


def rowsum(x: torch.Tensor) -> torch.Tensor:
    """Row sums (fp32) of a 2-D tensor through the autotuned kernel."""
    out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    rowsum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0))
    return out
