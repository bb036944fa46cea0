"""TTGIR pass: a dot result's conversion to a blocked layout is pushed forward through the ops that run in any layout.

Those ops are elementwise ops, reductions, expand_dims/broadcast and loop-carried values, so
attention's softmax runs on the `#ttg.nvidia_mma` accumulator fragments and P reaches the second dot
as a register-only `#mma -> #dot_op` conversion (Triton's RemoveLayoutConversions forward
propagation and its mma -> dot_op shortcut).

Per `ttg.convert_layout %x : #mma -> #blocked` (accelerate_matmul puts one after every dot whose
result is not a loop-carried matmul accumulator), the forward slice of its result is collected:
values reached through elementwise ops (ttbuild.backend.ir.optraits.is_elementwise), `tt.reduce`,
`tt.expand_dims`, `tt.broadcast`, and through `scf.for` iter_args / results / inits / yields.
Every value in the slice takes the encoding with `#blocked` replaced by `#mma` (`#ttg.slice`s of
it by slices of `#mma`). Operands from outside the slice are rebuilt in the encoding their op
needs when they are constants, splats, ranges, views or elementwise ops on vectors of those
(rematerialized where they were defined), else converted; uses outside the slice (stores,
shared-memory stages, other ops) get a conversion back, and conversions the slice now feeds are
folded or rebuilt the same way (fold_conversions).

A slice is rewritten when that saves work in the loop: it holds a `tt.reduce` (the softmax:
reducing on the fragments saves a shared-memory round trip of the whole tile per iteration), a
loop-carried value (an accumulator updated by elementwise ops then a dot, as attention
backward's dK/dV: carried in #mma, converted once after the loop), a staged dot operand (P of
a chained dot: then the mma -> dot_op shortcut below applies) or a conversion back to #mma (a
round trip through shared memory that then disappears), or when it ends in fewer bytes than it
starts with and needs no tile converted in (an epilogue `(acc / l_i).to(tl.float16)` or an
activation then a narrowing cast: the narrow tile converts, as in Triton). Other conversions (a
matmul epilogue storing fp32) stay where they are, as in Triton.

Then `ttg.local_load(ttg.local_alloc(convert(%x : #mma -> #blocked)))` into a `#ttg.dot_op`
becomes `ttg.convert_layout %x : #mma -> #dot_op` when every thread already holds the operand
elements it needs (ttbuild.backend.analysis.layout.same_thread_map: the accumulator of two
adjacent n8 tiles is the A fragment of one k16 step when the warps split only M).

Last, a stored vector whose layout gives each thread many copies (a slice of a tile's layout) is
re-laid in the default 1-D blocked layout (relayout_replicated_stores, Triton's Coalesce).
"""

from __future__ import annotations

from math import prod

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.layout import default_blocked, same_thread_map
from ttbuild.backend.ir.builders import convert_layout, create
from ttbuild.backend.ir.encodings import Blocked, NvidiaMma, Slice, parse_encoding
from ttbuild.backend.ir.ops import ARITH, SCF, TT, TTG
from ttbuild.backend.ir.optraits import DOT_OPS, erase_dead, is_elementwise, is_volatile, walk
from ttbuild.backend.ir.types import with_encoding

ir = mu.ir

_VIEWS = (TT.EXPAND_DIMS, TT.BROADCAST)
_REMAT_DEPTH = 8


def _remap_layout(layout, old, new):
    """`layout` with the blocked layout `old` replaced by `new` (through slices), else None."""
    if layout == old:
        return new
    if isinstance(layout, Slice):
        parent = _remap_layout(layout.parent, old, new)
        return Slice(layout.dim, parent) if parent is not None else None
    return None


def _layout(v):
    enc = mu.encoding_str(v.type)
    try:
        return parse_encoding(enc) if enc else None
    except ValueError:
        return None


class _Slice:
    """The forward slice of one conversion's result and what rewriting it takes."""

    def __init__(self, root, old, new):
        self.root, self.old, self.new = root, old, new
        self.values: list = []          # values whose type changes, in discovery order
        self.keys: set = set()
        self.ops: list = []             # ops computing in the new layout (their operands need it)
        self.op_keys: set = set()
        self.loops: list = []           # (scf.for op, iter index) carried in the new layout
        self.loop_keys: set = set()
        self.boundary: list = []        # (op, operand index): uses that keep the old layout
        self.reduces = 0
        self.to_dot = 0                 # boundary local_allocs that stage a dot operand
        self.to_mma = 0                 # boundary conversions back to a tensor-core layout

    def add(self, v) -> None:
        """Add value `v` to the slice (once, in discovery order)."""
        if v not in self.keys:
            self.keys.add(v)
            self.values.append(v)

    def add_op(self, op) -> None:
        """Add `op` to the ops that compute in the new layout (once), counting reductions, and its tensor results to
        the slice."""
        if op not in self.op_keys:
            self.op_keys.add(op)
            self.ops.append(op)
            if op.name == TT.REDUCE:
                self.reduces += 1
            for r in op.results:
                if mu.is_tensor(r):
                    self.add(r)

    def add_loop(self, loop, i: int) -> None:
        """Carry scf.for iter arg `i` of `loop` in the new layout: its block argument and its result join the slice."""
        if (loop, i) not in self.loop_keys:
            self.loop_keys.add((loop, i))
            self.loops.append((loop, i))
            self.add(loop.regions[0].blocks[0].arguments[1 + i])
            self.add(loop.results[i])

    def collect(self) -> None:
        """Walk forward from the root conversion's result through elementwise users, loop carries and yields,
        collecting what would change layout and the boundary uses that keep the old one (Triton's
        RemoveLayoutConversions forward propagation)."""
        self.add(self.root.results[0])
        k = 0
        while k < len(self.values):
            v = self.values[k]
            k += 1
            for use in v.uses:
                op = use.owner
                if op.name == SCF.YIELD and op.parent.name == SCF.FOR:
                    self.add_loop(op.parent.opview, use.operand_number)
                elif op.name == SCF.FOR and use.operand_number >= 3:
                    self.add_loop(op.opview, use.operand_number - 3)
                elif is_elementwise(op.name) or op.name in _VIEWS or op.name == TT.REDUCE:
                    self.add_op(op)
                else:
                    self.boundary.append((op, use.operand_number))
                    if op.name == TTG.LOCAL_ALLOC and _stages_dot_operand(op):
                        self.to_dot += 1
                    if op.name == TTG.CONVERT_LAYOUT and _mma_derived(_layout(op.results[0])):
                        self.to_mma += 1

    def shrinks(self) -> bool:
        """Whether the slice ends in fewer bytes than it starts with and needs no tile from
        outside converted in: a narrowing cast on the way (attention's `(acc / l_i).to(fp16)`,
        an activation then `.to(fp16)`) then converts the narrow tile instead of the fp32 one,
        as Triton's forward propagation does (the cast runs on the #mma fragments)."""
        seen = {op.operands[i] for op, i in self.boundary}
        if sum(mu.nbytes(v.type) for v in seen) >= mu.nbytes(self.root.results[0].type):
            return False
        return all(w in self.keys or not mu.is_tensor(w) or _cheap_in(w)
                   for op in self.ops for w in op.operands)

    def feasible(self) -> bool:
        """Whether every value of the slice has an encoding derived from the converted-to
        blocked layout (operands from outside are rebuilt or converted to what their op needs)."""
        return all(self.new_type(v) is not None for v in self.values)

    def new_type(self, v):
        """`v`'s tensor type with its layout remapped from the old to the new one, or None when the layout does not
        involve it."""
        layout = _layout(v)
        mapped = _remap_layout(layout, self.old, self.new) if layout is not None else None
        return with_encoding(v.type, mapped) if mapped is not None else None


def _is_vector(t) -> bool:
    """At most one dimension above 1 (a row or column vector, or a scalar-like tile)."""
    return sum(1 for d in mu.shape_of(t) if d > 1) <= 1


def _cheap_in(v, depth: int = 0) -> bool:
    """Whether `v`, an operand from outside a slice, reaches the slice's layout without a tile
    conversion: a vector (converting it moves little), or what Remat rebuilds (constants,
    splats, ranges, views, conversions, elementwise ops on those)."""
    if _is_vector(v.type):
        return True
    if isinstance(v, ir.BlockArgument) or depth > _REMAT_DEPTH:
        return False
    op = v.owner
    if op.name in (ARITH.CONSTANT, TT.SPLAT, TT.MAKE_RANGE):
        attr = op.attributes["value"] if op.name == ARITH.CONSTANT else None
        return attr is None or (isinstance(attr, ir.DenseElementsAttr) and attr.is_splat)
    if op.name in _VIEWS or op.name == TTG.CONVERT_LAYOUT or (is_elementwise(op.name) and _cheap_twice(v)):
        return all(not mu.is_tensor(w) or _cheap_in(w, depth + 1) for w in op.operands)
    return False


def _stages_dot_operand(alloc) -> bool:
    """Whether a register tile's local_alloc is read back only into a #ttg.dot_op (an operand
    accelerate_matmul staged, which may take the mma -> dot_op shortcut instead)."""
    uses = list(alloc.results[0].uses)
    return bool(uses) and all(u.owner.name == TTG.LOCAL_LOAD and hasattr(_layout(u.owner.results[0]), "op_idx")
                              for u in uses)


def _insert_after(v):
    """Insertion point right after `v`'s definition (the start of its block for an argument)."""
    if isinstance(v, ir.BlockArgument):
        ops = list(v.owner.operations)
        return ir.InsertionPoint(ops[0]) if ops else ir.InsertionPoint(v.owner)
    return ir.InsertionPoint.after(v.owner)


def _convert(v, t, ip, loc):
    with ip:
        return convert_layout(v, t, loc)


def _encloses(op, block) -> bool:
    """Whether `block` lies in a region of `op` (at any depth)."""
    owner = block.owner
    while owner is not None:
        if owner.operation == op.operation:
            return True
        owner = owner.operation.parent
    return False


def _invariant_point(v, op) -> ir.InsertionPoint:
    """Where a conversion of `v` for its use by `op` goes: before `op`, or before the outermost
    loop around `op` that `v` is defined outside of (Triton's loop-invariant code motion leaves
    such a conversion there: a stored epilogue tile converts once, not in a store loop)."""
    home = v.owner if isinstance(v, ir.BlockArgument) else v.owner.operation.block
    at, parent = op, op.operation.parent
    while parent is not None and parent.name != TT.FUNC:
        if parent.name in (SCF.FOR, SCF.WHILE) and not _encloses(parent, home):
            at = parent
        parent = parent.operation.parent
    return ir.InsertionPoint(at)


def _cheap_twice(v) -> bool:
    """Whether recomputing `v` costs little: a vector-like tensor (at most one dimension above
    1), or a value with a single use (the original then dies: nothing is computed twice)."""
    return _is_vector(v.type) or len(list(v.uses)) == 1


class Remat:
    """Values in a wanted encoding, rebuilt where they were defined when that is cheap
    (constants, splats, ranges, views, conversions, elementwise ops that are cheap to compute twice, recursively),
    else converted right after their definition."""

    def __init__(self, loc, threads: int | None = None):
        self.loc = loc
        self.threads = threads  # of the CTA: a load of fewer elements is cheap to repeat (_small_load)
        self.cache: dict = {}

    def get(self, v, layout):
        """`v` in `layout`: rebuilt if cheap, else through a new ttg.convert_layout."""
        t = with_encoding(v.type, layout)
        if t == v.type:
            return v
        out = self.rebuild(v, layout)
        if out is None:
            key = ("cvt", v, str(t))
            if key not in self.cache:
                self.cache[key] = _convert(v, t, _insert_after(v), self.loc)
            out = self.cache[key]
        return out

    def rebuild(self, v, layout, depth: int = 0):
        """`v` recomputed in `layout` from cheap ops, or None."""
        t = with_encoding(v.type, layout)
        if t == v.type:
            return v
        key = (v, str(t))
        if key in self.cache:
            return self.cache[key]
        out = self._rebuild(v, layout, t, depth)
        if out is not None:
            self.cache[key] = out
        return out

    def _rebuild(self, v, layout, t, depth):
        if depth > 0 and _is_vector(v.type) and not self._rebuildable(v):
            # a vector nothing cheap computes (a loaded row of M or Delta): convert it, not the
            # tile it is broadcast into
            return _convert(v, t, _insert_after(v), self.loc)
        if isinstance(v, ir.BlockArgument) or depth > _REMAT_DEPTH:
            return None
        op = v.owner
        name = op.name
        if name == ARITH.CONSTANT:
            attr = op.attributes["value"]
            if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
                return None
            with ir.InsertionPoint.after(op):
                return create(ARITH.CONSTANT, results=[t],
                                           attrs={"value": ir.DenseElementsAttr.get_splat(t, attr.get_splat_value())},
                                           loc=op.location).results[0]
        if name in (TT.SPLAT, TT.MAKE_RANGE):
            return _clone(op, t, {})
        if name == TT.LOAD and self._small_load(op):
            return self._clone_rebuilt(op, layout, t, depth)
        if name == TTG.CONVERT_LAYOUT:
            return self.rebuild(op.operands[0], layout, depth + 1)
        if name == TT.EXPAND_DIMS:
            src = self.rebuild(op.operands[0], Slice(mu.int_attr(mu.props(op)["axis"]), layout), depth + 1)
            return _clone(op, t, {0: src}) if src is not None else None
        if name == TT.RESHAPE:
            return self._unit_reshape(op, layout, t, depth)
        if name == TT.BROADCAST or (is_elementwise(name) and len(op.results) == 1 and _cheap_twice(v)):
            return self._clone_rebuilt(op, layout, t, depth)
        return None

    def _clone_rebuilt(self, op, layout, t, depth):
        """`op` cloned with result type `t`, each tensor operand rebuilt in `layout`; None if one cannot be."""
        new = {}
        for i, w in enumerate(op.operands):
            if mu.is_tensor(w):
                new[i] = self.rebuild(w, layout, depth + 1)
                if new[i] is None:
                    return None
        return _clone(op, t, new)

    def _unit_reshape(self, op, layout, t, depth):
        """A reshape that only puts size-1 dims around a 1-D value (tl.sort's `_indicator`:
        arange(0, 2) shaped [1, .., 2, .., 1]) as that value rebuilt in `layout` sliced down to
        the one kept dim, then expand_dims back: no shuffle through shared memory (Triton's
        rematerialization reaches the same with the range in a linear layout)."""
        shape, src = mu.shape_of(t), op.operands[0]
        big = [d for d, n in enumerate(shape) if n != 1]
        if not isinstance(layout, (Blocked, Slice)) or len(mu.shape_of(src.type)) != 1 or len(big) != 1:
            return None
        dropped = [d for d in reversed(range(len(shape))) if d != big[0]]  # highest first
        lays = [layout]
        for d in dropped:
            lays.append(Slice(d, lays[-1]))
        v = self.rebuild(src, lays[-1], depth + 1)
        if v is None:
            return None
        cur = list(mu.shape_of(src.type))
        with ir.InsertionPoint.after(op):
            for d, lay in zip(reversed(dropped), reversed(lays[:-1])):
                cur.insert(d, 1)
                rt = ir.RankedTensorType.get(cur, ir.RankedTensorType(t).element_type, ir.Attribute.parse(lay.attr()))
                v = create(TT.EXPAND_DIMS, [rt], [v], {"axis": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), d)},
                           loc=op.location).results[0]
        return v

    def _rebuildable(self, v) -> bool:
        if isinstance(v, ir.BlockArgument):
            return False
        name = v.owner.name
        return name in (ARITH.CONSTANT, TT.SPLAT, TT.MAKE_RANGE, TTG.CONVERT_LAYOUT) or name in _VIEWS \
            or is_elementwise(name) or (name == TT.LOAD and self._small_load(v.owner))

    def _small_load(self, op) -> bool:
        """A non-volatile tt.load of fewer elements than the CTA has threads: loaded again in the
        wanted layout, right after the original (the same memory state), rather than converted
        through shared memory. Triton 3.6's rule (lib/Dialect/TritonGPU/Transforms/Utility.cpp
        isExpensiveLoadOrStore: "Tensor of pointers has more threads than elements, we can presume
        a high hit-rate that makes it cheap to load")."""
        return self.threads is not None and not is_volatile(op) and prod(mu.shape_of(op.results[0].type)) < self.threads


def _clone(op, t, operands: dict):
    clone = op.clone(ir.InsertionPoint.after(op))
    for i, w in operands.items():
        clone.operands[i] = w
    clone.results[0].set_type(t)
    return clone.results[0]


def _required(op, i: int):
    """The layout operand `i` of `op` (whose results already have their new types) must have."""
    res = _layout(op.results[0])
    if op.name == TT.EXPAND_DIMS:
        return Slice(mu.int_attr(mu.props(op)["axis"]), res)
    if op.name == TT.REDUCE:
        return res.parent if isinstance(res, Slice) else _layout(op.operands[i])
    return res


def _rewrite(sl: _Slice, remat: Remat) -> None:
    old_types = {v: v.type for v in sl.values}
    new_types = {v: sl.new_type(v) for v in sl.values}
    for v in sl.values:
        v.set_type(new_types[v])
    for op in sl.ops:
        for i, w in enumerate(op.operands):
            if mu.is_tensor(w) and w not in sl.keys:
                op.operands[i] = remat.get(w, _required(op, i))
    for loop, i in sl.loops:
        want = _layout(loop.results[i])
        init = loop.operands[3 + i]
        if init not in sl.keys:
            loop.operands[3 + i] = remat.get(init, want)
        yield_op = list(loop.regions[0].blocks[0].operations)[-1]
        y = yield_op.operands[i]
        if y not in sl.keys:
            yield_op.operands[i] = remat.get(y, want)
    for op, i in sl.boundary:
        v = op.operands[i]
        if op.name == TTG.CONVERT_LAYOUT:
            continue  # it now converts from the new layout (fold_conversions may remove it)
        op.operands[i] = _convert(v, old_types[v], _invariant_point(v, op), op.location)
    root = sl.root
    root.results[0].replace_all_uses_with(root.operands[0])
    root.erase()


def _mma_derived(layout) -> bool:
    while isinstance(layout, Slice):
        layout = layout.parent
    return isinstance(layout, NvidiaMma) or hasattr(layout, "op_idx")


def fold_conversions(func, remat: Remat, vectors_only: bool = False) -> int:
    """Conversions that convert nothing are dropped, and those whose operand is cheap to
    recompute (see Remat) are replaced by the recomputation in the result's layout: the ones
    from or to a tensor-core layout (or a slice of one) and, since they sit in the dot loop of a
    tensor-core kernel, those of vectors (a mask row needed along another dimension would
    otherwise cross shared memory with two barriers every iteration; Triton's backward
    rematerialization rebuilds it). `vectors_only` (a kernel without dots): just the conversions
    of vectors (tl.sort's reshaped ranges, one per compare-and-swap; a row of offsets, a mask
    or a small loaded row broadcast into two tiles of different layouts). Returns how many were
    removed."""
    n = 0
    for op in walk(func):
        if op.name != TTG.CONVERT_LAYOUT:
            continue
        src, dst = _layout(op.operands[0]), _layout(op.results[0])
        if src is None or dst is None:
            continue
        vector = _is_vector(op.results[0].type)
        if not (_mma_derived(src) or _mma_derived(dst) or vector) or (vectors_only and not vector):
            continue
        new = op.operands[0] if op.operands[0].type == op.results[0].type else remat.rebuild(op.operands[0], dst)
        if new is None or new == op.results[0]:  # (a conversion Remat made: it is the rebuild)
            continue
        op.results[0].replace_all_uses_with(new)
        op.erase()
        n += 1
    return n


# Copies of each element per thread (over an even spread) past which a stored vector is re-laid.
_REPLICATION_LIMIT = 4


def relayout_replicated_stores(func, remat: Remat, num_warps: int, threads_per_warp: int = 32) -> int:
    """A `tt.store` of a vector whose layout gives every thread many copies of each element is
    re-laid in the default 1-D blocked layout: its pointers, mask and value are rebuilt there
    (see Remat; what is not cheap is converted where it is defined). Attention's row statistics
    M (`m_i + log2(l_i)`, 128 rows) took the slice of the score tile's layout, which puts 64 rows
    in every thread: each thread computed 64 logarithms and issued 64 stores. Triton's Coalesce
    gives every memory op its own coalesced layout and converts the operands to it
    (lib/Dialect/TritonGPU/Transforms/Coalesce.cpp); then 1 per thread. Returns how many stores
    were re-laid."""
    n = 0
    threads = threads_per_warp * num_warps
    for op in walk(func):
        if op.name != TT.STORE or not mu.is_tensor(op.operands[0]) or not _is_vector(op.operands[0].type):
            continue
        shape = tuple(mu.shape_of(op.operands[0].type))
        lay = _layout(op.operands[0])
        if lay is None or _mma_derived(lay):
            continue
        if lay.elems_per_thread(shape) <= _REPLICATION_LIMIT * max(1, prod(shape) // threads):
            continue
        fast = max(range(len(shape)), key=lambda d: (shape[d], d))
        want = default_blocked(shape, num_warps, 1, threads_per_warp,
                               (fast,) + tuple(d for d in reversed(range(len(shape))) if d != fast))
        for i, w in enumerate(op.operands):
            if not mu.is_tensor(w):
                continue
            src = _converted_from(w)
            at_src = remat.rebuild(w, src) if src is not None else None
            if at_src is not None:  # computed where its inputs are, then converted once (Triton's form)
                op.operands[i] = _convert(at_src, with_encoding(w.type, want), _invariant_point(at_src, op), op.location)
            else:
                op.operands[i] = remat.get(w, want)
        n += 1
    return n


def _converted_from(v):
    """The one layout that the conversions feeding `v` through elementwise ops convert from,
    else None (several, none, or an op that is not elementwise on the way)."""
    found = set()

    def visit(w, d):
        """Whether `w` (at depth `d`) is fed only by conversions, constants and splats through elementwise ops;
        records the conversions' source layouts."""
        if isinstance(w, ir.BlockArgument) or d > _REMAT_DEPTH:
            return False
        op = w.owner
        if op.name == TTG.CONVERT_LAYOUT:
            found.add(_layout(op.operands[0]))
            return True
        if op.name in (ARITH.CONSTANT, TT.SPLAT):
            return True
        if not (is_elementwise(op.name) and len(op.results) == 1):
            return False
        return all(not mu.is_tensor(x) or visit(x, d + 1) for x in op.operands)

    if not visit(v, 0) or len(found) != 1:
        return None
    return next(iter(found))  # (None when that layout is not one we parse: then converted as is)


def _candidates(func) -> list:
    out = []
    for op in walk(func):
        if op.name != TTG.CONVERT_LAYOUT:
            continue
        src, dst = _layout(op.operands[0]), _layout(op.results[0])
        if isinstance(src, NvidiaMma) and isinstance(dst, Blocked):
            out.append((op, dst, src))
    return out


def _mma_to_dot_shortcut(func, num_warps: int) -> int:
    """local_load(local_alloc(convert(x: #mma -> #blocked))) into a #dot_op -> one register-only
    convert_layout(x: #mma -> #dot_op); returns how many were rewritten."""
    n = 0
    for load in walk(func):
        if load.name != TTG.LOCAL_LOAD or len(load.operands) != 1:
            continue
        alloc = load.operands[0].owner if isinstance(load.operands[0], ir.OpResult) else None
        if alloc is None or alloc.name != TTG.LOCAL_ALLOC or len(alloc.operands) != 1:
            continue
        if len(list(alloc.results[0].uses)) != 1:
            continue
        conv = alloc.operands[0].owner if isinstance(alloc.operands[0], ir.OpResult) else None
        if conv is None or conv.name != TTG.CONVERT_LAYOUT:
            continue
        x = conv.operands[0]
        src, dst = _layout(x), _layout(load.results[0])
        if not isinstance(src, NvidiaMma) or dst is None or not hasattr(dst, "op_idx"):
            continue
        if same_thread_map(src, dst, tuple(mu.shape_of(x.type)), 32 * num_warps) is None:
            continue
        new = _convert(x, load.results[0].type, ir.InsertionPoint(load), load.location)
        load.results[0].replace_all_uses_with(new)
        load.erase()
        alloc.erase()
        if not list(conv.results[0].uses):
            conv.erase()
        n += 1
    return n


def remove_layout_conversions(module, num_warps: int) -> int:
    """Rewrite every eligible #mma -> #blocked conversion's forward slice of `module` (in place,
    see the module doc), then the mma -> dot_op shortcuts; returns the number of slices
    rewritten plus shortcuts taken."""
    n = 0
    for func in [op for op in module.body.operations if op.operation.name == TT.FUNC]:
        dots = any(op.name in DOT_OPS for op in walk(func))
        # small loads repeated only without dots: in a dot loop the registers they take are the accumulators'
        remat = Remat(func.location, None if dots else 32 * num_warps)
        for conv, dst, src in _candidates(func):
            sl = _Slice(conv, dst, src)
            sl.collect()
            if not (sl.reduces or sl.loops or sl.to_dot or sl.to_mma or sl.shrinks()) or not sl.feasible():
                continue
            _rewrite(sl, remat)
            n += 1
        if dots:
            folded = fold_conversions(func, remat)
            # after the folding, which would push the one conversion of a stored value back
            # onto each of its inputs
            n += relayout_replicated_stores(func, remat, num_warps)
            if n or folded:
                erase_dead(func)
            n += folded
        else:  # vectors only (Triton's backward rematerialization of a mask, offset or small load row)
            folded = fold_conversions(func, remat, vectors_only=True)
            if folded:
                erase_dead(func)
            n += folded
        n += _mma_to_dot_shortcut(func, num_warps)
    return n
