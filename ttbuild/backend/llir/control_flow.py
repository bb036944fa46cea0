"""LLIR rules for structured control flow: scf.for / scf.if / scf.while as LLVM basic blocks and phis.

Semantics: MLIR SCF dialect docs. `scf.for %iv = %lb to %ub step %step iter_args(...)` runs while
iv < ub (signed compare for signless integers, as the SCF-to-CF lowering does); loop-carried
tensors become one phi per element this thread owns (the layout is fixed across iterations).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

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


# setmaxnreg budgets (PTX ISA 9.7.17.1, multiples of 8 in 24..256): the producer warpgroup gives
# registers back, the consumers take them (FlashAttention-3's and CUTLASS's warp-specialized Hopper
# kernels: 24-40 for the producer, 232-240 for two consumer warpgroups).
PRODUCER_REGS = 40
PRODUCER = 1  # the region of a ttg.warp_specialize op that issues the loads (ttgir.warp_specialize)


@dataclass(frozen=True)
class RegisterPlan:
    """Registers of a warp-specialized kernel whose partitions move them: the kernel's `.maxnreg`
    cap (what the launch reserves per thread) and the setmaxnreg targets of its consumer and
    producer partitions."""
    cap: int
    consumer: int
    producer: int


def register_plan(num_warps: int, total_warps: int, producer_warps: int = 4) -> RegisterPlan | None:
    """How a block of `total_warps` (the kernel's `num_warps` consumers, a producer warpgroup and
    any second consumer group) shares the SM's 64K registers, or None when it moves none. A block
    of 8 warps aims at two CTAs an SM (4 consumer warps: the unspecialized kernel's occupancy),
    larger blocks at one. The cap is the CTA's even share (a multiple of 8, the allocation
    granule); when it is below 255 the producer drops to PRODUCER_REGS and the consumers split
    the rest (at most 256)."""
    if total_warps <= num_warps:
        return None
    ctas = 2 if total_warps <= 8 else 1
    cap = 65536 // (32 * total_warps * ctas) // 8 * 8
    if cap >= 255:
        return None
    consumers = total_warps - producer_warps
    share = (cap * total_warps - PRODUCER_REGS * producer_warps) // consumers // 8 * 8
    return RegisterPlan(cap, min(256, share), PRODUCER_REGS)


@rule(TTG.WARP_SPECIALIZE)
def warp_specialize(ctx, op):
    """Region 0 on the kernel's `num_warps` warps (threads 0 .. 32 * num_warps - 1), each further
    region on its `partitionNumWarps` warps after them, in order, chosen by a branch on tid.x.
    Region 1 is the producer: its first warp issues, the others of a warpgroup return. Regions 2
    and on are further consumer groups of `num_warps` (ttgir.warp_specialize's ping-pong). Each
    region is lowered as a CTA of its own warps: tid.x counts from its first thread (Ctx.sreg),
    its CTA barriers are named barrier 1 + region (`bar.sync id, threads`, PTX ISA 9.7.13.1).
    When the block leaves a thread fewer than 255 registers, `setmaxnreg` moves registers from
    the producer warpgroup to the consumers (PTX ISA 9.7.17.1)."""
    b = ctx.builder
    fn = b.function
    sizes = [ctx.num_warps, *mu.ir.DenseI32ArrayAttr(op.operation.attributes["partitionNumWarps"])]
    regs = register_plan(ctx.num_warps, sum(sizes), sizes[PRODUCER])
    tid = ctx.sreg("tid.x")
    blocks = [fn.append_basic_block("ws.consumer" if k != PRODUCER else "ws.producer") for k in range(len(sizes))]
    end = fn.append_basic_block("ws.end")
    first = 0
    for k, warps in enumerate(sizes):
        last = first + 32 * warps
        if k < len(sizes) - 1:
            rest = fn.append_basic_block("ws.next")
            b.cbranch(b.icmp_unsigned("<", tid, ir.Constant(I32, last)), blocks[k], rest)
        else:
            rest = None
            b.branch(blocks[k])
        b.position_at_end(blocks[k])
        if regs is not None:
            n = regs.producer if k == PRODUCER else regs.consumer
            ctx.asm_effect(f"setmaxnreg.{'dec' if k == PRODUCER else 'inc'}.sync.aligned.u32 {n};", "", [])
        threads = 32 * warps
        if k == PRODUCER and warps > 1:  # a producer warpgroup: only its first warp issues
            issue = fn.append_basic_block("ws.issue")
            b.cbranch(b.icmp_unsigned("<", tid, ir.Constant(I32, first + 32)), issue, end)
            b.position_at_end(issue)
            threads = 32
        ctx.enter_partition(Partition(first, threads, 1 + k))
        ctx.run_block(op.regions[k].blocks[0], [])
        b.branch(end)
        ctx.enter_partition(None)
        if rest is not None:
            b.position_at_end(rest)
        first = last
    b.position_at_end(end)
    ctx.enter_partition(None)


@rule(TTNG.NAMED_BARRIER_WAIT)
def named_barrier_wait(ctx, op, bar, threads):
    """`bar.sync id, threads` (PTX ISA 9.7.13.1): the calling warps wait until `threads` threads
    arrived at named barrier `id` (waiters and `bar.arrive` callers together)."""
    fn = ctx.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.count", ir.VoidType(), [I32, I32])
    ctx.builder.call(fn, [bar, threads])


@rule(TTNG.NAMED_BARRIER_ARRIVE)
def named_barrier_arrive(ctx, op, bar, threads):
    """`bar.arrive id, threads` (PTX ISA 9.7.13.1): count the calling warps at named barrier `id`
    without waiting."""
    fn = ctx.intrinsic("llvm.nvvm.barrier.cta.arrive.aligned.count", ir.VoidType(), [I32, I32])
    ctx.builder.call(fn, [bar, threads])
