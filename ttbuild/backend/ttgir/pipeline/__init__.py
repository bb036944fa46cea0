"""TTGIR pass: software pipelining of global loads in `scf.for` loops marked `tt.num_stages = S` (S >= 2) through cp.async into an (S-1)-slot shared-memory ring.

What Triton 3.6 does for a loop without `tt.dot` (lib/Dialect/TritonGPU/Transforms/Pipeliner:
AssignLatencies.cpp picks the loads, LowerLoops.cpp turns them into async copies,
PipelineExpander.cpp peels the prologue), and what this pass reproduces op for op:

- Loops that carry the `tt.num_stages` attribute (written by `tl.range(..., num_stages=S)`)
  are pipelined at S; a loop whose body holds a `tt.dot` is pipelined at the kernel-level
  `num_stages` option (the variant's) unless it carries its own. Any other loop, or S == 1, is
  left alone.
- Dot loops (after ttbuild.backend.ttgir.accelerate_matmul): a load whose sole user is a
  `ttg.local_alloc` read only by a `ttg.local_load` into `#ttg.dot_op` (other = 0 or absent; a
  non-zero `other` keeps the load in registers) gets an (S-1)-slot ring in that local_alloc's
  `#ttg.swizzled_shared` encoding (MMAv2: S-1 buffers, Triton's LowerLoops), and the
  local_load reads the slot (`ttg.memdesc_index`) with the wait's token; the register
  local_alloc disappears. A `ttng.warp_group_dot` (wgmma) operand the same way, its ring in
  `#ttg.nvmma_shared` with S slots (one more: Triton's loadRequiresAdditionalBuffer), the dot
  reading the slot's view, the proxy fence of the register tile gone, and its group left in
  flight into the next iteration (`wgmma_waits.keep_in_flight`). The other loads of a dot loop that feed
  a dot through any chain of ops (attention backward's rows of M and Delta, which the softmax
  and dS read: Triton's AssignLatencies walks back from each dot) are pipelined by the rules
  below, into the plain ring; the rest only when the loop asked for it with tl.range(num_stages=...).
- A `tt.load` at the top level of the loop body is pipelined when its pointer and mask are
  computed, inside the loop, by pure ops from the induction variable, loop-invariant values and
  loop-carried values that the body itself advances by pure ops from the same (`ptrs +=
  BLOCK_K * stride`, the offsets of a block pointer carried through the loop): no other load
  (indirect loads stay), and each thread's
  contiguous chunk is at least 4 bytes (cp.async moves 4, 8 or 16 bytes, PTX ISA 9.7.9.25.3.1;
  Triton's `canBeConvertedToAsyncLoad` has the same 32-bit floor). Narrower loads stay `tt.load`.
- Per pipelined load: `ttg.local_alloc` of (S-1) x tile (`#ttg.swizzled_shared<{vec = 1,
  perPhase = 1, maxPhase = 1, order}>`, `#ttg.shared_memory`, `mutable`). Prologue: iterations
  0..S-2 issue `ttg.async_copy_global_to_local` (mask = original mask AND `lb + k*step < ub`),
  each iteration's copies followed by one `ttg.async_commit_group`. In the loop: `ttg.async_wait
  {num = S-2}` on the oldest group's token, `ttg.memdesc_index` + `ttg.local_load` in place of
  the load (an `other` that is not +0 is kept with `arith.select(mask, loaded, other)`: masked-off
  bytes are zero-filled, as Triton does), then the copies for iteration i+S-1 into the slot just
  consumed, predicated on `iv < ub - (S-1)*step`. Insert/extract slot indices and the S-1 tokens
  in flight are loop-carried. After the loop: `ttg.async_wait {num = 0}` and `ttg.local_dealloc`.
- Carried addresses (Triton's pipeline expander peels their updates alike): prologue iteration
  k >= 1 first advances the carried values of iteration k-1 by cloning the body's updates; the
  loop carries them S-2 iterations ahead and, before its copy for iteration i+S-1, advances them
  once more. The original carried value stays only where something else needs it (the loop's
  result, an op that is not its own update); otherwise it is dropped, so the loop carries the
  advanced pointer alone, as Triton's does.

Offsets of the buffers in shared memory are placed by ttbuild.backend.analysis.allocation.allocate (after the
scratch of reductions and layout conversions, so they never overlap).

The package follows Triton's division of the work: .assign_latencies picks the loops, their stage
counts and their loads; .lower_loops rewrites a loop (rings, copies, consumers, prologue; a
TMA-fed loop's loads complete on one mbarrier per slot, or one per group of loads with the same
first reader when each group moves 32 KiB or more, as Triton's LowerLoops groups them);
.expander reshapes the `scf.for` (iter_args added and dropped); .wgmma_waits keeps wgmma groups
in flight across iterations; .release hands the TMA ring slots of multi-warpgroup dot-chain loops
back through empty mbarriers instead of a CTA barrier per refill.
"""

from __future__ import annotations

from ttbuild.backend.analysis.axis import AxisAnalysis
from ttbuild.backend.ir.ops import ATTR, SCF, TT
from ttbuild.backend.ir.optraits import walk
from ttbuild.backend.ttgir.pipeline.assign_latencies import candidates, stages_for
from ttbuild.backend.ttgir.pipeline.expander import const_int
from ttbuild.backend.ttgir.pipeline.lower_loops import Loop


def _loops(func) -> list:
    """The scf.for ops of `func`, inner loops first (post-order)."""
    return [op for op in walk(func, post_order=True) if op.name == SCF.FOR]


def _runs_at_most_once(loop) -> bool:
    """Whether an `scf.for` has constant bounds and step and at most one iteration (MLIR's
    scf.for canonicalization, which Triton's make_ttir runs, inlines or erases such a loop)."""
    lb, ub, step = (const_int(loop.operands[i]) for i in range(3))
    if lb is None or ub is None or step is None or step <= 0:
        return False
    return ub - lb <= step


def pipeline(module, num_stages: int = 1, num_warps: int = 4) -> int:
    """Pipeline every eligible load of every `scf.for` with `tt.num_stages` >= 2, and the dot
    operands of every loop holding a `tt.dot` at `num_stages` (the variant option) unless the
    loop says otherwise (inner loops first); returns how many loads became async copies.
    Raises nothing on loops it skips."""
    count = 0
    for func in module.body.operations:
        if func.operation.name != TT.FUNC:
            continue
        loops = _loops(func)
        if not any(stages_for(f, num_stages) >= 2 for f in loops):
            continue
        axis = AxisAnalysis(func)
        for f in loops:
            S = stages_for(f, num_stages)
            if S < 2 or _runs_at_most_once(f):
                continue
            cands = candidates(f, axis, plain=ATTR.NUM_STAGES in f.operation.attributes)
            if not cands:
                continue
            Loop(f, S, cands, num_warps).rewrite()
            count += len(cands)
    return count
