"""A `@triton.heuristics` kernel of the serve test project: EVEN skips the mask when the block divides n."""

import torch
import triton
import triton.language as tl


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(dst + offs, tl.load(src + offs))
    else:
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of a contiguous tensor, launched with `.run` on the current stream."""
    out = torch.empty_like(x)
    copy_kernel.run(x, out, x.numel(), BLOCK=128, grid=(triton.cdiv(x.numel(), 128),), warmup=False)
    return out
