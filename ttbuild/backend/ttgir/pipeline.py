"""TTGIR pass: software pipelining of global loads in `scf.for` loops marked `tt.num_stages = S` (S >= 2) through cp.async into an (S-1)-slot shared-memory ring.

What Triton 3.6 does for a loop without `tt.dot` (lib/Dialect/TritonGPU/Transforms/Pipeliner:
AssignLatencies.cpp picks the loads, LowerLoops.cpp turns them into async copies,
PipelineExpander.cpp peels the prologue), and what this pass reproduces op for op:

- Only loops that carry the `tt.num_stages` attribute (written by `tl.range(..., num_stages=S)`)
  are pipelined; a plain `range` loop, or S == 1, is left alone. The kernel-level `num_stages`
  option (a variant option) applies in Triton only to loops holding a `tt.dot`, which this
  backend does not lower: the ttgir stage keeps it recorded in the metadata and does nothing
  with it.
- A `tt.load` at the top level of the loop body is pipelined when its pointer and mask are
  computed, inside the loop, only from the induction variable and loop-invariant values by pure
  ops (no other load: indirect loads stay; no other loop-carried value), and each thread's
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

Offsets of the buffers in shared memory are placed by ttbuild.backend.analysis.allocation.allocate (after the
scratch of reductions and layout conversions, so they never overlap).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import AxisAnalysis, vector_elems
from ttbuild.backend.analysis.layout import parse_layout
from ttbuild.optraits import is_pure, walk

ir = mu.ir

SLOTTED_ELEMS = {"f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "f8E4M3FN", "f8E5M2"}


@dataclass(frozen=True)
class Candidate:
    """A load to pipeline: the op and the body ops (program order) its pointer and mask need."""
    load: object
    slice_ops: tuple
    vec_bytes: int


def shared_attr(order) -> str:
    return ("#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = ["
            + ", ".join(str(o) for o in order) + "]}>")


def memdesc_type(shape, elem: str, order) -> ir.Type:
    dims = "x".join(str(s) for s in shape)
    return ir.Type.parse(f"!ttg.memdesc<{dims}x{elem}, {shared_attr(order)}, #ttg.shared_memory, mutable>")


def token_type() -> ir.Type:
    return ir.Type.parse("!ttg.async.token")


def chunk_bytes(ptr, mask, axis: AxisAnalysis) -> int:
    """Bytes of each thread's contiguous chunk that one cp.async can move: elements contiguous in
    the thread's layout (sizePerThread along order[0]), in memory and aligned (axis info), and
    under one mask bit (mask constancy), times the element size."""
    layout = parse_layout(mu.encoding_str(ptr.type))
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


def _slice(load, body, iv):
    """Body ops that the load's pointer and mask depend on, in program order; None when they
    reach a loop-carried value other than the induction variable, a load, or an impure op."""
    seen, ops = set(), []

    def visit(v) -> bool:
        if not _in_body(v, body):
            return True
        if isinstance(v, ir.BlockArgument):
            return v == iv
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

    nmask = _segments(load)[1]
    if not all(visit(x) for x in list(load.operands)[:1 + nmask]):
        return None
    order = {op.operation: i for i, op in enumerate(body.operations)}
    return tuple(sorted(ops, key=lambda o: order[o.operation]))


def _segments(load) -> list[int]:
    p = mu.props(load)
    if "operandSegmentSizes" in p:
        return [int(x) for x in p["operandSegmentSizes"]]
    return [1, len(load.operands) - 1, 0]


def _is_zero_other(v) -> bool:
    """Whether `other` is a splat of +0 (all bits zero): the zero-filled slot already holds it."""
    if not isinstance(v, ir.OpResult) or v.owner.name != "arith.constant":
        return False
    a = v.owner.attributes["value"]
    if not (isinstance(a, ir.DenseElementsAttr) and a.is_splat):
        return False
    s = a.get_splat_value()
    if isinstance(s, ir.FloatAttr):
        import struct
        return struct.pack("<d", s.value) == b"\0" * 8
    return ir.IntegerAttr(s).value == 0


def candidates(for_op, axis: AxisAnalysis) -> list[Candidate]:
    """Loads of the loop body that this pass pipelines (see the module docstring for the rules)."""
    body = for_op.regions[0].blocks[0]
    iv = body.arguments[0]
    out = []
    for op in body.operations:
        if op.operation.name != "tt.load" or not isinstance(op.operands[0].type, ir.RankedTensorType):
            continue
        p = mu.props(op)
        if "isVolatile" in p and ir.BoolAttr(p["isVolatile"]).value:
            continue
        if mu.elem_str(op.results[0].type) not in SLOTTED_ELEMS:
            continue
        seg = _segments(op)
        ops = _slice(op, body, iv)
        if ops is None:
            continue
        mask = op.operands[1] if seg[1] else None
        nbytes = chunk_bytes(op.operands[0], mask, axis)
        if nbytes < 4:
            continue
        out.append(Candidate(op, ops, min(nbytes, 16)))
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
        return self.op("arith.constant", [self.i32], [], {"value": ir.IntegerAttr.get(self.i32, v)}).results[0]

    def arith(self, name, a, b, extra=None):
        return self.op(name, [a.type], [a, b], extra).results[0]

    def addi(self, a, b):
        return self.arith("arith.addi", a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def muli(self, a, b):
        return self.arith("arith.muli", a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def subi(self, a, b):
        return self.arith("arith.subi", a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def cmpi(self, pred: int, a, b):
        i1 = ir.IntegerType.get_signless(1)
        t = ir.RankedTensorType.get(a.type.shape, i1, a.type.encoding) if isinstance(a.type, ir.RankedTensorType) else i1
        return self.op("arith.cmpi", [t], [a, b], {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pred)}).results[0]

    def select(self, c, a, b):
        return self.op("arith.select", [a.type], [c, a, b]).results[0]

    def splat_i1(self, pred, like):
        t = ir.RankedTensorType(like.type)
        i1 = ir.IntegerType.get_signless(1)
        return self.op("tt.splat", [ir.RankedTensorType.get(t.shape, i1, t.encoding)], [pred]).results[0]

    def andi(self, a, b):
        return self.arith("arith.andi", a, b)


SLT, SGE = 2, 5  # arith.cmpi predicates (MLIR ArithBase.td CmpIPredicate)


class _Loop:
    """Rewrites one scf.for with S stages and its pipelined loads."""

    def __init__(self, for_op, stages: int, cands: list[Candidate]):
        self.op, self.S, self.cands = for_op, stages, cands
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

    def _clone_slice(self, cand: Candidate, iv_value):
        """Clones of the slice ops at the current insertion point with iv -> iv_value; returns
        (pointer, mask or None) of the load as that iteration computes them."""
        m = {self.iv: iv_value}
        for op in cand.slice_ops:
            c = op.operation.clone()
            for i, x in enumerate(op.operands):
                if x in m:
                    c.operands[i] = m[x]
            for r_old, r_new in zip(op.results, c.results):
                m[r_old] = r_new
        load = cand.load
        seg = _segments(load)
        ptr = m.get(load.operands[0], load.operands[0])
        mask = m.get(load.operands[1], load.operands[1]) if seg[1] else None
        return ptr, mask

    def _copies(self, iv_value, pred, slots):
        """Async copies of every pipelined load for the iteration at iv_value into `slots`
        (one memdesc per load), then one commit group; returns the group's token."""
        toks = []
        for cand, alloc, slot in zip(self.cands, self.allocs, slots):
            b = self.b.at(cand.load.location)
            ptr, mask = self._clone_slice(cand, iv_value)
            view = b.op("ttg.memdesc_index", [self.views[id(alloc)]], [alloc, slot]).results[0]
            m = b.splat_i1(pred, ptr)
            if mask is not None:
                m = b.andi(m, mask)
            p = mu.props(cand.load)
            attrs = {"cache": p["cache"], "evict": p["evict"], "isVolatile": ir.BoolAttr.get(False),
                     "operandSegmentSizes": ir.Attribute.parse("array<i32: 1, 1, 1, 0>")}
            toks.append(b.op("ttg.async_copy_global_to_local", [token_type()], [ptr, view, m], attrs).results[0])
        return self.b.op("ttg.async_commit_group", [token_type()], toks).results[0]

    def rewrite(self):
        b, S = self.b, self.S
        i32 = b.i32
        self.allocs, self.views = [], {}
        with ir.InsertionPoint(self.op):
            for cand in self.cands:
                res = cand.load.results[0].type
                t = ir.RankedTensorType(res)
                order = parse_layout(str(t.encoding)).order
                elem = str(t.element_type)
                alloc = b.op("ttg.local_alloc", [memdesc_type((S - 1, *t.shape), elem, order)], []).results[0]
                self.allocs.append(alloc)
                self.views[id(alloc)] = memdesc_type(tuple(t.shape), elem, order)
            tokens = []
            for k in range(S - 1):
                ivk = self._iter_value(k, self.lb)
                pred = b.cmpi(SLT, ivk, self.ub)
                idx = b.const(k)
                tokens.append(self._copies(ivk, pred, [idx] * len(self.cands)))
            init_insert, init_extract = b.const(S - 2), b.const(-1)
        nres = len(self.op.results)
        new_for = self._new_loop([init_insert, init_extract] + tokens)
        body = new_for.regions[0].blocks[0]
        args = list(body.arguments)
        insert, extract = args[1 + nres], args[2 + nres]
        toks = args[3 + nres:]
        ops = list(body.operations)
        first = next(o for o in ops if any(o.operation == c.load.operation for c in self.cands))
        yield_op = ops[-1]
        with ir.InsertionPoint(first):
            lim = b.subi(self.ub, self._step_times(S - 1))
            pred = b.cmpi(SLT, self.iv_new, lim)
            ext = b.addi(extract, b.const(1))
            ext = b.select(b.cmpi(SGE, ext, b.const(S - 1)), b.const(0), ext)
            waited = b.op("ttg.async_wait", [token_type()], [toks[0]],
                          {"num": ir.IntegerAttr.get(i32, S - 2)}).results[0]
        for cand, alloc in zip(self.cands, self.allocs):
            load = cand.load
            lb = b.at(load.location)
            with ir.InsertionPoint(load):
                view = lb.op("ttg.memdesc_index", [self.views[id(alloc)]], [alloc, ext]).results[0]
                val = lb.op("ttg.local_load", [load.results[0].type], [view, waited]).results[0]
                seg = _segments(load)
                if seg[2] and not _is_zero_other(load.operands[1 + seg[1]]):
                    val = lb.select(load.operands[1], val, load.operands[1 + seg[1]])
            load.results[0].replace_all_uses_with(val)
        with ir.InsertionPoint(yield_op):
            ins = b.addi(insert, b.const(1))
            ins = b.select(b.cmpi(SGE, ins, b.const(S - 1)), b.const(0), ins)
            nxt = self._iter_value(S - 1, self.iv_new)
            tok = self._copies(nxt, pred, [ins] * len(self.cands))
        ir.Operation.create("scf.yield", results=[], operands=list(yield_op.operands)[:nres]
                            + [ins, ext] + list(toks[1:]) + [tok], loc=yield_op.location,
                            ip=ir.InsertionPoint(yield_op))
        yield_op.erase()
        for cand in self.cands:
            cand.load.erase()
        with ir.InsertionPoint.after(new_for):
            b.op("ttg.async_wait", [token_type()], [], {"num": ir.IntegerAttr.get(i32, 0)})
            for alloc in self.allocs:
                b.op("ttg.local_dealloc", [], [alloc])
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
        return new_for

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
            new = ir.Operation.create("scf.for", results=results, operands=operands, regions=1, loc=old.location)
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
        for r_old, r_new in zip(old.results, new.results):
            r_old.replace_all_uses_with(r_new)
        old.operation.erase()
        self.op = new
        return new


def _unused(v) -> bool:
    return next(iter(v.uses), None) is None


def _append(block, op):
    ops = list(block.operations)
    if ops:
        op.operation.move_after(ops[-1])
    else:
        # An empty block: insert through an insertion point at its end.
        op.operation.detach_from_parent()
        ir.InsertionPoint(block).insert(op.operation)


def _const_int(v):
    if isinstance(v, ir.OpResult) and v.owner.name == "arith.constant":
        a = v.owner.attributes["value"]
        if isinstance(a, ir.IntegerAttr):
            return a.value
    return None


def _loops(func) -> list:
    """The scf.for ops of `func`, inner loops first (post-order)."""
    return [op for op in walk(func, post_order=True) if op.name == "scf.for"]


def pipeline(module) -> int:
    """Pipeline every eligible load of every `scf.for` with `tt.num_stages` >= 2 (inner loops
    first); returns how many loads became async copies. Raises nothing on loops it skips."""
    count = 0
    for func in module.body.operations:
        if func.operation.name != "tt.func":
            continue
        loops = _loops(func)
        if not any(num_stages_of(f) >= 2 for f in loops):
            continue
        axis = AxisAnalysis(func)
        for f in loops:
            S = num_stages_of(f)
            if S < 2:
                continue
            cands = candidates(f, axis)
            if not cands:
                continue
            _Loop(f, S, cands).rewrite()
            count += len(cands)
    return count
