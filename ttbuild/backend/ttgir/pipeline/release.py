"""Pipeliner, slot release: in a TMA-fed wgmma loop of several warpgroups, each ring slot is handed back through an "empty" mbarrier instead of a CTA barrier before every refill.

Before the copies of iteration i refill the slot iteration i-1 read, every thread must be done
with it: its wgmma groups reading the slot retired, and its wait on the slot's "full" mbarrier
for that phase passed (a parity wait cannot tell a phase from the one two later). Triton 3.6
orders this with a `bar.sync` before each refill (lowered from its membar analysis), which makes
the warpgroups of a CTA meet once per iteration: two warpgroups of an attention loop then run
their softmax at the same time and leave the tensor cores idle together.

Here, as CUTLASS's consumer release (PipelineTmaAsync) and Triton's warp-specialized loops do
it, each slot also gets an "empty" mbarrier that counts one arrival per thread:
- every thread arrives on the empty barrier of the slot iteration i-1 read, right after the
  first `ttng.warp_group_dot_wait` of iteration i that retires iteration i-1's groups (its
  `pendings` is at most the wgmma ops issued before it in the body), from the second iteration
  on (`ttng.arrive_barrier {count = 1, perThread}`: Triton's per-thread arrive; the first
  iteration's `extract`, the slot read before, is -1);
- before refilling that slot, every thread waits for the phase of those arrivals (parity 1
  first, which a fresh mbarrier reports complete; flipped each time the refill slot wraps), and
  the refill's `ttng.barrier_expect` and copies are marked `ttb.released`: their lowering puts
  no CTA barrier before them (ttbuild.backend.llir.tma).
A warpgroup then waits at a refill only for the other warpgroups to have retired the previous
iteration, not to reach the same point: they may drift by up to a softmax apart.

Only loops whose pipelined loads are all TMA (a cp.async tile needs the CTA barrier anyway to be
seen by other threads), in kernels of more than one warpgroup (in one warpgroup, wgmma's
`.sync.aligned` already keeps the warps together), with two or more wgmma ops in the body take
it. The last condition is measured: on the H200 the release made attention forward d128 (two
warpgroups; S = Q K^T, softmax, P V) 2-4 % faster and left the 8-warp matmul loops, where both
warpgroups only issue wgmma, within 0.5 % either way, so those keep Triton's barrier.
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.builders import (
    ArithBuilder,
    barrier_ring,
    create,
    inval_ring,
    memdesc_index,
    wait_barrier_attrs,
)
from ttbuild.backend.ir.ops import ARITH, ATTR, SCF, TTNG
from ttbuild.backend.ir.types import barrier_type
from ttbuild.backend.ttgir.pipeline.expander import grow_loop

ir = mu.ir

WARPGROUP = 4  # warps
EQ, SGE = 0, 5  # arith.cmpi predicates (MLIR ArithBase.td CmpIPredicate)


def retiring_wait(body):
    """The first top-level `ttng.warp_group_dot_wait` of the loop body that retires every wgmma
    group of the previous iteration: at most as many groups left pending as wgmma ops issued
    before it in the body (groups complete in order, PTX ISA 9.7.15.6). None when there is none."""
    issued = 0
    for op in body.operations:
        name = op.operation.name
        if name == TTNG.WARP_GROUP_DOT:
            issued += 1
        elif name == TTNG.WARP_GROUP_DOT_WAIT and mu.int_attr(op.attributes["pendings"]) <= issued:
            return op
    return None


def release_slots(loop, read_inc, refill, slots: int, num_warps: int):
    """Hand the `slots` ring slots of pipelined `loop` back through empty mbarriers (module
    docstring) when the kernel has more than one warpgroup and the body has a retiring wait and a
    refill (its `ttng.barrier_expect`s, one per group of loads). `read_inc` is the body's
    `extract + 1` op (its operand: the slot the previous iteration read, -1 in the first), `refill`
    the slot the body's copies refill, both as .lower_loops built them. Returns the loop (a new
    scf.for: it carries the refill's empty-barrier parity), or `loop` unchanged."""
    body = loop.regions[0].blocks[0]
    wait = retiring_wait(body)
    expects = [op for op in body.operations if op.operation.name == TTNG.BARRIER_EXPECT]
    dots = sum(1 for op in body.operations if op.operation.name == TTNG.WARP_GROUP_DOT)
    if num_warps <= WARPGROUP or dots < 2 or wait is None or not expects:
        return loop
    ops = [op.operation for op in body.operations]
    if ops.index(wait.operation) > ops.index(expects[0].operation):
        return loop  # the arrive would come after the refill's wait on it, in the same iteration
    b = ArithBuilder(loop.location)
    with ir.InsertionPoint(loop):
        empty = barrier_ring(b, slots, num_warps * 32)
        first_parity = b.const(1)
    loop = grow_loop(loop, body, [first_parity])
    body = loop.regions[0].blocks[0]
    extract, parity = read_inc.operands[0], body.arguments[len(body.arguments) - 1]
    with ir.InsertionPoint.after(wait):  # this thread is done with the slot iteration i-1 read
        # the first iteration read no slot before: its `extract` is the pipeliner's -1
        read = b.cmpi(SGE, extract, b.const(0))
        bar = memdesc_index(empty, b.select(read, extract, b.const(0)), barrier_type(), b.loc)
        b.op(TTNG.ARRIVE_BARRIER, [], [bar, read],
             {"count": ir.IntegerAttr.get(b.i32, 1), "perThread": ir.UnitAttr.get()})
    expect = expects[0]  # the refill's first: every copy of the slot comes after it
    with ir.InsertionPoint(expect):
        wrapped = b.cmpi(EQ, refill, b.const(0))
        parity_next = b.select(wrapped, b.arith(ARITH.XORI, parity, b.const(1)), parity)
        b.op(TTNG.WAIT_BARRIER, [], [memdesc_index(empty, refill, barrier_type(), b.loc), parity_next],
             wait_barrier_attrs())
    for op in body.operations:
        if op.operation.name in (TTNG.BARRIER_EXPECT, TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL):
            op.attributes[ATTR.RELEASED] = ir.UnitAttr.get()
    yield_op = list(body.operations)[-1]
    create(SCF.YIELD, [], list(yield_op.operands) + [parity_next], loc=yield_op.location,
           ip=ir.InsertionPoint(yield_op))
    yield_op.erase()
    with ir.InsertionPoint.after(loop):
        inval_ring(b, empty, slots)
    return loop

