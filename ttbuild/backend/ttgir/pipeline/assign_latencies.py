"""Pipeliner, stage 1 (Triton's AssignLatencies.cpp): which loops are pipelined at how many stages, and which of their loads become async copies (`Candidate`s), with the body ops their addresses need.

The rules are in ttbuild.backend.ttgir.pipeline's docstring; this module only reads the IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import AxisAnalysis, vector_elems
from ttbuild.backend.analysis.mma_layout import nvmma_for_operand
from ttbuild.backend.ir.encodings import NvmmaShared, SwizzledShared, parse_encoding, shared_encoding
from ttbuild.backend.ir.ops import ATTR, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import DOT_OPS, is_pure, is_volatile
from ttbuild.backend.ir.types import MemDescType

ir = mu.ir

SLOTTED_ELEMS = {"f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "f8E4M3FN", "f8E5M2"}


@dataclass(frozen=True)
class Candidate:
    """A load to pipeline: the op, the body ops (program order) its pointer and mask need, and
    the loop-carried values (iter_arg indices) these reach, directly or through the updates of
    other carried values (the pointer advanced by `ptrs += step`)."""
    load: object
    slice_ops: tuple
    vec_bytes: int
    carried: frozenset = frozenset()
    alloc: object = None   # dot operand: the ttg.local_alloc(load) that stages it ...
    reader: object = None  # ... and the ttg.local_load into #ttg.dot_op that reads it back
    trans: object = None   # a TMA load's tt.trans between it and the alloc (B^T of a row-major block)
    # a load several wgmma operands read, some through tt.trans: ((alloc, wgmma, trans or None),
    # ...) and the ring's encoding (the load's tile; a tt.trans user reads a ttg.memdesc_trans view)
    views: tuple = ()
    ring_enc: str | None = None

    @property
    def tma(self) -> bool:
        """A `tt.descriptor_load`: copied by TMA into its ring slot (mbarrier-tracked)."""
        return self.load.name == TT.DESCRIPTOR_LOAD


def chunk_bytes(ptr, mask, axis: AxisAnalysis) -> int:
    """Bytes of each thread's contiguous chunk that one cp.async can move: elements contiguous in
    the thread's layout (sizePerThread along order[0]), in memory and aligned (axis info), and
    under one mask bit (mask constancy), times the element size."""
    layout = parse_encoding(mu.encoding_str(ptr.type))
    shape = mu.shape_of(ptr.type)
    o0 = layout.order[0]
    elem = mu.pointee(mu.elem_str(ptr.type))
    vec = min(vector_elems(ptr, axis, o0), min(layout.size_per_thread[o0], shape[o0]))
    if mask is not None:
        vec = gcd(vec, axis.info(mask).constancy[o0])
    return vec * mu.elem_bits(elem) // 8


def _in_body(v, body) -> bool:
    if isinstance(v, ir.BlockArgument):
        return v.owner == body
    return v.owner.operation.block == body


def _deps(values, body, iv):
    """(ops, carried): the body ops the values depend on, in program order, and the iter_arg
    indices they read; None when they reach a load or an impure op."""
    seen, ops, carried = set(), [], set()

    def visit(v) -> bool:
        if not _in_body(v, body):
            return True
        if isinstance(v, ir.BlockArgument):
            if v != iv:
                carried.add(v.arg_number - 1)
            return True
        op = v.owner
        name = op.operation.name
        if not is_pure(name) or len(op.regions):  # ops that may compute an address or mask
            return False
        key = op.operation
        if key in seen:
            return True
        seen.add(key)
        if not all(visit(x) for x in op.operands):
            return False
        ops.append(op)
        return True

    if not all(visit(x) for x in values):
        return None
    order = {op.operation: i for i, op in enumerate(body.operations)}
    return tuple(sorted(ops, key=lambda o: order[o.operation])), frozenset(carried)


def yielded(body) -> list:
    """The values the body's scf.yield hands to the next iteration (one per iter_arg)."""
    return list(list(body.operations)[-1].operands)


def address(load) -> list:
    """The operands that say where a load reads: a tt.load's pointer and mask, a
    tt.descriptor_load's indices."""
    if load.name == TT.DESCRIPTOR_LOAD:
        return list(load.operands)[1:]
    return list(load.operands)[:1 + segments(load)[1]]


def _slice(load, body, iv):
    """(ops, carried) for the load's address (address): the body ops it needs (program order) and
    the loop-carried values they read, closed over those values' updates (each carried value's
    yielded value must itself be computed by pure ops from carried values, the induction
    variable and loop invariants); None otherwise."""
    got = _deps(address(load), body, iv)
    if got is None:
        return None
    ops, carried = got
    todo, closed = list(carried), set(carried)
    ylds = yielded(body)
    while todo:
        j = todo.pop()
        upd = _deps([ylds[j]], body, iv)
        if upd is None:
            return None
        for k in upd[1] - closed:
            closed.add(k)
            todo.append(k)
    return ops, frozenset(closed)


def update_ops(body, iv, carried) -> tuple:
    """The body ops (program order) that compute the yielded values of the iter_args `carried`."""
    got = _deps([yielded(body)[j] for j in sorted(carried)], body, iv)
    return got[0]


def segments(load) -> list[int]:
    """A tt.load's operand segment sizes: [ptr, mask, other] (0 for an absent mask or other)."""
    p = mu.props(load)
    if "operandSegmentSizes" in p:
        return [int(x) for x in p["operandSegmentSizes"]]
    return [1, len(load.operands) - 1, 0]


def _sole_user(v):
    uses = list(v.uses)
    return uses[0].owner if len(uses) == 1 else None


def wgmma_reader(alloc):
    """The `ttng.warp_group_dot` that reads the memdesc `alloc` when that dot (and the
    `ttng.warp_group_dot_wait`s that keep it alive) are its only users, in its block; else None."""
    users = [u.owner for u in alloc.results[0].uses]
    dots = [o for o in users if o.name == TTNG.WARP_GROUP_DOT]
    if len(dots) != 1 or any(o.name not in (TTNG.WARP_GROUP_DOT, TTNG.WARP_GROUP_DOT_WAIT) for o in users):
        return None
    return dots[0] if dots[0].operation.block == alloc.operation.block else None


def dot_operand_use(load):
    """(local_alloc, reader) when the load's sole user is a `ttg.local_alloc` whose memdesc
    only a `ttg.local_load` into `#ttg.dot_op`, or a `ttng.warp_group_dot`, reads
    (accelerate_matmul's staging of a dot operand, Triton's condition for a shared-memory
    pipelined dot operand); else None."""
    alloc = _sole_user(load.results[0])
    if alloc is None or alloc.name != TTG.LOCAL_ALLOC or alloc.operation.block != load.operation.block:
        return None
    wg = wgmma_reader(alloc)
    if wg is not None:
        return alloc, wg
    reader = _sole_user(alloc.results[0])
    if reader is None or reader.name != TTG.LOCAL_LOAD or reader.operation.block != load.operation.block:
        return None
    if not mu.encoding_str(reader.results[0].type).startswith("#ttg.dot_op<"):
        return None
    return alloc, reader


def wgmma_views(load):
    """((alloc, wgmma, trans or None), ...), ring encoding) when every user of the load is the
    `ttg.local_alloc` of a wgmma operand, directly or through a 2-D `tt.trans` that has no other
    user, and the allocs agree on one tile: those read directly in its encoding, the transposed
    ones in its transposed view (an nvmma tile with `transposed` flipped). Attention backward's
    qT and dO: each feeds one dot as loaded and another transposed; Triton stages the load once
    and gives the second dot a `ttg.memdesc_trans` view (LowerLoops, MemDescTransOp). Else None."""
    block = load.operation.block
    views = []
    for use in load.results[0].uses:
        user, trans = use.owner, None
        if user.name == TT.TRANS:
            if len(mu.shape_of(user.results[0].type)) != 2:
                return None
            trans, user = user, _sole_user(user.results[0])
            if user is None:
                return None
        if user.name != TTG.LOCAL_ALLOC or user.operation.block != block:
            return None
        wg = wgmma_reader(user)
        if wg is None or "#ttg.nvmma_shared" not in str(user.results[0].type):
            return None
        views.append((user, wg, trans))
    if not views:
        return None
    encs = [NvmmaShared.parse(shared_encoding(str(a.results[0].type))) for a, _, _ in views]
    flip = lambda e: NvmmaShared(e.swizzle, not e.transposed, e.elem_bits)  # noqa: E731
    ring = [flip(e) if t is not None else e for e, (_, _, t) in zip(encs, views)]
    if any(r != ring[0] for r in ring):
        return None
    # cp.async writes each thread's contiguous chunk as is: the ring's contiguous dimension must
    # be the load's
    if parse_encoding(mu.encoding_str(load.results[0].type)).order[0] != ring[0].order[0]:
        return None
    return tuple(views), ring[0].attr()


def tma_candidate(op, body, iv) -> Candidate | None:
    """A `tt.descriptor_load` whose block (or its tt.trans) only a wgmma operand's
    `ttg.local_alloc` reads, in that alloc's `#ttg.nvmma_shared` (the swizzle the TMA box is
    written with: nvmma_for_operand of the block; a transposed view for the tt.trans), with an
    address computed as for a cp.async candidate; else None."""
    v, trans = op.results[0], None
    user = _sole_user(v)
    if user is not None and user.name == TT.TRANS and user.operation.block == op.operation.block:
        trans, v = user, user.results[0]
    alloc = _sole_user(v)
    if alloc is None or alloc.name != TTG.LOCAL_ALLOC or alloc.operation.block != op.operation.block:
        return None
    wg = wgmma_reader(alloc)
    enc_text = str(alloc.results[0].type)
    if wg is None or "#ttg.nvmma_shared" not in enc_text:
        return None
    enc = NvmmaShared.parse(shared_encoding(str(alloc.results[0].type)))
    block = mu.shape_of(op.results[0].type)
    want = nvmma_for_operand(block, (1, 0), mu.elem_bits(mu.elem_str(op.results[0].type)))
    if want is None or enc.swizzle != want.swizzle or enc.transposed != (trans is not None):
        return None
    got = _slice(op, body, iv)
    if got is None:
        return None
    return Candidate(op, got[0], 16, got[1], alloc, wg, trans)


def has_dot(for_op) -> bool:
    """Whether the loop's body (top level) holds a tt.dot or a wgmma."""
    return any(op.operation.name in DOT_OPS for op in for_op.regions[0].blocks[0].operations)


def dot_feeders(body) -> set:
    """The ops of `body` whose results reach a dot of it through operands of ops in `body`
    (Triton's AssignLatencies: loadOpsToIndirectionLevel walks back from every dot; the loads it
    meets are pipelined, attention backward's rows of M and Delta among them)."""
    seen: set = set()
    todo = [op.operation for op in body.operations if op.operation.name in DOT_OPS]
    while todo:
        op = todo.pop()
        for v in op.operands:
            d = v.owner if isinstance(v, ir.OpResult) else None
            if d is not None and d.operation.block == body and d.operation not in seen:
                seen.add(d.operation)
                todo.append(d.operation)
    return seen


def candidates(for_op, axis: AxisAnalysis, plain: bool = True) -> list[Candidate]:
    """Loads of the loop body that this pass pipelines (see the module docstring for the rules):
    dot operands and the loads that feed a dot always, other loads only when `plain` (the loop
    asked for it by tl.range)."""
    body = for_op.regions[0].blocks[0]
    iv = body.arguments[0]
    feeds = dot_feeders(body) if not plain else set()
    out = []
    for op in body.operations:
        if op.operation.name == TT.DESCRIPTOR_LOAD:
            cand = tma_candidate(op, body, iv)
            if cand is not None:
                out.append(cand)
            continue
        if op.operation.name != TT.LOAD or not isinstance(op.operands[0].type, ir.RankedTensorType):
            continue
        if is_volatile(op):
            continue
        if mu.elem_str(op.results[0].type) not in SLOTTED_ELEMS:
            continue
        seg = segments(op)
        staged = dot_operand_use(op)
        views = wgmma_views(op) if staged is None else None
        if views is not None:
            (alloc, wg, _), *_ = views[0]
            staged = (alloc, wg)
        if staged is None and not plain and op.operation not in feeds:
            continue
        if staged is not None and seg[2] and not mu.is_zero_splat(op.operands[1 + seg[1]]):
            continue  # the zero-filled slot would not hold `other` (Triton keeps it in registers)
        got = _slice(op, body, iv)
        if got is None:
            continue
        mask = op.operands[1] if seg[1] else None
        nbytes = chunk_bytes(op.operands[0], mask, axis)
        if staged is not None:
            # a copy chunk must stay contiguous through the swizzle: at most `vec` elements
            sw = MemDescType.parse(staged[0].results[0].type).layout()
            elem_b = mu.elem_bits(mu.elem_str(op.results[0].type)) // 8
            nbytes = min(nbytes, sw.vec * elem_b) if isinstance(sw, SwizzledShared) else nbytes
        if nbytes < 4:
            continue
        alloc, reader = staged or (None, None)
        out.append(Candidate(op, got[0], min(nbytes, 16), got[1], alloc, reader,
                             views=views[0] if views else (), ring_enc=views[1] if views else None))
    return out


def num_stages_of(for_op) -> int:
    """The loop's `tt.num_stages` attribute (tl.range(num_stages=...)), 1 without it."""
    attrs = for_op.operation.attributes
    return mu.int_attr(attrs[ATTR.NUM_STAGES]) if ATTR.NUM_STAGES in attrs else 1


def stages_for(for_op, num_stages: int) -> int:
    """The loop's own `tt.num_stages` (tl.range), else the kernel's num_stages for a loop whose
    body holds a tt.dot (Triton's default), else 1."""
    if ATTR.NUM_STAGES in for_op.operation.attributes:
        return num_stages_of(for_op)
    return num_stages if has_dot(for_op) else 1
