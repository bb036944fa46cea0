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
  flight into the next iteration (`_keep_in_flight`). The other loads of a dot loop that feed
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import gcd

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import AxisAnalysis, vector_elems
from ttbuild.backend.analysis.mma_layout import nvmma_for_operand
from ttbuild.backend.ir.encodings import NvmmaShared, parse_encoding
from ttbuild.backend.ir.ops import ARITH, SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import DOT_OPS, is_pure, walk

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


def shared_attr(order) -> str:
    return ("#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = ["
            + ", ".join(str(o) for o in order) + "]}>")


def memdesc_type(shape, elem: str, order, encoding: str | None = None) -> ir.Type:
    """A mutable shared-memory descriptor: `encoding` (text) or, without it, the unswizzled
    encoding of `order`."""
    dims = "x".join(str(s) for s in shape)
    enc = encoding or shared_attr(order)
    return ir.Type.parse(f"!ttg.memdesc<{dims}x{elem}, {enc}, #ttg.shared_memory, mutable>")


def _shared_encoding(memdesc) -> str:
    """The shared encoding (text) of a memdesc type: `#ttg.swizzled_shared<{...}>` or
    `#ttg.nvmma_shared<{...}>`."""
    m = re.search(r"#ttg\.(swizzled|nvmma)_shared<\{[^}]*\}>", str(memdesc))
    if not m:
        raise ValueError(f"unsupported shared encoding in {memdesc}")
    return m.group(0)


def barrier_type() -> ir.Type:
    """One mbarrier: a mutable 1 x i64 shared-memory descriptor (Triton's barrier memdescs)."""
    return ir.Type.parse(f"!ttg.memdesc<1xi64, {shared_attr([0])}, #ttg.shared_memory, mutable>")


def tma_copy_operands(desc, coords, dst, bar, pred) -> list:
    """`ttng.async_tma_copy_global_to_local`'s operands in Triton 3.6's generic order: desc,
    coords, (no im2col offsets), barrier, result (the destination), pred."""
    return [desc, *coords, bar, dst, pred]


def wait_barrier_attrs() -> dict:
    """`ttng.wait_barrier`'s operand segments: alloc, phase, no pred, no deps (Triton 3.6)."""
    return {"operandSegmentSizes": ir.Attribute.parse("array<i32: 1, 1, 0, 0>")}


def tma_copy_attrs(rank: int) -> dict:
    i32 = ir.IntegerType.get_signless(32)
    return {"cache": ir.IntegerAttr.get(i32, 1), "evict": ir.IntegerAttr.get(i32, 1),
            "isVolatile": ir.BoolAttr.get(False),
            "operandSegmentSizes": ir.Attribute.parse(f"array<i32: 1, {rank}, 0, 1, 1, 1>")}


def _memdesc_shape(t) -> tuple[int, ...]:
    """The shape of a `!ttg.memdesc<64x128xf16, ...>` type."""
    m = re.match(r"!ttg\.memdesc<((?:\d+x)+)", str(t))
    return tuple(int(d) for d in m.group(1).rstrip("x").split("x"))


def token_type() -> ir.Type:
    return ir.Type.parse("!ttg.async.token")


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


def _yielded(body) -> list:
    return list(list(body.operations)[-1].operands)


def _address(load) -> list:
    """The operands that say where a load reads: a tt.load's pointer and mask, a
    tt.descriptor_load's indices."""
    if load.name == TT.DESCRIPTOR_LOAD:
        return list(load.operands)[1:]
    return list(load.operands)[:1 + _segments(load)[1]]


def _slice(load, body, iv):
    """(ops, carried) for the load's address (_address): the body ops it needs (program order) and
    the loop-carried values they read, closed over those values' updates (each carried value's
    yielded value must itself be computed by pure ops from carried values, the induction
    variable and loop invariants); None otherwise."""
    got = _deps(_address(load), body, iv)
    if got is None:
        return None
    ops, carried = got
    todo, closed = list(carried), set(carried)
    ylds = _yielded(body)
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
    got = _deps([_yielded(body)[j] for j in sorted(carried)], body, iv)
    return got[0]


def _segments(load) -> list[int]:
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
    encs = [NvmmaShared.parse(_shared_encoding(a.results[0].type)) for a, _, _ in views]
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
    enc = NvmmaShared.parse(_shared_encoding(alloc.results[0].type))
    block = mu.shape_of(op.results[0].type)
    want = nvmma_for_operand(block, (1, 0), mu.elem_bits(mu.elem_str(op.results[0].type)))
    if want is None or enc.swizzle != want.swizzle or enc.transposed != (trans is not None):
        return None
    got = _slice(op, body, iv)
    if got is None:
        return None
    return Candidate(op, got[0], 16, got[1], alloc, wg, trans)


def has_dot(for_op) -> bool:
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
        p = mu.props(op)
        if "isVolatile" in p and ir.BoolAttr(p["isVolatile"]).value:
            continue
        if mu.elem_str(op.results[0].type) not in SLOTTED_ELEMS:
            continue
        seg = _segments(op)
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
            sw = re.search(r"vec = (\d+)", str(staged[0].results[0].type))
            elem_b = mu.elem_bits(mu.elem_str(op.results[0].type)) // 8
            nbytes = min(nbytes, int(sw.group(1)) * elem_b) if sw else nbytes
        if nbytes < 4:
            continue
        alloc, reader = staged or (None, None)
        out.append(Candidate(op, got[0], min(nbytes, 16), got[1], alloc, reader,
                             views=views[0] if views else (), ring_enc=views[1] if views else None))
    return out


def num_stages_of(for_op) -> int:
    attrs = for_op.operation.attributes
    return mu.int_attr(attrs["tt.num_stages"]) if "tt.num_stages" in attrs else 1


class _Builder:
    """Creates ops at an insertion point with one location (the loop's)."""

    def __init__(self, loc):
        self.loc = loc
        self.i32 = ir.IntegerType.get_signless(32)

    def at(self, loc) -> "_Builder":
        """The same builder with another location (a load's ops keep the load's, so errors
        and line info point at its tl.load)."""
        return _Builder(loc)

    def op(self, name, results, operands, attrs=None):
        return ir.Operation.create(name, results=results, operands=operands, attributes=attrs or {},
                                   loc=self.loc)

    def const(self, v: int):
        return self.op(ARITH.CONSTANT, [self.i32], [], {"value": ir.IntegerAttr.get(self.i32, v)}).results[0]

    def arith(self, name, a, b, extra=None):
        return self.op(name, [a.type], [a, b], extra).results[0]

    def addi(self, a, b):
        return self.arith(ARITH.ADDI, a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def muli(self, a, b):
        return self.arith(ARITH.MULI, a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def subi(self, a, b):
        return self.arith(ARITH.SUBI, a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def cmpi(self, pred: int, a, b):
        i1 = ir.IntegerType.get_signless(1)
        t = ir.RankedTensorType.get(a.type.shape, i1, a.type.encoding) if isinstance(a.type, ir.RankedTensorType) else i1
        return self.op(ARITH.CMPI, [t], [a, b], {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pred)}).results[0]

    def select(self, c, a, b):
        return self.op(ARITH.SELECT, [a.type], [c, a, b]).results[0]

    def splat_i1(self, pred, like):
        t = ir.RankedTensorType(like.type)
        i1 = ir.IntegerType.get_signless(1)
        return self.op(TT.SPLAT, [ir.RankedTensorType.get(t.shape, i1, t.encoding)], [pred]).results[0]

    def andi(self, a, b):
        return self.arith(ARITH.ANDI, a, b)


SLT, SGE = 2, 5  # arith.cmpi predicates (MLIR ArithBase.td CmpIPredicate)


class _Loop:
    """Rewrites one scf.for with S stages and its pipelined loads."""

    def __init__(self, for_op, stages: int, cands: list[Candidate]):
        self.op, self.S, self.cands = for_op, stages, cands
        # A wgmma operand ring holds one more slot: the copy for iteration i + S - 1 lands in
        # the slot iteration i - 1's wgmma read, which may still run until iteration i's
        # warp_group_dot_wait {pendings = 1} (Triton's loadRequiresAdditionalBuffer).
        self.wgmmas = {c.reader.operation: c.reader for c in cands
                       if c.reader is not None and c.reader.name == TTNG.WARP_GROUP_DOT}
        self.wgmmas.update({wg.operation: wg for c in cands for _, wg, _ in c.views})
        self.slots = stages if self.wgmmas else stages - 1
        self.b = _Builder(for_op.location)
        self.lb, self.ub, self.step = list(for_op.operands)[:3]
        self.body = for_op.regions[0].blocks[0]
        self.iv = self.body.arguments[0]

    def _iter_value(self, k: int, base):
        """base + k*step (k a Python int), folded when step is a constant."""
        b = self.b
        if k == 0:
            return base
        c = _const_int(self.step)
        off = b.const(k * c) if c is not None else b.muli(self.step, b.const(k))
        return b.addi(base, off)

    def _mapping(self, iv_value, cvals):
        m = {self.iv: iv_value}
        args = list(self.body.arguments)
        for j, v in (cvals or {}).items():
            m[args[1 + j]] = v
        return m

    @staticmethod
    def _clone_ops(ops, m):
        """Clones of `ops` at the current insertion point, operands renamed through `m` (which
        receives the clones' results)."""
        for op in ops:
            c = op.operation.clone()
            for i, x in enumerate(op.operands):
                if x in m:
                    c.operands[i] = m[x]
            for r_old, r_new in zip(op.results, c.results):
                m[r_old] = r_new

    def _update(self, cvals, k: int, base):
        """The carried values of the next iteration: the body's updates cloned with the
        iteration at base + k*step reading `cvals` ({iter_arg index: value}); that iteration's
        induction value is built only when an update reads it."""
        reads_iv = any(x == self.iv for op in self.upd_ops for x in op.operands)
        m = self._mapping(self._iter_value(k, base) if reads_iv else None, cvals)
        self._clone_ops(self.upd_ops, m)
        ylds = _yielded(self.body)
        return {j: m.get(ylds[j], ylds[j]) for j in sorted(cvals)}

    def _clone_slice(self, cand: Candidate, iv_value, cvals=None) -> list:
        """Clones of the slice ops at the current insertion point with iv -> iv_value and the
        carried values -> cvals; returns the load's address operands (_address: pointer and
        mask, or descriptor indices) as that iteration computes them."""
        m = self._mapping(iv_value, cvals)
        self._clone_ops(cand.slice_ops, m)
        return [m.get(x, x) for x in _address(cand.load)]

    def _tma_copies(self, iv_value, pred, slot, cvals=None):
        """The TMA copies of the iteration at iv_value into ring slot `slot` (an i32), all
        completing on that slot's mbarrier, which first expects their bytes (Triton's
        LowerLoops: ttng.barrier_expect, then ttng.async_tma_copy_global_to_local per load)."""
        b = self.b
        bar = b.op(TTG.MEMDESC_INDEX, [barrier_type()], [self.barriers, slot]).results[0]
        nbytes = sum(mu.nbytes(c.load.results[0].type) for c in self.cands if c.tma)
        b.op(TTNG.BARRIER_EXPECT, [], [bar, pred], {"size": ir.IntegerAttr.get(b.i32, nbytes)})
        for cand, alloc in zip(self.cands, self.allocs):
            if not cand.tma:
                continue
            lb = self.b.at(cand.load.location)
            idx = self._clone_slice(cand, iv_value, cvals)
            view = lb.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, slot]).results[0]
            lb.op(TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL, [], tma_copy_operands(cand.load.operands[0], idx, view, bar, pred),
                  tma_copy_attrs(len(idx)))

    def _copies(self, iv_value, pred, slots, cvals=None):
        """Async copies of every pipelined pointer load for the iteration at iv_value (carried
        values `cvals`) into `slots` (one memdesc per load), then one commit group; returns the
        group's token (None without pointer loads); the TMA loads' copies go with them."""
        if any(c.tma for c in self.cands):
            self._tma_copies(iv_value, pred, slots[0], cvals)
        if all(c.tma for c in self.cands):
            return None
        toks = []
        for cand, alloc, slot in zip(self.cands, self.allocs, slots):
            if cand.tma:
                continue
            b = self.b.at(cand.load.location)
            ptr, *rest = self._clone_slice(cand, iv_value, cvals)
            mask = rest[0] if rest else None
            view = b.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, slot]).results[0]
            m = b.splat_i1(pred, ptr)
            if mask is not None:
                m = b.andi(m, mask)
            p = mu.props(cand.load)
            attrs = {"cache": p["cache"], "evict": p["evict"], "isVolatile": ir.BoolAttr.get(False),
                     "operandSegmentSizes": ir.Attribute.parse("array<i32: 1, 1, 1, 0>")}
            toks.append(b.op(TTG.ASYNC_COPY_GLOBAL_TO_LOCAL, [token_type()], [ptr, view, m], attrs).results[0])
        return self.b.op(TTG.ASYNC_COMMIT_GROUP, [token_type()], toks).results[0]

    def rewrite(self):
        b, S = self.b, self.S
        i32 = b.i32
        self.allocs, self.views = [], {}
        carried = frozenset().union(*(c.carried for c in self.cands))
        self.upd_ops = update_ops(self.body, self.iv, carried) if carried else ()
        inits = list(self.op.operands)[3:]
        cvals = {j: inits[j] for j in sorted(carried)}
        with ir.InsertionPoint(self.op):
            for cand in self.cands:
                res = cand.load.results[0].type
                t = ir.RankedTensorType(res)
                elem = str(t.element_type)
                if cand.alloc is not None:
                    enc = cand.ring_enc or _shared_encoding(cand.alloc.results[0].type)
                    ring = memdesc_type((self.slots, *t.shape), elem, None, enc)
                    view = memdesc_type(tuple(t.shape), elem, None, enc)
                else:
                    order = parse_encoding(str(t.encoding)).order
                    ring = memdesc_type((self.slots, *t.shape), elem, order)
                    view = memdesc_type(tuple(t.shape), elem, order)
                if cand.tma:  # the slot is the wgmma operand itself (a transposed view for tt.trans)
                    shape = _memdesc_shape(cand.alloc.results[0].type)
                    ring = memdesc_type((self.slots, *shape), elem, None, enc)
                    view = memdesc_type(tuple(shape), elem, None, enc)
                alloc = b.op(TTG.LOCAL_ALLOC, [ring], []).results[0]
                self.allocs.append(alloc)
                self.views[id(alloc)] = view
            self.barriers = None
            if any(c.tma for c in self.cands):  # one mbarrier per slot, arrived on by one thread
                ring = ir.Type.parse(f"!ttg.memdesc<{self.slots}x1xi64, {shared_attr([0])}, "
                                     "#ttg.shared_memory, mutable>")
                self.barriers = b.op(TTG.LOCAL_ALLOC, [ring], []).results[0]
                for k in range(self.slots):
                    bar = b.op(TTG.MEMDESC_INDEX, [barrier_type()], [self.barriers, b.const(k)]).results[0]
                    b.op(TTNG.INIT_BARRIER, [], [bar], {"count": ir.IntegerAttr.get(b.i32, 1)})
            # Iteration k's copies read the carried values of iteration k: those of k-1
            # advanced by the body's updates (Triton peels the address computation alike).
            tokens = []
            for k in range(S - 1):
                if k and cvals:
                    cvals = self._update(cvals, k - 1, self.lb)
                ivk = self._iter_value(k, self.lb)
                pred = b.cmpi(SLT, ivk, self.ub)
                idx = b.const(k)
                tok = self._copies(ivk, pred, [idx] * len(self.cands), cvals)
                if tok is not None:
                    tokens.append(tok)
            init_insert, init_extract = b.const(S - 2), b.const(-1)
            # the parity of the slot barriers' phase being waited for (with TMA loads)
            phases = [b.const(0)] if self.barriers is not None else []
        nres = len(self.op.results)
        # The loop carries, next to the originals, the carried values S-2 iterations ahead.
        ahead = sorted(cvals)
        new_for = self._new_loop([init_insert, init_extract] + phases + tokens + [cvals[j] for j in ahead])
        body = new_for.regions[0].blocks[0]
        args = list(body.arguments)
        insert, extract = args[1 + nres], args[2 + nres]
        phase = args[3 + nres] if phases else None
        first_tok = 3 + nres + len(phases)
        toks = args[first_tok:first_tok + len(tokens)]
        ahead_args = {j: a for j, a in zip(ahead, args[first_tok + len(tokens):])}
        ops = list(body.operations)
        first = next(o for o in ops if any(o.operation == c.load.operation for c in self.cands))
        yield_op = ops[-1]
        with ir.InsertionPoint(first):
            lim = b.subi(self.ub, self._step_times(S - 1))
            pred = b.cmpi(SLT, self.iv_new, lim)
            ext = b.addi(extract, b.const(1))
            wrap = b.cmpi(SGE, ext, b.const(self.slots))
            ext = b.select(wrap, b.const(0), ext)
            waited = None
            if toks:
                waited = b.op(TTG.ASYNC_WAIT, [token_type()], [toks[0]],
                              {"num": ir.IntegerAttr.get(i32, S - 2)}).results[0]
            if phase is not None:  # a slot's barrier completes a phase each time the slot fills
                phase = b.select(wrap, b.arith(ARITH.XORI, phase, b.const(1)), phase)
                bar = b.op(TTG.MEMDESC_INDEX, [barrier_type()], [self.barriers, ext]).results[0]
                b.op(TTNG.WAIT_BARRIER, [], [bar, phase], wait_barrier_attrs())
        for cand, alloc in zip(self.cands, self.allocs):
            load = cand.load
            lb = b.at(load.location)
            if cand.tma:  # wgmma reads the slot TMA filled (the alloc's view: transposed for tt.trans)
                with ir.InsertionPoint(cand.reader):
                    view = lb.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, ext]).results[0]
                _retarget(cand.alloc.results[0], view)
                _erase_fence_after(cand.alloc)
                cand.alloc.erase()
                if cand.trans is not None:
                    cand.trans.erase()
                continue
            if cand.views:
                # each wgmma reads the slot, a tt.trans user through a transposed view of it
                for v_alloc, wg, trans in cand.views:
                    with ir.InsertionPoint(wg):
                        view = lb.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, ext]).results[0]
                        if trans is not None:
                            shape = _memdesc_shape(v_alloc.results[0].type)
                            tview = memdesc_type(shape, str(ir.RankedTensorType(load.results[0].type).element_type),
                                                 None, _shared_encoding(v_alloc.results[0].type))
                            view = lb.op(TTG.MEMDESC_TRANS, [tview], [view],
                                         {"order": ir.DenseI32ArrayAttr.get([1, 0])}).results[0]
                    _retarget(v_alloc.results[0], view)
                    _erase_fence_after(v_alloc)
                    v_alloc.erase()
                    if trans is not None:
                        trans.erase()
                continue
            if cand.alloc is not None and cand.reader.name == TTNG.WARP_GROUP_DOT:
                # wgmma reads the slot itself: the dot and its waits take the slot's view.
                with ir.InsertionPoint(cand.reader):
                    view = lb.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, ext]).results[0]
                _retarget(cand.alloc.results[0], view)
                _erase_fence_after(cand.alloc)
                cand.alloc.erase()
                continue
            if cand.alloc is not None:
                # The dot operand's local_load reads the slot itself (no register round trip).
                with ir.InsertionPoint(cand.reader):
                    view = lb.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, ext]).results[0]
                    val = lb.op(TTG.LOCAL_LOAD, [cand.reader.results[0].type], [view, waited]).results[0]
                cand.reader.results[0].replace_all_uses_with(val)
                cand.reader.erase()
                cand.alloc.erase()
                continue
            with ir.InsertionPoint(load):
                view = lb.op(TTG.MEMDESC_INDEX, [self.views[id(alloc)]], [alloc, ext]).results[0]
                val = lb.op(TTG.LOCAL_LOAD, [load.results[0].type], [view, waited]).results[0]
                seg = _segments(load)
                if seg[2] and not mu.is_zero_splat(load.operands[1 + seg[1]]):
                    val = lb.select(load.operands[1], val, load.operands[1 + seg[1]])
            load.results[0].replace_all_uses_with(val)
        with ir.InsertionPoint(yield_op):
            ins = b.addi(insert, b.const(1))
            ins = b.select(b.cmpi(SGE, ins, b.const(self.slots)), b.const(0), ins)
            ahead_next = self._update(ahead_args, S - 2, self.iv_new) if ahead else {}
            nxt = self._iter_value(S - 1, self.iv_new)
            tok = self._copies(nxt, pred, [ins] * len(self.cands), ahead_next)
        ir.Operation.create(SCF.YIELD, results=[], operands=list(yield_op.operands)[:nres]
                            + [ins, ext] + ([phase] if phase is not None else [])
                            + (list(toks[1:]) + [tok] if toks else []) + [ahead_next[j] for j in ahead],
                            loc=yield_op.location, ip=ir.InsertionPoint(yield_op))
        yield_op.erase()
        for cand in self.cands:
            cand.load.erase()
        with ir.InsertionPoint.after(new_for):
            if toks:
                b.op(TTG.ASYNC_WAIT, [token_type()], [], {"num": ir.IntegerAttr.get(i32, 0)})
            if self.barriers is not None:  # every TMA copy issued has completed: each was waited for
                for k in range(self.slots):
                    bar = b.op(TTG.MEMDESC_INDEX, [barrier_type()], [self.barriers, b.const(k)]).results[0]
                    b.op(TTNG.INVAL_BARRIER, [], [bar])
                b.op(TTG.LOCAL_DEALLOC, [], [self.barriers])
            for alloc in self.allocs:
                b.op(TTG.LOCAL_DEALLOC, [], [alloc])
        # The address math the loads no longer use (clones feed the copies); other body ops may
        # still share part of it, so only what lost every use goes.
        pending = {op.operation: op for cand in self.cands for op in cand.slice_ops}
        changed = True
        while changed:
            changed = False
            for key, op in list(pending.items()):
                if all(_unused(r) for r in op.results):
                    del pending[key]
                    op.operation.erase()
                    changed = True
        if ahead:
            new_for = self._drop_dead_args(ahead)
        for wg in self.wgmmas.values():
            _keep_in_flight(wg, self.op)
        return self.op

    def _drop_dead_args(self, idxs):
        """Removes the iter_args among `idxs` that nothing needs any more (the original pointer,
        now that the copies read the one carried ahead): unused loop result, and the body only
        updates it by pure ops that feed nothing but its own yield (or those of other such
        iter_args). What remains is Triton's form: the loop carries the advanced pointer only."""
        body = self.op.regions[0].blocks[0]
        args = list(body.arguments)
        dead = {j for j in idxs if _unused(self.op.results[j])}
        while True:
            chains = {j: _chain(args[1 + j], dead) for j in dead}
            still = {j for j in dead if chains[j] is not None}
            if still == dead:
                break
            dead = still
        if not dead:
            return self.op
        order = {op.operation: i for i, op in enumerate(body.operations)}
        ops = {o.operation: o for j in dead for o in chains[j]}
        yield_op = list(body.operations)[-1]
        keep = [j for j in range(len(args) - 1) if j not in dead]
        ylds = list(yield_op.operands)
        ir.Operation.create(SCF.YIELD, results=[], operands=[ylds[j] for j in keep],
                            loc=yield_op.location, ip=ir.InsertionPoint(yield_op))
        yield_op.erase()
        for key in sorted(ops, key=lambda k: -order[k]):
            ops[key].operation.erase()
        return self._rebuild(keep)

    def _rebuild(self, keep):
        """The loop with only the iter_args `keep` (their indices); the others must be unused."""
        old = self.op
        body = old.regions[0].blocks[0]
        operands = list(old.operands)
        with ir.InsertionPoint(old):
            new = ir.Operation.create(SCF.FOR, results=[old.results[j].type for j in keep],
                                      operands=operands[:3] + [operands[3 + j] for j in keep],
                                      regions=1, loc=old.location)
        attrs = old.operation.attributes
        for name in [a.name if hasattr(a, "name") else a for a in attrs]:
            new.attributes[name] = attrs[name]
        args = list(body.arguments)
        kept = [args[0]] + [args[1 + j] for j in keep]
        blk = ir.Block.create_at_start(new.regions[0], [a.type for a in kept], [a.location for a in kept])
        for a_old, a_new in zip(kept, blk.arguments):
            a_old.replace_all_uses_with(a_new)
        for op in list(body.operations):
            _append(blk, op)
        for i, j in enumerate(keep):
            old.results[j].replace_all_uses_with(new.results[i])
        old.operation.erase()
        self.op = new
        return new

    def _step_times(self, k: int):
        c = _const_int(self.step)
        return self.b.const(k * c) if c is not None else self.b.muli(self.step, self.b.const(k))

    def _new_loop(self, extra_inits):
        """A copy of the scf.for with `extra_inits` appended to its iter_args, the old body moved
        in; the old loop's results are replaced by the new one's and the old loop erased."""
        old = self.op
        operands = list(old.operands) + extra_inits
        results = [r.type for r in old.results] + [v.type for v in extra_inits]
        with ir.InsertionPoint(old):
            new = ir.Operation.create(SCF.FOR, results=results, operands=operands, regions=1, loc=old.location)
        attrs = old.operation.attributes
        for name in [a.name if hasattr(a, "name") else a for a in attrs]:
            new.attributes[name] = attrs[name]
        arg_types = [a.type for a in self.body.arguments] + [v.type for v in extra_inits]
        blk = ir.Block.create_at_start(new.regions[0], arg_types,
                                       [a.location for a in self.body.arguments] + [old.location] * len(extra_inits))
        for a_old, a_new in zip(self.body.arguments, blk.arguments):
            a_old.replace_all_uses_with(a_new)
        for op in list(self.body.operations):
            _append(blk, op)
        self.iv_new = blk.arguments[0]
        self.iv = blk.arguments[0]
        self.body = blk
        for r_old, r_new in zip(old.results, new.results):
            r_old.replace_all_uses_with(r_new)
        old.operation.erase()
        self.op = new
        return new


def _retarget(old, new) -> None:
    """Every use of memdesc `old` reads `new` instead; a `ttng.warp_group_dot_wait` result
    that passes `old` through takes `new`'s type."""
    for use in list(old.uses):
        owner = use.owner
        owner.operands[use.operand_number] = new
        if owner.name == TTNG.WARP_GROUP_DOT_WAIT:
            owner.results[use.operand_number].set_type(new.type)


def _from_registers(v) -> bool:
    """Whether memdesc v is a `ttg.local_alloc` of a register tensor (written by st.shared)."""
    return isinstance(v, ir.OpResult) and v.owner.name == TTG.LOCAL_ALLOC and len(v.owner.operands) > 0


def _erase_fence_after(alloc) -> None:
    """The `ttng.fence_async_shared` accelerate_matmul put right after a register tile's
    local_alloc goes with it (cp.async writes need none: Triton's FenceInsertion)."""
    ops = [o.operation for o in alloc.operation.block.operations]
    i = ops.index(alloc.operation)
    if i + 1 < len(ops) and ops[i + 1].name == TTNG.FENCE_ASYNC_SHARED:
        ops[i + 1].erase()


def _keep_in_flight(wg, loop) -> None:
    """When a wgmma's wait hands its accumulator straight to the loop's yield and every shared
    operand outlives the next iteration (a ring slot, or a tile written before the loop), its
    group stays in flight into the next iteration, with a `ttng.warp_group_dot_wait {pendings =
    0}` on the loop's result (Triton's pipelined forms):
    - the loop's only wgmma (the matmul): its wait keeps one group (`pendings = 1`);
    - else (attention's P.V) its wait goes, and the first full wait of the next iteration that
      comes before any use of the carried accumulator (the QK dot's) takes it as an operand:
      that wait retires the group and ties its registers, so nothing reads them in flight."""
    a, bm = wg.operands[0], wg.operands[1]
    body = loop.regions[0].blocks[0]
    if any(_from_registers(v) and v.owner.operation.block == body for v in (a, bm)):
        return
    waits = [u.owner for u in wg.results[0].uses if u.owner.name == TTNG.WARP_GROUP_DOT_WAIT]
    if len(waits) != 1:
        return
    wait = waits[0]
    acc = wait.results[0]
    uses = list(acc.uses)
    if len(uses) != 1 or uses[0].owner.name != SCF.YIELD or uses[0].owner.operation.block != body:
        return
    index = uses[0].operand_number
    res = loop.results[index]
    i32 = ir.IntegerType.get_signless(32)
    if sum(1 for o in body.operations if o.operation.name == TTNG.WARP_GROUP_DOT) == 1:
        wait.attributes["pendings"] = ir.IntegerAttr.get(i32, 1)
    elif not _tie_to_next_wait(wait, body.arguments[1 + index]):
        return
    with ir.InsertionPoint.after(loop):
        done = ir.Operation.create(TTNG.WARP_GROUP_DOT_WAIT, results=[res.type], operands=[res],
                                   attributes={"pendings": ir.IntegerAttr.get(i32, 0)}, loc=loop.location)
    res.replace_all_uses_except(done.results[0], done)


def _tie_to_next_wait(wait, arg) -> bool:
    """Drop `wait` (its group stays in flight) and add the carried accumulator `arg` to the
    body's first full warp_group_dot_wait that precedes every use of `arg`; False (nothing
    changed) when there is none."""
    body = arg.owner
    ops = [o.operation for o in body.operations]
    pos = {o: k for k, o in enumerate(ops)}

    def top(op):  # the op of `body` that holds op
        while op.block != body:
            op = op.parent
        return op

    first_use = min(pos[top(u.owner.operation)] for u in arg.uses)
    target = next((o for o in ops[:first_use] if o.name == TTNG.WARP_GROUP_DOT_WAIT and o != wait.operation
                   and mu.int_attr(o.attributes["pendings"]) == 0), None)
    if target is None:
        return False
    with ir.InsertionPoint(target):
        new = ir.Operation.create(TTNG.WARP_GROUP_DOT_WAIT, results=[r.type for r in target.results] + [arg.type],
                                  operands=list(target.operands) + [arg],
                                  attributes={"pendings": target.attributes["pendings"]}, loc=target.location)
    for old, r in zip(target.results, new.results):
        old.replace_all_uses_with(r)
    arg.replace_all_uses_except(new.results[len(target.results)], new)
    target.erase()
    for r, v in zip(list(wait.results), list(wait.operands)):
        r.replace_all_uses_with(v)
    wait.operation.erase()
    return True


def _unused(v) -> bool:
    return next(iter(v.uses), None) is None


def _pure(op) -> bool:
    return is_pure(op.operation.name) and not len(op.regions)


def _chain(arg, dead) -> list | None:
    """The ops reached from block argument `arg` through uses, when all are pure and end only in
    the scf.yield at the positions of iter_args in `dead`; None otherwise."""
    seen, out, todo = set(), [], [arg]
    while todo:
        v = todo.pop()
        for use in v.uses:
            op = use.owner
            if op.name == SCF.YIELD:
                if use.operand_number not in dead:
                    return None
                continue
            if not _pure(op):
                return None
            if op in seen:
                continue
            seen.add(op)
            out.append(op)
            todo.extend(op.results)
    return out


def _append(block, op):
    ops = list(block.operations)
    if ops:
        op.operation.move_after(ops[-1])
    else:
        # An empty block: insert through an insertion point at its end.
        op.operation.detach_from_parent()
        ir.InsertionPoint(block).insert(op.operation)


def _const_int(v):
    if isinstance(v, ir.OpResult) and v.owner.name == ARITH.CONSTANT:
        a = v.owner.attributes["value"]
        if isinstance(a, ir.IntegerAttr):
            return a.value
    return None


def _loops(func) -> list:
    """The scf.for ops of `func`, inner loops first (post-order)."""
    return [op for op in walk(func, post_order=True) if op.name == SCF.FOR]


def stages_for(for_op, num_stages: int) -> int:
    """The loop's own `tt.num_stages` (tl.range), else the kernel's num_stages for a loop whose
    body holds a tt.dot (Triton's default), else 1."""
    if "tt.num_stages" in for_op.operation.attributes:
        return num_stages_of(for_op)
    return num_stages if has_dot(for_op) else 1


def pipeline(module, num_stages: int = 1) -> int:
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
            if S < 2:
                continue
            cands = candidates(f, axis, plain="tt.num_stages" in f.operation.attributes)
            if not cands:
                continue
            _Loop(f, S, cands).rewrite()
            count += len(cands)
    return count
