"""Layout assignment for the ttgir stage: every tensor value gets a `#ttg.blocked` or `#ttg.slice`
encoding, memory ops get coalesced 16-byte-per-thread layouts, and `ttg.convert_layout` is
inserted only where two demands on one value disagree.

Triton's intent (lib/Dialect/TritonGPU/Transforms/Coalesce.cpp, RemoveLayoutConversions.cpp):
values tied by elementwise ops, broadcasts and loop-carried edges must share one layout, so they
form one group (union-find). Groups resolve from the highest rank down:
- a group with memory ops takes the coalesced blocked layout of its pointer: order = dimensions by
  decreasing contiguity, sizePerThread along the fastest = min(16 bytes / element, contiguity,
  alignment, elements / threads) (the widest over its memory ops, and over the loads and stores of
  the same shape and order that its data flow reaches through reductions, splats and scalars:
  Triton's memAccessesSameOrder over multiRootGetSlice);
- otherwise (or when the group is no larger than the CTA's thread count, so coalescing gains
  nothing) a group that a reduction produces, or that feeds a tt.expand_dims, takes
  `#ttg.slice<{dim, parent}>` of the group on the other side;
- otherwise Triton's default blocked layout (1 element per thread).
A conversion is inserted only on a reduce result or expand_dims operand whose group chose
otherwise (so conversions that are not needed never appear).
"""

from __future__ import annotations

from math import prod

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import AxisAnalysis, vector_elems
from ttbuild.backend.analysis.layout import default_blocked, joined, trans_order, transposed, unflatten
from ttbuild.backend.ir.builders import convert_back_after, convert_operand, retype_result
from ttbuild.backend.ir.encodings import Blocked, Slice, parse_encoding
from ttbuild.backend.ir.ops import ARITH, SCF, TT, TTG
from ttbuild.backend.ir.optraits import SCALAR_REGIONS, erase_dead, walk
from ttbuild.backend.ir.types import tensor_in
from ttbuild.backend.ttgir.remove_layout_conversions import Remat
from ttbuild.backend.ttgir.shared_cheap import Loose

MEMORY_OPS = (TT.LOAD, TT.STORE, TT.ATOMIC_RMW, TT.ATOMIC_CAS)
# Ops whose tensor operands and results need no common layout (handled as constraints or free).
NO_UNION = (TT.EXPAND_DIMS, TT.REDUCE, TT.SPLAT, TT.MAKE_RANGE, ARITH.CONSTANT,
            SCF.FOR, SCF.IF, SCF.WHILE, SCF.YIELD, SCF.CONDITION, TT.TRANS,
            TT.RESHAPE, TT.JOIN, TT.SPLIT, TT.CAT, TTG.CONVERT_LAYOUT, TT.HISTOGRAM,
            TT.DOT,  # operands and result get tensor-core layouts (ttbuild.backend.ttgir.accelerate_matmul)
            TT.BROADCAST)  # unioned after the walk, per operand (see _Assigner.collect)


class _UF:
    def __init__(self):
        self.parent: dict = {}

    def find(self, v):
        """The representative of `v`'s set (path halving), `v` itself when new."""
        self.parent.setdefault(v, v)
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def union(self, a, b):
        """Merge the sets of `a` and `b` (values that must share a layout)."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _terminator(region):
    blk = region.blocks[0]
    ops = list(blk.operations)
    return ops[-1] if ops else None


def order_of(ptr_value, axis: AxisAnalysis) -> tuple[int, ...]:
    """Dimensions by decreasing contiguity; among dimensions that tie, first those along which
    the pointer steps by one element where it is not provably contiguous (`unit_dims`: a range
    wrapped `% n`, as a matmul's `cols % N`), then in increasing order, as Triton 3.6's argSort
    (a stable sort of 0..rank-1): a tile with no unit step, as with runtime strides on every
    dimension, gets order [0, 1, ...] like Triton's."""
    info = axis.info(ptr_value)
    rank = len(mu.shape_of(ptr_value.type))
    unit = unit_dims(ptr_value)
    return tuple(sorted(range(rank), key=lambda d: (-info.contiguity[d], d not in unit)))


# Ops whose result steps by one along the dimensions its (first) operand does.
_UNIT_KEEPERS = (ARITH.REMSI, ARITH.REMUI, TT.BROADCAST)


def unit_dims(v, depth: int = 0) -> frozenset:
    """The dimensions along which integer or pointer tensor `v` advances by exactly one element
    per index where it advances at all: a `tt.make_range` reached through adds, `tt.addptr`,
    broadcasts, expand_dims, a remainder (`% n`: wrapped, still unit steps within its runs),
    multiplications by a splat 1, and loop-carried values (their initial value). Empty past 16
    ops or anything else (a runtime stride)."""
    if depth > 16:
        return frozenset()
    if isinstance(v, mu.ir.BlockArgument):
        loop = v.owner.owner
        if loop.name == SCF.FOR and v.arg_number > 0:
            return unit_dims(loop.operands[3 + v.arg_number - 1], depth + 1)
        return frozenset()
    op = v.owner
    name = op.name
    if name == TT.MAKE_RANGE:
        return frozenset({0})
    if name in (ARITH.ADDI, TT.ADDPTR):
        return unit_dims(op.operands[0], depth + 1) | unit_dims(op.operands[1], depth + 1)
    if name in _UNIT_KEEPERS:
        return unit_dims(op.operands[0], depth + 1)
    if name == TT.EXPAND_DIMS:
        ax = mu.int_attr(mu.props(op)["axis"])
        return frozenset(d + (d >= ax) for d in unit_dims(op.operands[0], depth + 1))
    if name == ARITH.MULI:
        for k in (0, 1):
            if _splat_one(op.operands[1 - k]):
                return unit_dims(op.operands[k], depth + 1)
    return frozenset()


def _splat_one(v) -> bool:
    """Whether v is the constant 1 (a scalar or a splat tensor)."""
    if isinstance(v, mu.ir.BlockArgument):
        return False
    op = v.owner
    if op.name == TT.SPLAT:
        return _splat_one(op.operands[0])
    if op.name != ARITH.CONSTANT:
        return False
    attr = op.attributes["value"]
    if isinstance(attr, mu.ir.DenseElementsAttr):
        return attr.is_splat and str(attr.get_splat_value()).split(":")[0].strip() == "1"
    return isinstance(attr, mu.ir.IntegerAttr) and attr.value == 1


class _Assigner:
    def __init__(self, func, num_warps: int, threads_per_warp: int):
        self.func, self.num_warps, self.tpw = func, num_warps, threads_per_warp
        self.axis = AxisAnalysis(func)
        self.uf = _UF()
        self.values: list = []
        self.mem: dict = {}          # root -> [pointer values]
        self.slice = _UF()           # ops and values joined by any data flow (Triton's multiRootGetSlice)
        self.mem_ptrs: list = []     # the pointer operand of every memory op
        self.reduces: list = []      # (op, axis)
        self.expands: list = []      # (op, dim)
        self.transes: list = []      # (op, order)
        self.reshapes: list = []     # tt.reshape ops
        self.broadcasts: dict = {}   # operand value -> its tt.broadcast users
        self.split_bcasts: list = [] # tt.broadcast ops whose operand keeps its own layout
        self.joins: list = []        # tt.join and tt.split ops (layouts fitted last, _fit_join)
        self.loose = Loose()         # cheap operands that do not tie their users (shared_cheap)

    def collect(self):
        """Walk the function: every tensor value joins the union-find, ops that keep layouts (elementwise, loop
        carries) union their operands and results, loads and stores record their pointers per group."""
        _split_constants(self.func)
        body = self.func.regions[0].blocks[0]
        for a in body.arguments:
            if mu.is_tensor(a):
                self.values.append(a)
        for op in walk(self.func, skip_regions_of=SCALAR_REGIONS):  # combiners hold scalars
            self._op(op)
        # Values broadcast to one shape share its layout. A group broadcast to several shapes
        # (attention's key mask row, to the K^T tile and to the score tile; a descriptor tile's
        # row offsets, to the A tile and to the C tile) would tie tiles of different shapes and
        # memory access patterns into one layout: it takes the first result's layout instead,
        # and the other broadcasts convert their operand (a small tensor).
        by_group: dict = {}
        for x, ops in self.broadcasts.items():
            by_group.setdefault(self.uf.find(x), []).extend((x, o) for o in ops)
        for pairs in by_group.values():
            shapes = {tuple(mu.shape_of(o.results[0].type)) for _, o in pairs}
            if len(shapes) == 1:
                for x, o in pairs:
                    self.uf.union(x, o.results[0])
            else:
                self.split_bcasts.extend(o for _, o in pairs)
        demanded = [r for op, _ in self.reduces for r in op.results if mu.is_tensor(r)]
        demanded += [op.operands[0] for op, _ in self.expands] + [op.results[0] for op, _ in self.transes]
        demanded += [op.operands[0] for op in self.split_bcasts]
        demanded += [p for ptrs in self.mem.values() for p in ptrs]
        self.loose.settle(self.uf, {v: i for i, v in enumerate(self.values)}, demanded)

    def _op(self, op):
        name = op.operation.name
        for r in op.results:
            if mu.is_tensor(r):
                self.values.append(r)
                self.uf.find(r)
        for region in op.regions:
            if name in SCALAR_REGIONS:
                break
            for blk in region.blocks:
                for a in blk.arguments:
                    if mu.is_tensor(a):
                        self.values.append(a)
                        self.uf.find(a)
        u = self.uf.union
        tens = [v for v in list(op.operands) + list(op.results) if mu.is_tensor(v)]
        if name == TT.REDUCE:
            ins, outs = list(op.operands), [r for r in op.results if mu.is_tensor(r)]
            for v in ins[1:]:
                u(ins[0], v)
            for v in outs[1:]:
                u(outs[0], v)
            self.reduces.append((op, mu.int_attr(mu.props(op)["axis"])))
        elif name == TT.EXPAND_DIMS:
            self.expands.append((op, mu.int_attr(mu.props(op)["axis"])))
        elif name == TT.TRANS:
            self.transes.append((op, trans_order(op)))
        elif name == TT.RESHAPE:
            self.reshapes.append(op)
        elif name in (TT.JOIN, TT.SPLIT):
            self.joins.append(op)
        elif name == TT.BROADCAST:
            self.broadcasts.setdefault(op.operands[0], []).append(op)
        elif name == SCF.FOR:
            args = op.regions[0].blocks[0].arguments
            y = _terminator(op.regions[0])
            for i, r in enumerate(op.results):
                if mu.is_tensor(r):
                    u(r, op.operands[3 + i])
                    u(r, args[1 + i])
                    u(r, y.operands[i])
        elif name == SCF.IF:
            for region in op.regions:
                if len(region.blocks):
                    y = _terminator(region)
                    for i, r in enumerate(op.results):
                        if mu.is_tensor(r):
                            u(r, y.operands[i])
        elif name == SCF.WHILE:
            before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
            cond, yld = _terminator(op.regions[0]), _terminator(op.regions[1])
            for i, a in enumerate(before.arguments):
                if mu.is_tensor(a):
                    u(a, op.operands[i])
                    u(a, yld.operands[i])
            for i, r in enumerate(op.results):
                if mu.is_tensor(r):
                    u(r, cond.operands[1 + i])
                    u(r, after.arguments[i])
        elif name not in NO_UNION and tens:
            ranks = {len(mu.shape_of(v.type)) for v in tens}
            if len(ranks) == 1:
                tens = self.loose.defer(op, tens)
                for v in tens[1:]:
                    u(tens[0], v)
        self._join_slice(op.operation)
        if name in MEMORY_OPS and mu.is_tensor(op.operands[0]):
            ptr = op.operands[0]
            self.mem_ptrs.append(ptr)
            self.mem.setdefault(self.uf.find(ptr), []).append(ptr)
            if isinstance(ptr, mu.ir.OpResult) and ptr.owner.name == TT.TRANS:
                # pointers transposed for the load (transpose_loads): the tile before the tt.trans is
                # coalesced on its own pointers, so the load reads it transposed (not through ties to others)
                src = ptr.owner.operands[0]
                self.mem.setdefault(self.uf.find(src), []).append(src)

    def _join_slice(self, op) -> None:
        """Join `op` with the operands and results it shares a block with: the parts that remain
        are Triton's multiRootGetSlice (backward and forward slices to a fixed point) kept within
        one block. The kernel's arguments and loop-carried values join nothing (Triton's backward
        slices stop at block arguments), and a loop body stays apart from the code around it,
        where Triton's slices may or may not cross depending on which constants CSE shares: a
        matmul's B tile, loaded in the loop, keeps its own width next to a wider C store."""
        block = op.block
        for v in list(op.operands) + list(op.results):
            if isinstance(v, mu.ir.BlockArgument) or v.owner.operation.block != block:
                continue
            self.slice.union(op, v)

    def _slice_peers(self, ptrs) -> list:
        """The pointers of the memory ops of other groups in the slice of `ptrs`' memory ops."""
        own = {self.slice.find(p) for p in ptrs}
        return [p for p in self.mem_ptrs if p not in ptrs and self.slice.find(p) in own]

    def resolve(self) -> dict:
        """Layout per union-find root: the coalesced blocked layout of a group that touches memory (Triton's
        Coalesce: contiguity and alignment of its pointers), unless it is small and demanded; a demanded group
        (the result of a reduction, the source of an expand_dims, either side of a tt.trans or of a split
        broadcast) follows its partner's layout; the rest take the default blocked one."""
        groups: dict = {}
        for v in self.values:
            groups.setdefault(self.uf.find(v), []).append(v)
        mem = {}
        for root, ptrs in self.mem.items():
            mem.setdefault(self.uf.find(root), []).extend(ptrs)
        demand: dict = {}  # root -> (dim, parent root)
        for op, ax in self.reduces:
            for r in op.results:
                if mu.is_tensor(r):
                    demand.setdefault(self.uf.find(r), (ax, self.uf.find(op.operands[0])))
        for op, d in self.expands:
            demand.setdefault(self.uf.find(op.operands[0]), (d, self.uf.find(op.results[0])))
        forced = set()  # roots that take their demanded layout even though memory is accessed through them
        for op, order in self.transes:
            res, src = self.uf.find(op.results[0]), self.uf.find(op.operands[0])
            if res in mem and mu.pointee(mu.elem_str(op.results[0].type)) is not None and res not in demand:
                # pointers transposed for a load (ttbuild.backend.ttgir.transpose_loads): the load
                # takes the operand's layout transposed, so the tt.trans renames registers (a
                # conversion of the pointers and mask would cross shared memory every iteration)
                forced.add(res)
            demand.setdefault(res, (("trans", order), src))
        for op in self.split_bcasts:
            demand.setdefault(self.uf.find(op.operands[0]), ("same", self.uf.find(op.results[0])))
        layout: dict = {}
        rank_of = lambda root: len(mu.shape_of(root.type))

        def solve(root):
            """The layout of group `root`, solved once (a demanded group solves its partner first)."""
            if root in layout:
                return layout[root]
            vals = groups[root]
            shape = max((tuple(mu.shape_of(v.type)) for v in vals), key=prod)
            small = prod(shape) <= self.tpw * self.num_warps
            if root in mem and not (small and root in demand and not self._stored_carry(vals)) and root not in forced:
                layout[root] = self._coalesced(shape, mem[root], self._carried_slices(root, demand, groups),
                                               self._slice_peers(mem[root]))
            elif root in demand:
                d, parent = demand[root]
                if d == "same":  # a split broadcast's operand: its first result's layout
                    layout[root] = solve(parent)
                elif isinstance(d, tuple):  # tt.trans: the operand's layout, dimensions permuted
                    layout[root] = transposed(solve(parent), d[1]) or default_blocked(
                        shape, self.num_warps, 1, self.tpw)
                else:
                    layout[root] = Slice(d, solve(parent))
            else:
                layout[root] = default_blocked(shape, self.num_warps, 1, self.tpw)
            return layout[root]

        for root in sorted(groups, key=lambda r: -rank_of(r)):
            solve(root)
        return {v: layout[self.uf.find(v)] for v in self.values}

    @staticmethod
    def _stored_carry(vals) -> bool:
        """Whether a group only stores (no load reads through it) and carries a pointer around a loop: its
        pointers, advanced every iteration, would each be registers in every thread that holds a copy of
        the demanded slice, so it keeps its coalesced layout and the stored value converts (Triton's
        Coalesce gives a store its pointer's layout; a reduction's result converts before it)."""
        ptrs = [v for v in vals if mu.pointee(mu.elem_str(v.type)) is not None]
        return any(map(_loop_carried, ptrs)) and not _loads_through(ptrs)

    def _carried_slices(self, root, demand, groups) -> list:
        """(dim, shape) of each slice of group `root` (a reduction's result, an expand_dims
        operand) whose group holds a loop-carried value: those live across the whole loop."""
        out = []
        for child, (d, parent) in demand.items():
            if parent != root or not isinstance(d, int):
                continue
            vals = groups.get(child, ())
            if any(map(_loop_carried, vals)):
                out.append((d, tuple(mu.shape_of(vals[0].type))))
        return out

    def _width(self, ptr, order) -> int:
        """Elements per thread along `order[0]` that pointer tile `ptr` can access at once: its
        vector width, at most its elements per thread and its extent there."""
        pshape = mu.shape_of(ptr.type)
        cap = max(1, prod(pshape) // (self.tpw * self.num_warps))
        return min(vector_elems(ptr, self.axis, order[0]), cap, pshape[order[0]])

    def _coalesced(self, shape, ptrs, carried=(), peers=()) -> Blocked:
        """The coalesced layout of a group with memory ops `ptrs` (see resolve). A rank-2 tile
        whose dimensions tie in contiguity and unit steps (order_of) takes, of the two orders,
        the one that gives its loop-carried slices (`carried`, _carried_slices) fewer elements
        per thread (a sum over the rows of a runtime-stride tile, carried as the accumulator,
        is then spread over the lanes instead of replicated in every thread); Triton's order
        where they cost the same. A group that loads takes the widest access of its `peers`
        (memory ops of other groups in its slice) of its pointers' shape and its order too, as
        Triton's Coalesce gives a load the widest of its memAccessesSameOrder; a group that only
        stores keeps its own (Triton caps a store at its own width)."""
        best, order, tied, key = 1, None, False, None
        for p in ptrs:
            o = order_of(p, self.axis)
            v = self._width(p, o)
            t = _tied(p, self.axis)
            best = max(best, v)
            # the widest access decides; among equals, a pointer whose dimensions do not tie (a
            # broadcast row of scales next to a runtime-stride tile) over one whose order is a
            # tie-break
            if order is None or (v, not t) > key:
                key, order, tied = (v, not t), o, t and len(o) == 2
        if _loads_through(ptrs):
            for p in peers:
                if tuple(mu.shape_of(p.type)) == tuple(mu.shape_of(ptrs[0].type)) and order_of(p, self.axis) == order:
                    best = max(best, self._width(p, order))
        if tied and carried:
            def cost(o):
                lay = default_blocked(shape, self.num_warps, best, self.tpw, o)
                return sum(Slice(d, lay).elems_per_thread(s) for d, s in carried)
            order = min((order, order[::-1]), key=cost)
        return default_blocked(shape, self.num_warps, best, self.tpw, order)


def _loop_carried(value) -> bool:
    """Whether `value` is an scf.for region argument (carried from one iteration to the next)."""
    return isinstance(value, mu.ir.BlockArgument) and value.owner.owner.name == SCF.FOR


def _loads_through(ptrs) -> bool:
    """Whether a tt.load reads through any of the pointer tiles `ptrs`."""
    return any(u.owner.name == TT.LOAD for p in ptrs for u in p.uses)


def _tied(ptr_value, axis: AxisAnalysis) -> bool:
    """Whether a pointer tile's two fastest dimensions (order_of) tie in contiguity and in unit
    steps: its order is a tie-break."""
    if len(mu.shape_of(ptr_value.type)) < 2:
        return False
    info = axis.info(ptr_value)
    unit = unit_dims(ptr_value)
    a, b = order_of(ptr_value, axis)[:2]
    return info.contiguity[a] == info.contiguity[b] and (a in unit) == (b in unit)


def _split_constants(func) -> None:
    """One splat tensor constant per use: a constant shared by unrelated ops (CSE gives attention's
    K^T and V loads one `other = 0.0`) would tie their layout groups together; a splat costs
    nothing to have in several layouts (Triton rematerializes constants the same way)."""
    for op in walk(func, skip_regions_of=SCALAR_REGIONS):
        if op.name != ARITH.CONSTANT or not mu.is_tensor(op.results[0]):
            continue
        attr = op.attributes["value"]
        if not isinstance(attr, mu.ir.DenseElementsAttr) or not attr.is_splat:
            continue
        uses = [(u.owner, u.operand_number) for u in op.results[0].uses]
        for owner, i in uses[1:]:
            clone = op.clone(mu.ir.InsertionPoint.after(op))
            owner.operands[i] = clone.results[0]


def _retype(v, lay):
    t = mu.ir.RankedTensorType(v.type)
    new = mu.ir.RankedTensorType.get(t.shape, t.element_type, mu.ir.Attribute.parse(lay.attr()))
    v.set_type(new)
    owner = getattr(v, "owner", None)
    if isinstance(v, mu.ir.OpResult) and v.owner.name == ARITH.CONSTANT:
        old = owner.attributes["value"]
        if isinstance(old, mu.ir.DenseElementsAttr) and old.is_splat:
            owner.attributes["value"] = mu.ir.DenseElementsAttr.get_splat(new, old.get_splat_value())
        else:
            text = str(old)
            owner.attributes["value"] = mu.ir.Attribute.parse(text[: text.rindex(":")] + ": " + str(new))
    return new


def assign(module, num_warps: int, threads_per_warp: int = 32) -> dict[tuple[int, ...], object]:
    """Give every tensor of every tt.func its encoding, inserting `ttg.convert_layout` where a
    reduce result, expand_dims operand or split broadcast's operand disagrees with its group. Returns shape -> layout of
    the last value of each shape (for tests). Raises nothing on unknown ops."""
    out: dict = {}
    for func in module.body.operations:
        if func.operation.name != TT.FUNC:
            continue
        a = _Assigner(func, num_warps, threads_per_warp)
        a.collect()
        chosen = a.resolve()
        for v, lay in chosen.items():
            _retype(v, lay)
            out[tuple(mu.shape_of(v.type))] = lay
        for op, ax in a.reduces:
            src = chosen.get(op.operands[0])
            for r in op.results:
                if not mu.is_tensor(r):
                    continue
                need = Slice(ax, src)
                have = chosen[r]
                if have == need:
                    continue
                r.set_type(tensor_in(r, need))
                convert_back_after(op, r, tensor_in(r, have))
        for op, order in a.transes:
            r = op.results[0]
            need = transposed(chosen.get(op.operands[0]), order)
            have = chosen[r]
            if need is None or need == have:
                continue
            r.set_type(tensor_in(r, need))
            convert_back_after(op, r, tensor_in(r, have))
        for op in a.reshapes:
            _reshape_through_flat(op, chosen, num_warps, threads_per_warp)
        for op in a.split_bcasts:
            x = op.operands[0]
            need = chosen[op.results[0]]
            if chosen.get(x) == need:
                continue
            convert_operand(op, 0, tensor_in(x, need))
        for op, d in a.expands:
            x = op.operands[0]
            need = Slice(d, chosen[op.results[0]])
            if chosen.get(x) == need:
                continue
            convert_operand(op, 0, tensor_in(x, need))
        for op in a.joins:
            _fit_join(op, num_warps, threads_per_warp)
        a.loose.rebuild(func, chosen.get, Remat(func.location))  # last: it erases the copies it leaves unused
        _fold_chains(func)
    return out


def _fold_chains(func) -> None:
    """A conversion of a conversion's result converts the first one's operand instead (two
    constraints met one after the other above can leave such a chain); conversions left
    converting nothing, or unused, are dropped."""
    for op in walk(func, skip_regions_of=SCALAR_REGIONS):
        if op.name != TTG.CONVERT_LAYOUT:
            continue
        inner = op.operands[0].owner
        if isinstance(op.operands[0], mu.ir.OpResult) and inner.name == TTG.CONVERT_LAYOUT:
            op.operands[0] = inner.operands[0]
        if op.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
    erase_dead(func, removable=lambda o: o.name == TTG.CONVERT_LAYOUT)


def _layout(v):
    return parse_encoding(mu.encoding_str(v.type))


def _convert_operand(op, i: int, lay) -> None:
    convert_operand(op, i, tensor_in(op.operands[i], lay))


def _convert_result(op, r, lay) -> None:
    retype_result(op, r, tensor_in(r, lay))


def _fit_join(op, num_warps: int, threads_per_warp: int) -> None:
    """Give a tt.join (tt.split) the result (operand) layout Triton infers from the other side
    (layout.joined: each thread holds both elements of the size-2 minor dimension), converting
    from/to the chosen layouts where they differ: Triton's verifier rejects any other pair
    (inferDefaultJoinOpEncoding / inferSplitOpEncoding). With it the op is a register renaming."""
    narrow = op.operands if op.name == TT.JOIN else op.results
    wide = op.results[0] if op.name == TT.JOIN else op.operands[0]
    base = _layout(narrow[0])
    if not isinstance(base, Blocked):
        base = default_blocked(tuple(mu.shape_of(narrow[0].type)), num_warps, 1, threads_per_warp)
    need = joined(base)
    if op.name == TT.JOIN:
        for i in range(2):
            if _layout(op.operands[i]) != base:
                _convert_operand(op, i, base)
        if _layout(wide) != need:
            _convert_result(op, wide, need)
    else:
        if _layout(wide) != need:
            _convert_operand(op, 0, need)
        for r in op.results:
            if _layout(r) != base:
                _convert_result(op, r, base)


def _reshape_through_flat(op, chosen, num_warps: int, threads_per_warp: int) -> None:
    """Give a tt.reshape the operand and result layouts Triton infers from each other (both views
    of one 1-D layout, `unflatten`), converting from/to the chosen ones where they differ: Triton's
    verifier rejects any other pair unless allow_reorder is set. The 1-D layout is the one a side
    already is a view of (the result's first, or a 1-D side itself), else Triton's default."""
    src, res = op.operands[0], op.results[0]
    have_src, have_res = chosen.get(src), chosen.get(res)
    src_shape, res_shape = mu.shape_of(src.type), mu.shape_of(res.type)
    flat = None
    for lay, shape in ((have_res, res_shape), (have_src, src_shape)):
        f = _flat_of(lay, shape)
        if f is not None:
            flat = f
            break
    if flat is None:
        flat = default_blocked((prod(src_shape),), num_warps, 1, threads_per_warp)
    need_src, need_res = unflatten(flat, src_shape), unflatten(flat, res_shape)
    if have_src != need_src:
        convert_operand(op, 0, tensor_in(src, need_src))
    if have_res != need_res:
        res.set_type(tensor_in(res, need_res))
        convert_back_after(op, res, tensor_in(res, have_res))


def _flat_of(lay, shape):
    """The 1-D blocked layout `lay` is the `unflatten` of over `shape`, or None."""
    if not isinstance(lay, Blocked):
        return None
    flat = Blocked((prod(lay.size_per_thread),), (prod(lay.threads_per_warp),), (prod(lay.warps_per_cta),), (0,))
    return flat if len(shape) == 1 or unflatten(flat, shape) == lay else None
