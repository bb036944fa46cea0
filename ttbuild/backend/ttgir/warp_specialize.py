"""TTGIR pass: a loop marked `tl.range(..., warp_specialize=True)` with TMA-fed wgmma operands becomes a `ttg.warp_specialize` op: consumer warps and a producer warpgroup.

What it builds (sm_90 with wgmma; Triton 3.6's warp specialization on Hopper, in the form
CUTLASS's PipelineTmaAsync and FlashAttention-3 give it):
- At the top of the kernel, for each marked loop: per TMA operand a ring of S tiles (S = the
  loop's stages, at least 2), a "full" mbarrier per slot (one arrival: the producer's expect)
  and an "empty" one (one arrival per consumer thread). Every thread of the CTA sees them
  initialised before the partitions split.
- Region 0 (the consumers: the variant's `num_warps`) is the kernel's own code, with each
  operand load gone: fill `n` of the loop (`n` counts the loop's iterations, through an
  enclosing loop of the same mark too: a persistent kernel's tiles) waits on `full[n % S]` for
  the parity `(n / S) % 2` and the wgmma reads the slot. Each thread arrives on `empty` of the
  slot of fill n - 1 after the first wgmma wait of fill n that retires fill n - 1's groups
  (pipeline.release.retiring_wait; the groups stay in flight as the pipeliner keeps them), and
  on the last fill's after the loop.
- Region 1 (the producer: PRODUCER_WARPS, of which the first issues) is a copy of the
  kernel cut down to what the copies need (the slice): the loop nest, its bounds and the
  scalar address math. Fill n waits on `empty[n % S]` for the parity `(n / S) % 2 ^ 1` (a
  fresh mbarrier counts its phase before the first as complete, so the first S fills pass),
  expects the bytes on `full[n % S]` and issues the copies into the slot.
- Region 2 (ping-pong, _pingpong): a second consumer group of `num_warps`, region 0's code on
  the other half of the tiles.
The slice must be scalar (integer arithmetic, program ids, scf.for / scf.if): a marked loop whose
addresses need a tensor or a load, or whose dot operands are not all TMA loads, is compiled as
if unmarked. The module gets `ttg.total-num-warps` = num_warps * groups + PRODUCER_WARPS (the
block launched; ttbuild.graph.meta writes it as `total_num_warps`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import ops_bytes
from ttbuild.backend.ir.builders import (
    SGE,
    SGT,
    ArithBuilder,
    barrier_ring,
    create,
    local_alloc,
    memdesc_index,
    tma_copy_attrs,
    tma_copy_operands,
    wait_barrier_attrs,
)
from ttbuild.backend.ir.encodings import shared_encoding
from ttbuild.backend.ir.ops import ARITH, ATTR, SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import defined_in, is_pure, walk
from ttbuild.backend.ir.types import MemDescType, barrier_type, memdesc_type
from ttbuild.backend.ttgir.pipeline.assign_latencies import address, stages_for, tma_candidate
from ttbuild.backend.ttgir.pipeline.expander import grow_loop, move_to_end, shrink_loop
from ttbuild.backend.ttgir.pipeline.release import retiring_wait
from ttbuild.backend.ttgir.pipeline.wgmma_waits import erase_fence_after, keep_in_flight, retarget
from ttbuild.errors import CompilationError

ir = mu.ir

TAG = "ttb.ws"  # the pass's own marks on the ops it finds again in the producer's copy
GROUP = "ttb.ws.group"  # the consumer group's number (ping-pong), found again in region 2
# Named barriers the two consumer groups hand the mainloop over on: group g waits on ORDER + g.
# Ids 1-3 are the regions' own (llir.control_flow.warp_specialize: 1 + region).
ORDER = 4
SCALAR_REGION_OPS = frozenset({SCF.FOR, SCF.IF, SCF.YIELD})


# The producer partition is a whole warpgroup, of which the first warp issues and the other three
# return. The block is then whole warpgroups, which keeps each consumer warpgroup on the SM's four
# sub-partitions whatever CTA it shares the SM with (a 5-warp block, a producer warp beside 4, ran
# attention d64 at 0.78x its unspecialized form; docs/STATUS.md, session 28), and setmaxnreg moves
# registers per warpgroup (PTX ISA 9.7.17.1; llir.control_flow.register_plan).
PRODUCER_WARPS = 4


@dataclass
class Plan:
    """One marked loop: `loop` holds the TMA operand loads `cands` at its top level; `outer` is
    the marked loop around it (a persistent kernel's tile loop) or None when `loop` is marked."""
    loop: object
    outer: object
    cands: list
    slots: int
    rings: list = None
    full: object = None
    empty: object = None
    views: list = None
    nbytes: int = 0
    index: int = 0


def warp_specialize(module, num_stages: int, num_warps: int, capability: int, wgmma: bool = True) -> int:
    """Specialize the marked loops of every kernel of `module` (module docstring); returns how
    many loops were. The mark goes from every loop either way (Triton ignores it where it does
    not apply)."""
    count = 0
    for func in module.body.operations:
        if func.operation.name != TT.FUNC:
            continue
        plans = _plans(func, num_stages) if capability >= 90 and wgmma and num_warps in (4, 8) else []
        if plans and _scalar_slice(plans):
            groups = 2 if _pingpong(func, plans, num_warps) else 1
            _split(func, plans, num_warps, groups)
            count += len(plans)
            module.operation.attributes[ATTR.TOTAL_NUM_WARPS] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), num_warps * groups + PRODUCER_WARPS)
        for op in walk(func):
            if ATTR.WARP_SPECIALIZE in op.attributes:
                del op.attributes[ATTR.WARP_SPECIALIZE]
    return count


def _plans(func, num_stages: int) -> list[Plan]:
    """The marked loops at the kernel's top level that this pass takes: the loop itself holds
    the TMA loads, or one loop directly in its body does; every tt.descriptor_load there is a
    wgmma operand (assign_latencies.tma_candidate)."""
    plans = []
    for m in func.regions[0].blocks[0].operations:
        if m.operation.name != SCF.FOR or ATTR.WARP_SPECIALIZE not in m.operation.attributes:
            continue
        holders = [f for f in [m.operation, *walk(m)] if f.name == SCF.FOR and _loads(f)]
        if len(holders) != 1 or holders[0] != m.operation and holders[0].parent != m.operation:
            continue
        loop = holders[0].opview
        body = loop.regions[0].blocks[0]
        cands = [tma_candidate(op, body, body.arguments[0]) for op in _loads(loop)]
        if not cands or any(c is None for c in cands):
            continue
        outer = None if loop.operation == m.operation else m
        plans.append(Plan(loop, outer, cands, max(2, stages_for(loop, num_stages))))
    return plans


def _pingpong(func, plans: list[Plan], num_warps: int) -> bool:
    """Whether the consumers run as two groups of `num_warps` warps that take the marked tile
    loop's iterations in turn (CUTLASS's ping-pong Hopper GEMM: one group's epilogue runs while
    the other's mainloop keeps the tensor cores busy, both fed from one ring in fill order).
    Taken for one persistent plan at 4 warps (a group is one warpgroup) when the tile loop
    carries and returns nothing, the K loop's bounds are set before the tile loop (a group skips
    the other's fills by that trip count), nothing else in the kernel has side effects (each
    group runs it), and the tiles need no scratch (both groups would use the same bytes; a
    conversion feeding a descriptor store goes with the TMA store's lowering)."""
    if num_warps != 4 or len(plans) != 1 or plans[0].outer is None:
        return False
    p = plans[0]
    outer = p.outer.operation
    if len(outer.operands) != 3 or len(outer.results):
        return False
    if any(defined_in(v, outer) for v in list(p.loop.operands)[:3]):
        return False
    if any(o.operation != outer and o.operation.name != TT.RETURN and not is_pure(o.operation.name)
           for o in func.regions[0].blocks[0].operations):
        return False
    return not ops_bytes([o for o in walk(outer) if o.name not in SCALAR_REGION_OPS and not _to_store(o)], num_warps)


def _to_store(op) -> bool:
    """A layout conversion read only by descriptor stores (tma_lowering writes the value's own
    layout into the TMA tile and drops it)."""
    return op.name == TTG.CONVERT_LAYOUT and all(
        u.owner.operation.name == TT.DESCRIPTOR_STORE for u in op.results[0].uses)


def _loads(for_op) -> list:
    return [op for op in for_op.regions[0].blocks[0].operations if op.operation.name == TT.DESCRIPTOR_LOAD]


# ---- the producer's slice -------------------------------------------------------------------

class _Slice:
    """The ops (and scf.for iter_args) that values and ops depend on, within the kernel: an op
    brings its operands (a loop only its bounds and step, an scf.if its condition and every
    value its arms yield), its enclosing ops, and an iter_arg its initial and yielded values."""

    def __init__(self):
        self.ops, self.iters = set(), set()

    def value(self, v) -> None:
        if isinstance(v, ir.BlockArgument):
            owner = v.owner.owner
            if owner is None or owner.operation.name != SCF.FOR:
                return
            if v.arg_number == 0:
                self.op(owner)
            else:
                self.iter(owner, v.arg_number - 1)
            return
        owner = v.owner
        self.op(owner)
        if owner.operation.name == SCF.FOR:
            self.iter(owner, v.result_number)

    def iter(self, loop, j: int) -> None:
        key = (loop.operation, j)
        if key in self.iters:
            return
        self.iters.add(key)
        self.op(loop)
        self.value(loop.operands[3 + j])
        self.value(list(loop.regions[0].blocks[0].operations)[-1].operands[j])

    def op(self, op) -> None:
        o = op.operation
        if o in self.ops or o.name == TT.FUNC:
            return
        self.ops.add(o)
        name = o.name
        if name == SCF.FOR:
            operands = list(o.operands)[:3]
        elif name == SCF.IF:
            operands = [o.operands[0]] + [v for r in o.regions for blk in r.blocks
                                          for v in list(blk.operations)[-1].operands]
        elif name == SCF.YIELD:
            operands = []
        else:
            operands = list(o.operands)
        for v in operands:
            self.value(v)
        parent = o.parent
        if parent is not None and parent.name != TT.FUNC and parent.name != TTG.WARP_SPECIALIZE:
            self.op(parent)


def _scalar(t) -> bool:
    return not isinstance(t, ir.RankedTensorType) and not str(t).startswith("!ttg.memdesc")


def _scalar_slice(plans) -> bool:
    """Whether the producer's slice of `plans` (addresses of the loads, the loops' bounds) is
    scalar: pure ops without regions on scalars, scf.for / scf.if with scalar iter_args."""
    s = _Slice()
    for p in plans:
        s.op(p.loop)
        for c in p.cands:
            for v in address(c.load):
                s.value(v)
    for o in s.ops:
        if o.name in SCALAR_REGION_OPS:
            continue
        if not is_pure(o.name) or len(o.regions) or not all(_scalar(r.type) for r in o.results):
            return False
    return all(not isinstance(loop.operands[3 + j].type, ir.RankedTensorType) for loop, j in s.iters)


# ---- the rewrite ----------------------------------------------------------------------------

def _split(func, plans: list[Plan], num_warps: int, groups: int) -> None:
    body = func.regions[0].blocks[0]
    ops = list(body.operations)
    ret = ops[-1]
    b = ArithBuilder(func.location)
    for k, p in enumerate(plans):
        p.index = k
        p.loop.operation.attributes[TAG] = ir.IntegerAttr.get(b.i32, k)
        for i, c in enumerate(p.cands):
            c.load.operation.attributes[TAG] = ir.IntegerAttr.get(b.i32, i)
    with ir.InsertionPoint.at_block_begin(body):
        for p in plans:
            _rings(b, p, num_warps)
    warps = [PRODUCER_WARPS] + [num_warps] * (groups - 1)
    ws = create(TTG.WARP_SPECIALIZE, [], [], {"partitionNumWarps": ir.DenseI32ArrayAttr.get(warps)},
                func.location, regions=1 + groups, ip=ir.InsertionPoint(ret))
    consumer = ir.Block.create_at_start(ws.regions[0], [])
    for op in ops[:-1]:
        move_to_end(consumer, op)
    create(TTG.WARP_YIELD, [], [], loc=func.location, ip=ir.InsertionPoint(consumer))
    copy = ws.clone(ip=ir.InsertionPoint(ws))
    producer = ir.Block.create_at_start(ws.regions[1], [])
    for op in list(copy.regions[0].blocks[0].operations)[:-1]:
        move_to_end(producer, op)
    copy.erase()
    create(TTG.WARP_RETURN, [], [], loc=func.location, ip=ir.InsertionPoint(producer))
    for p in plans:
        loop, outer = _consume(p)
        if groups == 2:
            _alternate(loop, outer, num_warps)
            _second_group(ws, num_warps)
    roots = [_produce(p, producer) for p in plans]
    _cut(producer, [r for rs in roots for r in rs])
    for op in walk(func):
        for mark in (TAG, GROUP):
            if mark in op.attributes:
                del op.attributes[mark]


def _rings(b: ArithBuilder, p: Plan, num_warps: int) -> None:
    """The plan's operand rings (the wgmma's own tile encoding, a slot per stage) and its full
    and empty mbarrier rings, at the kernel's top."""
    p.rings, p.views = [], []
    for c in p.cands:
        t = c.alloc.results[0].type
        shape, elem = MemDescType.header(t)
        enc = shared_encoding(str(t))
        p.rings.append(local_alloc(memdesc_type((p.slots, *shape), elem, None, enc), loc=c.load.location))
        p.views.append(memdesc_type(tuple(shape), elem, None, enc))
    p.nbytes = sum(mu.nbytes(c.load.results[0].type) for c in p.cands)
    p.full = barrier_ring(b, p.slots, 1)
    p.empty = barrier_ring(b, p.slots, num_warps * 32)


def _slot_phase(b: ArithBuilder, n, slots: int):
    """(n % slots, (n / slots) % 2) of the fill counter n (i32, never negative)."""
    s = b.const(slots)
    return b.arith(ARITH.REMUI, n, s), b.andi(b.arith(ARITH.DIVUI, n, s), b.const(1))


def _count(p: Plan, loop, outer, extra):
    """`loop` (and `outer`) carrying the fill counter from 0, plus `extra` initial values for
    `loop`; returns (loop, outer, counter argument, extra arguments)."""
    b = ArithBuilder(loop.location)
    if outer is not None:
        with ir.InsertionPoint(outer):
            zero = b.const(0)
        outer = grow_loop(outer, outer.regions[0].blocks[0], [zero])
        init = outer.regions[0].blocks[0].arguments[-1]
    else:
        with ir.InsertionPoint(loop):
            init = b.const(0)
    with ir.InsertionPoint(loop):
        inits = [init] + [f(b) for f in extra]
    loop = grow_loop(loop, loop.regions[0].blocks[0], inits)
    args = list(loop.regions[0].blocks[0].arguments)
    n = len(extra)
    return loop, outer, args[-1 - n], args[len(args) - n:]


def _yield(loop, values) -> None:
    """The body's scf.yield with `values` appended."""
    y = list(loop.regions[0].blocks[0].operations)[-1]
    create(SCF.YIELD, [], list(y.operands) + values, loc=y.location, ip=ir.InsertionPoint(y))
    y.erase()


def _consume(p: Plan) -> None:
    """Region 0: the loads become waits on the full barrier and slot views; fill n - 1's slot
    goes back through the empty barrier (module docstring)."""
    loop, outer, n, (prev,) = _count(p, p.loop, p.outer, [lambda b: b.const(-1)])
    body = loop.regions[0].blocks[0]
    b = ArithBuilder(loop.location)
    first = next(o for o in body.operations if TAG in o.operation.attributes)
    with ir.InsertionPoint(first):
        slot, phase = _slot_phase(b, n, p.slots)
        b.op(TTNG.WAIT_BARRIER, [], [memdesc_index(p.full, slot, barrier_type(), b.loc), phase],
             wait_barrier_attrs())
    readers = {}
    for c, ring, view_t in zip(p.cands, p.rings, p.views):
        with ir.InsertionPoint(c.reader):
            view = memdesc_index(ring, slot, view_t, c.load.location)
        retarget(c.alloc.results[0], view)
        erase_fence_after(c.alloc)
        c.alloc.erase()
        if c.trans is not None:
            c.trans.erase()
        c.load.erase()
        readers[c.reader.operation] = c.reader
    for wg in readers.values():
        keep_in_flight(wg, loop)
    wait = retiring_wait(body)
    if wait is None:
        raise CompilationError("warp specialization: no wgmma wait in the loop retires the previous fill",
                               stage="ttgir")
    with ir.InsertionPoint.after(wait):
        _release(b, p, prev)
    with ir.InsertionPoint(list(body.operations)[-1]):
        nxt = b.addi(n, b.const(1))
    _yield(loop, [nxt, slot])
    ops = [o.operation for o in loop.operation.block.operations]
    nxt_op = ops[ops.index(loop.operation) + 1]
    after = nxt_op if nxt_op.name == TTNG.WARP_GROUP_DOT_WAIT else loop.operation  # keep_in_flight's wait
    res = list(loop.results)
    with ir.InsertionPoint.after(after):
        _release(b, p, res[-1])
    if outer is not None:
        _yield(outer, [res[-2]])
    return loop, outer


def _alternate(loop, outer, num_warps: int) -> None:
    """Consumer group g (GROUP at the tile loop, 0 here; _second_group makes its copy 1) takes
    the tile loop's iterations g, g + 2, ...: the lower bound moves g steps and the step doubles;
    the fill counter starts g tiles in and, after each of the group's tiles, skips the other's
    (the K loop's trip count: its bounds are set before the tile loop, _pingpong).

    The groups' K loops run in turn (CUTLASS's math warpgroup order barrier): group g waits on
    named barrier ORDER + g before its K loop and arrives on the other's after it, so its
    epilogue runs under the other's K loop. The order is also what makes the parity waits
    sound: an mbarrier's parity names a phase only within one of the current, and a group
    that ran ahead into its next tile would wait on a fill two phases ahead of its slot."""
    b = ArithBuilder(outer.location)
    lo, hi, step = list(loop.operands)[:3]
    with ir.InsertionPoint(outer):
        g = b.const(0)
        g.owner.attributes[GROUP] = ir.UnitAttr.get()
        span = b.subi(hi, lo)
        trip = b.select(b.cmpi(SGT, span, b.const(0)),
                        b.arith(ARITH.DIVUI, b.addi(span, b.subi(step, b.const(1))), step), b.const(0))
        first, stride = outer.operands[0], outer.operands[2]
        outer.operands[0] = b.addi(first, b.muli(g, stride))
        outer.operands[2] = b.addi(stride, stride)
        outer.operands[3] = b.muli(g, trip)
    y = list(outer.regions[0].blocks[0].operations)[-1]
    with ir.InsertionPoint(y):
        y.operands[0] = b.addi(y.operands[0], trip)
    with ir.InsertionPoint(loop):
        _named_barrier(b, TTNG.NAMED_BARRIER_WAIT, b.addi(b.const(ORDER), g), num_warps)
    with ir.InsertionPoint.after(loop):
        _named_barrier(b, TTNG.NAMED_BARRIER_ARRIVE, b.subi(b.const(ORDER + 1), g), num_warps)


def _named_barrier(b: ArithBuilder, name: str, bar, num_warps: int) -> None:
    """`name` (a named-barrier wait or arrive) on barrier `bar` for both consumer groups."""
    b.op(name, [], [bar, b.const(2 * 32 * num_warps)])


def _second_group(ws, num_warps: int) -> None:
    """Region 2: a copy of the consumers' region 0 with GROUP = 1, which first arrives on group
    0's order barrier (group 0 runs the first K loop)."""
    copy = ws.clone(ip=ir.InsertionPoint(ws))
    block = ir.Block.create_at_start(ws.regions[2], [])
    for op in list(copy.regions[0].blocks[0].operations):
        move_to_end(block, op)
    copy.erase()
    g = next(o for o in _walk_block(block) if GROUP in o.attributes)
    with ir.InsertionPoint(g):
        one = ArithBuilder(g.location).const(1)
    g.results[0].replace_all_uses_with(one)
    g.erase()
    outer = next(o for o in block.operations if o.operation.name == SCF.FOR)
    b = ArithBuilder(outer.location)
    with ir.InsertionPoint(outer):
        _named_barrier(b, TTNG.NAMED_BARRIER_ARRIVE, b.const(ORDER), num_warps)


def _release(b: ArithBuilder, p: Plan, slot) -> None:
    """Every consumer thread arrives on `empty[slot]` when slot >= 0 (-1: no fill read yet)."""
    read = b.cmpi(SGE, slot, b.const(0))
    bar = memdesc_index(p.empty, b.select(read, slot, b.const(0)), barrier_type(), b.loc)
    b.op(TTNG.ARRIVE_BARRIER, [], [bar, read],
         {"count": ir.IntegerAttr.get(b.i32, 1), "perThread": ir.UnitAttr.get()})


def _produce(p: Plan, producer) -> list:
    """Region 1: the plan's loads become the producer's fill (wait empty, expect, copies);
    returns the new ops (the slice's roots)."""
    k = p.index
    tagged = [o for o in _walk_block(producer) if TAG in o.attributes]
    loop = next(o.opview for o in tagged if o.name == SCF.FOR and mu.int_attr(o.attributes[TAG]) == k)
    outer = loop.operation.parent.opview if p.outer is not None else None
    loop, outer, n, _ = _count(p, loop, outer, [])
    body = loop.regions[0].blocks[0]
    loads = [o for o in body.operations if o.operation.name == TT.DESCRIPTOR_LOAD and TAG in o.operation.attributes]
    b = ArithBuilder(loop.location)
    roots = []
    with ir.InsertionPoint(loads[0]):
        slot, phase = _slot_phase(b, n, p.slots)
        free = b.arith(ARITH.XORI, phase, b.const(1))
        roots.append(b.op(TTNG.WAIT_BARRIER, [], [memdesc_index(p.empty, slot, barrier_type(), b.loc), free],
                          wait_barrier_attrs()))
        bar = memdesc_index(p.full, slot, barrier_type(), b.loc)
        true = b.op(ARITH.CONSTANT, [ir.IntegerType.get_signless(1)], [],
                    {"value": ir.IntegerAttr.get(ir.IntegerType.get_signless(1), 1)}).results[0]
        # released: the producer waited on the slot's empty barrier, no CTA barrier before it
        roots.append(b.op(TTNG.BARRIER_EXPECT, [], [bar, true], {"size": ir.IntegerAttr.get(b.i32, p.nbytes),
                                                                  ATTR.RELEASED: ir.UnitAttr.get()}))
    for load in loads:
        i = mu.int_attr(load.operation.attributes[TAG])
        with ir.InsertionPoint(load):
            view = memdesc_index(p.rings[i], slot, p.views[i], load.location)
            coords = list(load.operands)[1:]
            roots.append(create(TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL, [],
                                tma_copy_operands(load.operands[0], coords, view, bar, true),
                                {**tma_copy_attrs(len(coords)), ATTR.RELEASED: ir.UnitAttr.get()}, load.location))
    with ir.InsertionPoint(list(body.operations)[-1]):
        nxt = b.addi(n, b.const(1))
    _yield(loop, [nxt])
    if outer is not None:
        _yield(outer, [list(loop.results)[-1]])
    return roots


def _cut(block, roots) -> None:
    """Cut the producer region `block` down to the slice of `roots`: every other op goes, and
    each loop keeps only the iter_args the slice needs."""
    s = _Slice()
    for r in roots:
        s.op(r)
    ops = _walk_block(block)
    # the ops to erase: outside the slice, not inside an op that goes with them
    dead = [o for o in reversed(ops) if o not in s.ops and o.name not in (TTG.WARP_RETURN, SCF.YIELD)
            and all(a in s.ops for a in _ancestors(o, block))]
    loops = [o for o in ops if o.name == SCF.FOR and o in s.ops]
    keep = {lp: sorted(j for (l2, j) in s.iters if l2 == lp) for lp in loops}
    for lp in loops:
        y = list(lp.regions[0].blocks[0].operations)[-1]
        create(SCF.YIELD, [], [y.operands[j] for j in keep[lp]], loc=y.location, ip=ir.InsertionPoint(y))
        y.erase()
    dead = _erase_unused(dead)  # a dropped iter_arg's initial value waits for its loop to shrink
    kept = [keep[lp] for lp in loops]
    for lp, js in reversed(list(zip(loops, kept))):  # inner loops first: an outer one's shrink moves them
        shrink_loop(lp.opview, js)
    if _erase_unused(dead):
        raise AssertionError("warp specialization: producer ops outside the slice still in use")


def _erase_unused(ops) -> list:
    """Erase the ops of `ops` (users before definitions) whose results are unused, to a
    fixpoint; returns those left."""
    left, changed = list(ops), True
    while changed:
        changed, rest = False, []
        for o in left:
            if all(next(iter(r.uses), None) is None for r in o.results):
                o.erase()
                changed = True
            else:
                rest.append(o)
        left = rest
    return left


def _walk_block(block) -> list:
    """Every op of `block` and the ops nested in them, in pre-order."""
    out = []
    for op in block.operations:
        out += [op.operation, *walk(op)]
    return out


def _ancestors(o, block) -> list:
    out, p = [], o.parent
    while p is not None and p != block.owner:
        out.append(p)
        p = p.parent
    return out
