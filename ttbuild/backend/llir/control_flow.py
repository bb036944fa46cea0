"""LLIR rules for structured control flow: scf.for / scf.if / scf.while as LLVM basic blocks and phis.

Semantics: MLIR SCF dialect docs. `scf.for %iv = %lb to %ub step %step iter_args(...)` runs while
iv < ub (signed compare for signless integers, as the SCF-to-CF lowering does); loop-carried
tensors become one phi per element this thread owns (the layout is fixed across iterations).
"""

from __future__ import annotations

import struct

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import walk
from ttbuild.backend.llir.context import I32, Partition, TensorVal
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def flatten(values) -> list:
    """Values as LLVM scalars: a TensorVal's elements in order, a scalar itself."""
    out = []
    for v in values:
        out.extend(v.elems if isinstance(v, TensorVal) else [v])
    return out


def rebuild(templates, scalars) -> list:
    out, i = [], 0
    for t in templates:
        if isinstance(t, TensorVal):
            n = len(t.elems)
            out.append(TensorVal(list(scalars[i:i + n]), t.layout, t.shape))
            i += n
        else:
            out.append(scalars[i])
            i += 1
    return out


def _uses_smem(op) -> bool:
    """Whether a region op holds a shared-memory user (reduction or layout conversion)."""
    return any(o.name in (TT.REDUCE, TTG.CONVERT_LAYOUT, TT.SCAN) for o in walk(op))


def _after_regions(ctx, op=None):
    # A region (or the next loop iteration) that writes shared memory may race with reads on
    # another path; without shared-memory users inside, the barrier state flows through.
    if op is None or _uses_smem(op):
        ctx.after_smem_read()


def _wgmma_accumulators(op) -> set:
    """Indices of the iter_args that reach a `ttng.warp_group_dot`'s accumulator (operand 2),
    directly or through `ttng.warp_group_dot_wait` results (which pass their operands through)."""
    out = set()
    for j, arg in enumerate(list(op.regions[0].blocks[0].arguments)[1:]):
        todo, seen = [arg], set()
        while todo and j not in out:
            v = todo.pop()
            for use in v.uses:
                user = use.owner
                if user.name == TTNG.WARP_GROUP_DOT and use.operand_number == 2:
                    out.add(j)
                elif user.name == TTNG.WARP_GROUP_DOT_WAIT and user not in seen:
                    seen.add(user)
                    todo.append(user.results[use.operand_number])
    return out


def _materialized(b, v):
    """A constant accumulator element set before the loop by an opaque move (inline asm with a
    side effect: LLVM neither folds nor sinks it). As a plain constant, LLVM materializes it on the
    loop's zero-trip edge, in the accumulator registers, after the branch: ptxas then sees non-wgmma
    writes of accumulator registers between a wgmma and its wait on another path and serializes
    every wgmma of the kernel (C7515, "wgmma.mma_async instructions are serialized"; measured on
    attention backward, where the dK/dV loop may run zero times). Triton's PTX sets them before
    the branch."""
    if not isinstance(v, ir.Constant) or str(v.type) not in ("float", "i32"):
        return v
    bits = struct.unpack("<I", struct.pack("<f", v.constant))[0] if str(v.type) == "float" else v.constant & 0xFFFFFFFF
    out = b.asm(ir.FunctionType(I32, []), f"mov.b32 $0, {bits:#x};", "=r", [], side_effect=True)
    return b.bitcast(out, v.type) if str(v.type) == "float" else out


def _blocks(fn, *names: str) -> list:
    """New basic blocks of `fn` named `names`, appended in that order."""
    return [fn.append_basic_block(n) for n in names]


def _entry_phis(b, values, pre) -> list:
    """One phi per value at the builder's position, each entered with that value from block `pre`."""
    phis = []
    for v in values:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    return phis


@rule(SCF.FOR)
def scf_for(ctx, op, lb, ub, step, *inits):
    """`scf.for` -> header / body / exit blocks with one phi per flattened loop-carried element, `iv < ub` signed (see the module docstring)."""
    b = ctx.builder
    fn = b.function
    pre = b.block
    header, body, exit_ = _blocks(fn, "for.header", "for.body", "for.exit")
    accs = _wgmma_accumulators(op)
    flat = flatten([TensorVal([_materialized(b, e) for e in v.elems], v.layout, v.shape)
                    if j in accs and isinstance(v, TensorVal) else v for j, v in enumerate(inits)])
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type, name="iv")
    iv.add_incoming(lb, pre)
    phis = _entry_phis(b, flat, pre)
    b.cbranch(b.icmp_signed("<", iv, ub), body, exit_)
    b.position_at_end(body)
    _after_regions(ctx, op)
    carried = rebuild(inits, phis)
    yields = ctx.run_block(op.regions[0].blocks[0], [iv] + carried)
    _after_regions(ctx, op)
    latch = b.block
    nxt = b.add(iv, step, name="iv.next")
    iv.add_incoming(nxt, latch)
    for p, v in zip(phis, flatten(yields)):
        p.add_incoming(v, latch)
    b.branch(header)
    b.position_at_end(exit_)
    res = rebuild(inits, phis)
    return res[0] if len(res) == 1 else res


@rule(SCF.IF)
def scf_if(ctx, op, cond):
    """`scf.if` -> then / else / merge blocks with one phi per flattened result element."""
    b = ctx.builder
    fn = b.function
    then_bb = fn.append_basic_block("if.then")
    else_bb = fn.append_basic_block("if.else")
    merge = fn.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)
    arms = []
    for region, bb in zip(op.regions, (then_bb, else_bb)):
        b.position_at_end(bb)
        _after_regions(ctx, op)
        ys = ctx.run_block(region.blocks[0], []) if len(region.blocks) else []
        _after_regions(ctx, op)
        arms.append((ys, b.block))
        b.branch(merge)
    b.position_at_end(merge)
    n = len(op.results)
    if not n:
        return None
    (ty, tbb), (ey, ebb) = arms
    out = []
    for tv, ev in zip(flatten(ty), flatten(ey)):
        p = b.phi(tv.type)
        p.add_incoming(tv, tbb)
        p.add_incoming(ev, ebb)
        out.append(p)
    res = rebuild(ty, out)
    return res[0] if n == 1 else res


@rule(SCF.WHILE)
def scf_while(ctx, op, *inits):
    """before-region computes the condition and forwards values to the after-region, whose
    yield feeds the before-region again (MLIR scf.while)."""
    b = ctx.builder
    fn = b.function
    pre = b.block
    before, after, exit_ = _blocks(fn, "while.before", "while.after", "while.exit")
    b.branch(before)
    b.position_at_end(before)
    phis = _entry_phis(b, flatten(inits), pre)
    _after_regions(ctx, op)
    blk = op.regions[0].blocks[0]
    ops = list(blk.operations)
    cond_op = ops[-1]
    vals = ctx.run_block(blk, rebuild(inits, phis))
    cond, fwd = vals[0], vals[1:]
    b.cbranch(cond, after, exit_)
    cond_bb = b.block
    b.position_at_end(after)
    _after_regions(ctx, op)
    ys = ctx.run_block(op.regions[1].blocks[0], fwd)
    _after_regions(ctx, op)
    for p, v in zip(phis, flatten(ys)):
        p.add_incoming(v, b.block)
    b.branch(before)
    b.position_at_end(exit_)
    n = len(op.results)
    if not n:
        return None
    # Results are the forwarded values as they were when the condition failed.
    res = fwd
    del cond_op, cond_bb
    return res[0] if n == 1 else res


# setmaxnreg budgets (PTX ISA 9.7.17.1, multiples of 8 in 24..256) when a partition's warps and the
# kernel's 8 warps leave fewer than 255 registers a thread (65536 / 384 = 170): the producer
# warpgroup gives registers back, the consumers take them (FlashAttention-3's and CUTLASS's
# warp-specialized Hopper kernels: 24-40 for the producer, 232-240 for two consumer warpgroups).
PRODUCER_REGS, CONSUMER_REGS = 40, 232
CONSUMER_BARRIER, PRODUCER_BARRIER = 1, 2  # named barriers (0 is the CTA's bar.sync)


def register_share(warps: int) -> int:
    """Registers a thread when a block of `warps` warps takes the SM's 64K alone (a multiple of 8,
    the allocation granule): the `.maxnreg` of a kernel whose partitions move registers."""
    return 65536 // (32 * warps) // 8 * 8


def needs_setmaxnreg(num_warps: int, total_warps: int) -> bool:
    """Whether a warp-specialized kernel moves registers between its partitions: when the block
    of `total_warps` would cap a thread below 255 registers."""
    return total_warps > num_warps and register_share(total_warps) < 255


@rule(TTG.WARP_SPECIALIZE)
def warp_specialize(ctx, op):
    """Region 0 on the kernel's `num_warps` warps (threads 0 .. 32 * num_warps - 1), region 1
    on the producer warp after them (the first of a producer warpgroup, whose others return):
    a branch on tid.x. Each region's CTA barriers become its own named barrier
    (`bar.sync id, threads`, PTX ISA 9.7.13.1) and its one-thread work goes to its first thread.
    With 8 consumer warps, `setmaxnreg` moves registers from the producer warpgroup to them."""
    b = ctx.builder
    fn = b.function
    consumers = 32 * ctx.num_warps
    producer_warps = list(mu.ir.DenseI32ArrayAttr(op.operation.attributes["partitionNumWarps"]))[0]
    tid = ctx.sreg("tid.x")
    cons_bb, prod_bb, issue_bb, end_bb = (fn.append_basic_block(n) for n in ("ws.consumer", "ws.producer",
                                                                              "ws.issue", "ws.end"))
    b.cbranch(b.icmp_unsigned("<", tid, ir.Constant(I32, consumers)), cons_bb, prod_bb)
    regs = needs_setmaxnreg(ctx.num_warps, ctx.num_warps + producer_warps)
    b.position_at_end(cons_bb)
    if regs:
        ctx.asm_effect(f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS};", "", [])
    ctx.enter_partition(Partition(0, consumers, CONSUMER_BARRIER))
    ctx.run_block(op.regions[0].blocks[0], [])
    b.branch(end_bb)
    b.position_at_end(prod_bb)
    if regs:
        ctx.asm_effect(f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS};", "", [])
    if producer_warps > 1:  # a producer warpgroup: only its first warp issues
        b.cbranch(b.icmp_unsigned("<", tid, ir.Constant(I32, consumers + 32)), issue_bb, end_bb)
    else:
        b.branch(issue_bb)
    b.position_at_end(issue_bb)
    ctx.enter_partition(Partition(consumers, 32, PRODUCER_BARRIER))
    ctx.run_block(op.regions[1].blocks[0], [])
    b.branch(end_bb)
    b.position_at_end(end_bb)
    ctx.enter_partition(None)
