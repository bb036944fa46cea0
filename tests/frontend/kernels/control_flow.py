# Runtime if/else → scf.if with merged values; constexpr if folds; for over range → scf.for with
# loop-carried accumulators; tl.static_range unrolls; @jit helpers inline; cdiv, zeros, full.
# Constants of loops and branches are hoisted to the entry block (as Triton's canonicalizer does).
# cdiv(n, BLOCK) = (n + BLOCK - 1) // BLOCK:
# The inlined helper `scale`:
# tl.range(num_stages=) → the attribute Triton's pipeliner reads:
# static_range(3) unrolled into three adds of 1.0, 2.0... folded per iteration:
# CHECK-COUNT-3: "arith.addf"

import triton
import triton.language as tl


@triton.jit
def scale(x, factor: tl.constexpr):
    """Helpers inline: no tt.call in the output."""
    return x * factor


@triton.jit
def control_kernel(out_ptr, in_ptr, n, bias, BLOCK: tl.constexpr, USE_BIAS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in tl.range(0, tl.cdiv(n, BLOCK), num_stages=2):
        x = tl.load(in_ptr + t * BLOCK + offs, mask=t * BLOCK + offs < n, other=0.0)
        acc += scale(x, 2.0)
    for k in tl.static_range(3):
        acc = acc + (k + 1.0)
    if pid == 0:
        res = acc * 0.5
    else:
        res = tl.full((BLOCK,), 1.0, tl.float32) + tl.zeros((BLOCK,), tl.float32) * 0 + pid
    if USE_BIAS:
        res = res + bias
    tl.store(out_ptr + pid * BLOCK + offs, res)
