"""TTGIR pass (on TTIR, before layouts): a loop whose dot accumulators cannot stay in registers runs once per block of their rows, each block's loop and epilogue complete before the next.

Why: attention backward in tutorial 06's config (4 warps, 128 keys, head dim 128) carries dK and
dV, two 128x128 fp32 accumulators: 256 registers per thread for those alone, over the 255 a
thread can have, so ptxas spills (1.2-2.7 KB, Triton 3.6 as well) and serializes the wgmmas
(C7512). Every row of such an accumulator depends only on the same row of the loop's row-wise
inputs (the keys' k, v and index), so the loop over query blocks can run for keys 0-63 and then
for keys 64-127: the same dots and elementwise ops on each element, in the same order (results
unchanged), half the accumulator registers live at once; the query-side tiles are loaded once
per block of rows.

What is split: a top-level `scf.for` of the kernel whose accumulators (iter_args fed back by the
`tt.dot` that accumulates into them) need more than ACC_REGS (192) fp32 registers per thread, into the
fewest power-of-two row blocks that fit, each of at least 16 rows per warp (one wgmma m64 per
warpgroup). The region moved is every top-level op that reads what the accumulators flow into
(later loops chained on them, their epilogue, their stores); rows reach it only through ops that
keep rows apart: elementwise ops, loads and stores, `tt.dot`'s A operand and accumulator,
`tt.broadcast` / `tt.expand_dims` that keep dim 0, `scf.for` iter_args; leaves (`tt.make_range`,
`tt.splat`, splat constants) are made per block. Anything else touching the rows (a reduction or
transpose over them, a dot contracting them, a side effect between the region's ops) leaves the
loop as it is, and so do stores through a pointer argument that a moved load also reads (a
block's stores run before the next block's loads).
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.builders import create
from ttbuild.backend.ir.ops import ARITH, SCF, TT
from ttbuild.backend.ir.optraits import ancestor_in, erase_dead, is_elementwise, is_pure, is_volatile, walk
from ttbuild.backend.ttgir.loop_fences import sink_past_loops

ir = mu.ir

# fp32 accumulator registers per thread a loop may carry unsplit: three quarters of the 255 a
# thread can address, the rest for addresses, wgmma descriptors and a few tiles. Past it the loop
# spills on either compiler (a 128x256 tile on 4 warps: 256, 1312 bytes and C7511); below it a
# split would only load the other operand twice. Attention backward at d64 (two 128x64 tiles, 4
# warps) and on 8 warps carry 128; at d128 on 4 warps 256.
ACC_REGS = 192
_ROWS_PER_WARP = 16
_MEM = (TT.LOAD, TT.STORE)


class _Refuse(Exception):
    """The loop cannot be split by rows (why, for debugging)."""


def split_rows(module, num_warps: int) -> int:
    """Split every eligible top-level loop of the module's kernel (see the module docstring).
    Returns how many loops were split; raises nothing for loops it leaves alone."""
    done = 0
    for func in module.body.operations:
        if func.operation.name != TT.FUNC:
            continue
        block = func.regions[0].blocks[0]
        tried = set()
        while True:
            loop = next((op for op in block.operations if op.operation.name == SCF.FOR
                         and op.operation not in tried), None)
            if loop is None:
                break
            tried.add(loop.operation)
            parts = _parts(loop.operation, num_warps)
            if parts <= 1:
                continue
            try:
                plan = _Plan(block, loop.operation, parts)
            except _Refuse:
                continue
            plan.apply()
            erase_dead(func, removable=_unused_leaf)
            # Masks, offsets and pointer tiles (the stores' masks of each row block, the later dQ
            # loop's 128x128 mask and offsets in attention backward) are then not live across the
            # split loops, where registers are full.
            sink_past_loops(block)
            done += 1
    return done


def _shape(v) -> tuple:
    return mu.shape_of(v.type)


def _accumulators(loop) -> list[int]:
    """Indices of the iter_args that a tt.dot in the body accumulates into and yields back."""
    body = loop.regions[0].blocks[0]
    yld = list(body.operations)[-1]
    out = []
    for i, y in enumerate(yld.operands):
        if isinstance(y, ir.OpResult) and y.owner.name == TT.DOT and y.owner.operands[2] == body.arguments[1 + i]:
            out.append(i)
    return out


def _parts(loop, num_warps: int) -> int:
    """How many row blocks loop's accumulators need (1: leave it)."""
    accs = _accumulators(loop)
    if not accs:
        return 1
    body = loop.regions[0].blocks[0]
    shapes = [_shape(body.arguments[1 + i]) for i in accs]
    rows = {s[0] for s in shapes}
    if len(rows) != 1 or any(len(s) != 2 for s in shapes):
        return 1
    (r,) = rows
    regs = sum(s[0] * s[1] * mu.elem_bits(mu.elem_str(body.arguments[1 + i].type)) // 32
               for s, i in zip(shapes, accs)) // (32 * num_warps)
    parts = 1
    while regs // parts > ACC_REGS:
        parts *= 2
    if parts > 1 and (r % parts or r // parts < _ROWS_PER_WARP * num_warps):
        return 1
    return parts


def _sliced_type(t, rows: int):
    t = ir.RankedTensorType(t)
    return ir.RankedTensorType.get([rows, *list(t.shape)[1:]], t.element_type, t.encoding)


def _loop_groups(loop):
    """Per iter_arg i of scf.for `loop`: its init, block argument, yielded value and result."""
    body = loop.regions[0].blocks[0]
    yld = list(body.operations)[-1]
    return [(loop.operands[3 + i], body.arguments[1 + i], yld.operands[i], loop.results[i])
            for i in range(len(loop.results))]


class _Plan:
    """The analysis of one loop: values that need a per-block form (S), those that exist only in
    that form (F, what the accumulators flow into), the top-level ops moved (region)."""

    def __init__(self, block, loop, parts):
        self.block, self.parts = block, parts
        self.rows = _shape(loop.results[_accumulators(loop)[0]])[0]
        self.top = [op.operation for op in block.operations]
        self.pos = {op: k for k, op in enumerate(self.top)}
        self.S, self.F = set(), set()
        self.todo = []
        for i in _accumulators(loop):
            init, *rest = _loop_groups(loop)[i]
            self._tag(init)
            for v in rest:
                self._tag(v, dep=True)
        while self.todo:
            v, dep = self.todo.pop()
            self._backward(v)
            if dep:
                self._forward(v)
        self.region = sorted({self._top_of(u.owner) for v in self.F for u in v.uses} | {loop},
                             key=self.pos.__getitem__)
        self._check_region()
        self.full = self._need_full()

    # ---- analysis
    def _tag(self, v, dep=False):
        shape = _shape(v)
        if not shape or shape[0] != self.rows:
            raise _Refuse(f"{v.type} has no rows to split")
        new = v not in self.S or (dep and v not in self.F)
        self.S.add(v)
        if dep:
            self.F.add(v)
        if new:
            self.todo.append((v, dep))

    def _top_of(self, op):
        top = ancestor_in(op, self.pos)
        if top is None:
            raise _Refuse("op outside the kernel's body")
        return top

    def _ties(self, op, v):
        """The values of `op` that must be split with its operand or result `v` (which it splits)."""
        name = op.name
        tensors = [x for x in list(op.operands) + list(op.results) if _shape(x)]
        if is_elementwise(name) or name in _MEM:
            return tensors
        if name == TT.DOT:
            a, b, c = op.operands
            if v == b:
                raise _Refuse("a dot contracts the rows")
            return [a, c, op.results[0]]
        if name == TT.BROADCAST:
            x, r = op.operands[0], op.results[0]
            return [x, r] if _shape(x)[0] == _shape(r)[0] else [r]
        if name == TT.EXPAND_DIMS and mu.int_attr(mu.props(op)["axis"]) > 0:
            return [op.operands[0], op.results[0]]
        if name in (TT.SPLAT, TT.MAKE_RANGE):
            return [op.results[0]]
        if name == ARITH.CONSTANT and isinstance(op.attributes["value"], ir.DenseElementsAttr) \
                and op.attributes["value"].is_splat:
            return [op.results[0]]
        if name == SCF.FOR:
            for g in _loop_groups(op):
                if any(x == v for x in g):
                    return list(g)
        if name == SCF.YIELD and op.parent.name == SCF.FOR:
            for g in _loop_groups(op.parent):
                if g[2] == v:
                    return list(g)
        raise _Refuse(f"{name} touches the rows")

    def _backward(self, v):
        if isinstance(v, ir.BlockArgument):
            owner = v.owner.owner
            if owner.name != SCF.FOR or v.arg_number == 0:
                raise _Refuse("rows from a block argument")
            g = _loop_groups(owner)[v.arg_number - 1]
            for x in g:
                self._tag(x)
            return
        op = v.owner
        if op.name == SCF.FOR:
            for g in _loop_groups(op):
                if g[3] == v:
                    for x in g:
                        self._tag(x)
            return
        for x in self._ties(op, v):
            if x in list(op.operands):
                self._tag(x)

    def _forward(self, v):
        for use in v.uses:
            op = use.owner
            ties = self._ties(op, v)
            carried = op.name in (SCF.FOR, SCF.YIELD)  # ties are (init, arg, yielded, result)
            for x in ties:
                self._tag(x, dep=x != ties[0] if carried else x in list(op.results))

    def _check_region(self):
        rset = set(self.region)
        first, last = self.pos[self.region[0]], self.pos[self.region[-1]]
        for op in self.top[first:last + 1]:
            if op not in rset and not (is_pure(op.name) and not len(op.regions)):
                raise _Refuse(f"{op.name} between the region's ops")
        for op in self.region:
            for r in op.results:
                if r not in self.F and any(self._top_of(u.owner) not in rset for u in r.uses):
                    raise _Refuse("a loop result outside the region")
        for v in self.S - self.F:
            if isinstance(v, ir.OpResult) and self._top_of(v.owner) not in rset and v.owner.operation not in self.pos:
                raise _Refuse("rows from a nested op outside the region")
        self._check_aliasing()
        for op in self.region:
            for inner in [op, *walk(op)]:
                name = inner.name
                if name == TT.STORE and not any(x in self.S for x in inner.operands):
                    raise _Refuse("a store of the region without rows would run once per block")
                if not (is_pure(name) or name in _MEM or name in (SCF.FOR, SCF.YIELD)):
                    raise _Refuse(f"{name} in the region")

    def _check_aliasing(self):
        """A block's stores run before the next block's loads: the stores must go through other
        pointer arguments of the kernel than the loads moved (Triton's pipeliner, which issues
        the next iteration's loads before this one's stores, assumes as much)."""
        loads, stores = set(), set()
        moved = [o for op in self.region for o in [op, *walk(op)]]
        moved += [v.owner.operation for v in self.S - self.F if isinstance(v, ir.OpResult)]
        for op in moved:
            if op.name in _MEM:
                (stores if op.name == TT.STORE else loads).add(_base_arg(op.operands[0]))
        if None in stores or stores & loads:
            raise _Refuse("a store may write what a moved load reads")

    def _tagged_op(self, op) -> bool:
        """Whether `op` is made per block of rows (a result of it, or a store of them)."""
        return any(r in self.S for r in op.results) or (not len(op.results) and any(x in self.S for x in op.operands))

    def _need_full(self) -> set:
        """Values of the region that must also exist whole (an untagged op, a dot's B operand, an
        untagged iter_arg reads them). Raises _Refuse when such a value is carried by rows."""
        inside = {o for op in self.region for o in [op, *walk(op)]}
        todo = []
        for op in inside:
            if op.name == SCF.YIELD:
                todo += [g[2] for g in _loop_groups(op.parent) if g[1] not in self.S]
            elif op.name == SCF.FOR:
                todo += [g[0] for g in _loop_groups(op) if g[1] not in self.S] + list(op.operands)[:3]
            elif op.name == TT.DOT and op.results[0] in self.S:
                todo.append(op.operands[1])
            elif not self._tagged_op(op):
                todo += list(op.operands)
        need = set()
        while todo:
            v = todo.pop()
            if v in need or v not in self.S:
                continue
            need.add(v)
            if isinstance(v, ir.BlockArgument) or v.owner.name == SCF.FOR:
                if isinstance(v, ir.BlockArgument) and v.owner.owner.operation not in inside:
                    continue
                raise _Refuse("a value carried by rows is also read whole")
            if v in self.F:
                raise _Refuse("what the accumulators flow into is read whole")
            if v.owner.operation in inside:
                todo += list(v.owner.operands)
        return need

    # ---- rewrite
    def apply(self):
        anchor = self.top[self.pos[self.region[-1]] + 1]
        owners = {v.owner.operation for v in self.S - self.F if isinstance(v, ir.OpResult)}
        outside = sorted((o for o in owners if o in self.pos and o not in set(self.region)), key=self.pos.__getitem__)
        remat = self._remat()
        n = self.rows // self.parts
        with ir.InsertionPoint(anchor):
            for p in range(self.parts):
                sl, full = {}, {}
                for op in sorted(set(outside) | remat, key=self.pos.__getitem__):
                    if op in remat:
                        _clone_full(op, full)
                    if op in outside:
                        self._clone_sliced(op, p * n, n, sl, full)
                for op in self.region:
                    self._clone(op, p * n, n, sl, full)
        for op in reversed(self.region):
            op.erase()

    def _remat(self) -> set:
        """Top-level pure ops outside the region whose tensors the region reads (pointer tiles,
        masks): made again before each block, so that none is live across another block's loop."""
        rset, out = set(self.region), set()
        todo = [x for op in self.region for inner in [op, *walk(op)] for x in inner.operands]
        while todo:
            x = todo.pop()
            if not (isinstance(x, ir.OpResult) and _shape(x)):
                continue
            op = x.owner.operation
            if op in out or op in rset or op not in self.pos or len(op.regions) or not is_pure(op.name):
                continue
            out.add(op)
            todo.extend(op.operands)
        return out

    def _get(self, x, sliced, sl, full):
        if sliced and x in self.S:
            return sl[x]
        return full.get(x, x)

    def _clone(self, op, start, n, sl, full):
        if op.name == SCF.FOR:
            return self._clone_loop(op, start, n, sl, full)
        if op.name == SCF.YIELD:
            groups = _loop_groups(op.parent)
            ops = [self._get(g[2], g[1] in self.S, sl, full) for g in groups]
            create(SCF.YIELD, [], ops, loc=op.location)
            return None
        tagged = self._tagged_op(op)
        if tagged:
            self._clone_sliced(op, start, n, sl, full)
        if not tagged or any(r in self.full for r in op.results):
            _clone_full(op, full)
        return None

    def _clone_sliced(self, op, start, n, sl, full):
        name = op.name
        if name == TT.MAKE_RANGE:
            p = mu.props(op)
            s0 = mu.int_attr(p["start"]) + start
            i32 = ir.IntegerType.get_signless(32)
            c = create(TT.MAKE_RANGE, [_sliced_type(op.results[0].type, n)], [],
                       {"start": ir.IntegerAttr.get(i32, s0), "end": ir.IntegerAttr.get(i32, s0 + n)}, op.location)
        elif name == ARITH.CONSTANT:
            t = _sliced_type(op.results[0].type, n)
            val = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
            c = create(ARITH.CONSTANT, [t], [], {"value": ir.DenseElementsAttr.get_splat(t, val)}, op.location)
        else:
            c = op.clone()
            for i, x in enumerate(op.operands):
                c.operands[i] = self._get(x, True, sl, full) if (name != TT.DOT or i != 1) else full.get(x, x)
            for r in c.results:
                r.set_type(_sliced_type(r.type, n))
        for r, rc in zip(op.results, c.results):
            sl[r] = rc

    def _clone_loop(self, op, start, n, sl, full):
        groups = _loop_groups(op)
        tag = [g[1] in self.S for g in groups]
        inits = [self._get(g[0], t, sl, full) for g, t in zip(groups, tag)]
        bounds = [full.get(x, x) for x in list(op.operands)[:3]]
        types = [_sliced_type(g[3].type, n) if t else g[3].type for g, t in zip(groups, tag)]
        new = create(SCF.FOR, types, bounds + inits, loc=op.location, regions=1)
        attrs = op.attributes
        for a in [a.name if hasattr(a, "name") else a for a in attrs]:
            new.attributes[a] = attrs[a]
        body = op.regions[0].blocks[0]
        blk = ir.Block.create_at_start(new.regions[0], [body.arguments[0].type] + types,
                                       [a.location for a in body.arguments])
        full[body.arguments[0]] = blk.arguments[0]
        for g, t, a in zip(groups, tag, list(blk.arguments)[1:]):
            (sl if t else full)[g[1]] = a
        with ir.InsertionPoint(blk):
            for inner in body.operations:
                self._clone(inner.operation, start, n, sl, full)
        for g, t, r in zip(groups, tag, new.results):
            (sl if t else full)[g[3]] = r


def _base_arg(ptr, depth: int = 0):
    """The kernel argument a pointer (tensor) is computed from, else None."""
    while depth < 64:
        depth += 1
        if isinstance(ptr, ir.BlockArgument):
            owner = ptr.owner.owner
            if owner.name == TT.FUNC:
                return ptr.arg_number
            if owner.name != SCF.FOR or ptr.arg_number == 0:
                return None
            ptr = owner.operands[3 + ptr.arg_number - 1]
        elif ptr.owner.name in (TT.ADDPTR, TT.SPLAT, TT.BROADCAST, TT.EXPAND_DIMS):
            ptr = ptr.owner.operands[0]
        else:
            return None
    return None


def _clone_full(op, full) -> None:
    """A copy of `op` at the insertion point reading the copies in `full`, which gets its results."""
    c = op.clone()
    for i, x in enumerate(op.operands):
        c.operands[i] = full.get(x, x)
    for r, rc in zip(op.results, c.results):
        full[r] = rc


def _unused_leaf(op) -> bool:
    """What erase_dead may take after a split: a pure op or a non-volatile load (the unsplit
    originals of the leaves), one with results and no regions."""
    return bool(len(op.results)) and not len(op.regions) and (
        is_pure(op.name) or (op.name == TT.LOAD and not is_volatile(op)))
