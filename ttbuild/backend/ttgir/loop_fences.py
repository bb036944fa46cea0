"""TTGIR pass (last): in a kernel of several accumulation phases, what the code after a top-level loop needs is computed there, not kept across it (tiles made again, scalars copied).

Why: attention backward runs its dK/dV loops (at d128 on 4 warps once per block of 64 keys,
split_rows) and then its dQ loop, each with 128 fp32 accumulator registers per thread or more:
the registers are full inside every loop, and whatever is live across a loop without being used
in it is spilled around it. split_rows already makes each block's tiles again before its own
loop, but LLVM's CSE / GVN, and ptxas's after them, merge those values (pointer tiles, masks, row
offsets, the pipeline prologue's addresses) with the identical ones computed before an earlier
loop and keep them live across it: ptxas 13 spilled 184 / 696 bytes (d128, plain / causal)
around the loops. On 8 warps (not split) the keys' row offsets and masks were kept from the k, v
loads to the dK, dV stores: 32 bytes.

Which kernels: two or more top-level `scf.for` loops that each start their own accumulators
(iter_args in an `nvidia_mma` layout whose initial value is not an earlier loop's result), one
of them at least HEAVY_REGS fp32 registers per thread. A forward attention or GEMM accumulates in
one phase and is left as it is.

What it does there:
- a cheap tensor op (elementwise, splat, make_range, broadcast, expand_dims, addptr, a splat
  constant; never a layout conversion or a load) computed before a top-level loop and read after
  it is made again right before its first reader after the loop (moved there when nothing before
  the loop reads it); layouts are assigned already, so the copy keeps its own;
- a scalar (i32, i64, pointer; not a constant nor a kernel argument, which ptxas reads from the
  constant bank) computed before a top-level loop and read after it is read there through a copy
  made right before its first reader after the loop, and a pointer that offsets a kernel argument
  is offset again from a copy of its offset (only the offset, shared by the head's pointers, lives
  across the loop). An i32 constant splat into a tile that only top-level ops outside loops read
  (a pipeline prologue's rows and masks: at d64 the dQ loop's prologue rows `0 + arange(32)` are
  the dK/dV loop's) is copied as well. The copy is a `tt.elementwise_inline_asm`, not pure, whose PTX is
  `lop3.b32 d, a, 0, 0, 0xf0` (d = a) on each 32-bit half: neither LLVM (an asm with a side
  effect) nor ptxas 13 proves it equal to its operand, so what the code after the loop computes
  from it is computed there. ptxas 13 sees through a `mov`, a `shfl.sync` of a warp-uniform value
  or of the thread's own lane, and `bfe` / `shf` identities (measured: the same spills as with no
  copy). The copy carries the original's divisibility (`tt.divisibility`, which the axis analysis
  reads as Triton's does), so loads and stores after the loop keep their vector width. Each later
  loop does the same, on the copies too.
Results are unchanged: the same values, computed again.
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import MAX_DIV, AxisAnalysis
from ttbuild.backend.ir.builders import create
from ttbuild.backend.ir.ops import ARITH, ATTR, SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import ancestor_in, is_elementwise, is_pure, walk

ir = mu.ir

# fp32 accumulator registers per thread (half of the 255 a thread can address) from which a
# phase fills the registers: attention backward's dK + dV at d64 on 4 warps, or at d128 on 4
# warps (per block of 64 keys) and on 8 warps, and its dQ; a forward attention or GEMM loop
# accumulates in one phase.
HEAVY_REGS = 128
# The identity each 32-bit half of a scalar goes through (d = a; see the module docstring).
IDENTITY = "lop3.b32 {d}, {a}, 0, 0, 0xf0;"
_ASM = {32: (IDENTITY.format(d="$0", a="$1"), "=r,r"),
        64: ("{ .reg .b32 lo, hi; mov.b64 {lo, hi}, $1; " + IDENTITY.format(d="lo", a="lo") + " "
             + IDENTITY.format(d="hi", a="hi") + " mov.b64 $0, {lo, hi}; }", "=l,l")}
ASM_STRINGS = frozenset(a for a, _ in _ASM.values())
_CHEAP = frozenset({TT.SPLAT, TT.MAKE_RANGE, TT.BROADCAST, TT.EXPAND_DIMS, TT.ADDPTR})
_SEED_USES = 256  # uses followed from a splat of a constant before giving up (a tile's index math is a few dozen)


def fence_loops(module, num_warps: int) -> int:
    """Apply the pass to every kernel of `module` with two or more heavy accumulation phases
    (module docstring); returns how many ops it made."""
    made = 0
    for func in module.body.operations:
        if func.operation.name == TT.FUNC and len(func.regions[0].blocks) and phases(func, num_warps) >= 2:
            made += sink_past_loops(func.regions[0].blocks[0], cheap)
            made += fence_scalars(func)
    return made


def phases(func, num_warps: int) -> int:
    """How many top-level loops of `func` start their own accumulators (module docstring), when
    one of them carries at least HEAVY_REGS fp32 registers per thread of them; else 0."""
    count, heavy = 0, False
    for loop in func.regions[0].blocks[0].operations:
        if loop.operation.name != SCF.FOR:
            continue
        accs = [x for x in list(loop.operands)[3:] if _mma_tile(x)]
        if not accs or not any(_fresh(x) for x in accs):
            continue
        count += 1
        bits = sum(mu.nbytes(x.type) * 8 for x in accs)
        heavy |= bits // 32 // (32 * num_warps) >= HEAVY_REGS
    return count if heavy else 0


def _mma_tile(v) -> bool:
    enc = mu.encoding_str(v.type) if mu.is_tensor(v) else None
    return enc is not None and enc.startswith("#ttg.nvidia_mma") and len(mu.shape_of(v.type)) == 2


def _fresh(v) -> bool:
    """Whether the accumulator's initial value `v` does not come from an earlier loop."""
    while isinstance(v, ir.OpResult) and v.owner.name in (TTNG.WARP_GROUP_DOT_WAIT, TTG.CONVERT_LAYOUT):
        v = v.owner.operands[v.result_number]
    return not (isinstance(v, ir.OpResult) and v.owner.name == SCF.FOR)


def cheap(op) -> bool:
    """A tensor op worth computing again past a loop: elementwise (but a conversion of layout),
    a splat constant, a range, a splat, broadcast, expand_dims or pointer offset."""
    name = op.name
    if name == ARITH.CONSTANT:
        attr = op.attributes["value"]
        return isinstance(attr, ir.DenseElementsAttr) and attr.is_splat
    return name in _CHEAP or (is_elementwise(name) and name != TT.ELEMENTWISE_INLINE_ASM)


def sink_past_loops(block, keep=lambda op: True) -> int:
    """Pure regionless tensor ops of `block` (those `keep` accepts) are made again right before
    their first user past a loop (moved there when nothing before the loop reads them), so that
    they are not live across the loop; returns how many ops were moved or made."""
    done = 0
    changed = True
    while changed:
        changed = False
        for op in reversed([o.operation for o in block.operations]):
            if len(op.regions) or not is_pure(op.name) or not any(mu.is_tensor(r) for r in op.results) or not keep(op):
                continue
            if _remat_past_loop(block, op):
                changed = True
                done += 1
    return done


def _remat_past_loop(block, op) -> bool:
    here = [o.operation for o in block.operations]
    pos = {o: k for k, o in enumerate(here)}
    loop = next((o for o in here[pos[op] + 1:] if o.name == SCF.FOR), None)
    if loop is None:
        return False
    late = [(u.owner, u.operand_number, i) for i, r in enumerate(op.results) for u in r.uses
            if pos[ancestor_in(u.owner, pos)] > pos[loop]]
    if not late:
        return False
    first = min((ancestor_in(o, pos) for o, _, _ in late), key=pos.__getitem__)
    if len(late) == sum(1 for r in op.results for _ in r.uses):
        op.move_before(first)
        return True
    c = op.clone(ir.InsertionPoint(first))
    for owner, k, i in late:
        owner.operands[k] = c.results[i]
    return True


def fence_scalars(func) -> int:
    """Read every scalar that lives across a top-level loop of `func` through an opaque copy
    after it (module docstring); returns how many copies were made."""
    block = func.regions[0].blocks[0]
    axis = AxisAnalysis(func)
    div: dict = {}
    made = at = 0
    while True:
        here = [op.operation for op in block.operations]
        at = next((k for k in range(at, len(here)) if here[k].name == SCF.FOR), None)
        if at is None:
            return made
        before = set(here[:at])
        late: dict = {}
        for k in range(at + 1, len(here)):
            for inner in [here[k], *walk(here[k])]:
                for i, x in enumerate(inner.operands):
                    if _scalar_from(x, before) or _index_seed(inner, x, before):
                        late.setdefault(x, []).append((inner, i, k))
        copies: dict = {}
        for x, uses in sorted(late.items(), key=lambda item: min(k for _, _, k in item[1])):
            first = here[min(k for _, _, k in uses)]
            with ir.InsertionPoint(first):
                c = _copy(x, before, copies, first.location, lambda v: div.get(v) or axis.info(v).divisibility[0])
            for inner, i, _ in uses:
                inner.operands[i] = c
        for x, c in copies.items():
            div.setdefault(c, div.get(x) or axis.info(x).divisibility[0])
        made += len(copies)
        at = next(k for k, op in enumerate(block.operations) if op.operation == here[at]) + 1


def _index_seed(inner, x, before) -> bool:
    """Whether `x` is an i32 constant of `before` that `inner`, a top-level tt.splat after the
    loop, turns into a tile whose values reach only top-level ops outside loops (index and mask
    arithmetic of a pipeline prologue or of stores): the same tiles as before the loop, which LLVM
    and ptxas would otherwise keep live across it. A splat that feeds a loop keeps the constant,
    so that the loop's code still sees it."""
    if inner.name != TT.SPLAT or inner.parent.name != TT.FUNC or not isinstance(x, ir.OpResult):
        return False
    if x.owner.name != ARITH.CONSTANT or x.owner.operation not in before or mu.elem_str(x.type) != "i32":
        return False
    todo, seen = [inner.results[0]], 0
    while todo:
        for u in todo.pop().uses:
            o = u.owner.operation
            seen += 1
            if o.parent.name != TT.FUNC or o.name == SCF.FOR or seen > _SEED_USES:
                return False
            if is_pure(o.name):
                todo.extend(o.results)
    return True


def _scalar_from(x, before) -> bool:
    """Whether `x` is an i32, i64 or pointer scalar computed by a top-level op in `before` (not a
    constant)."""
    if not isinstance(x, ir.OpResult) or mu.is_tensor(x):
        return False
    owner = x.owner.operation
    if owner not in before or owner.name == ARITH.CONSTANT:
        return False
    t = mu.elem_str(x.type)
    return t in ("i32", "i64") or mu.pointee(t) is not None


def _copy(x, before, copies, loc, div_of):
    """The opaque copy of `x` at the insertion point; a pointer that offsets a kernel argument is
    offset again from an opaque copy of its offset (what must live across the loop is then the
    offset, shared by all such pointers, not each pointer). copies maps originals to copies."""
    if x in copies:
        return copies[x]
    op = x.owner
    if op.name == TT.ADDPTR and isinstance(op.operands[0], ir.BlockArgument) and _scalar_from(op.operands[1], before):
        off = _copy(op.operands[1], before, copies, loc, div_of)
        c = op.clone()
        c.operands[1] = off
        copies[x] = c.results[0]
    else:
        copies[x] = opaque_copy(x, loc, div_of(x))
    return copies[x]


def opaque_copy(x, loc, div: int):
    """A copy of scalar `x` (i32, i64 or a pointer) at the insertion point that neither LLVM nor
    ptxas can prove equal to it, with the divisibility `div` as a hint."""
    t = mu.elem_str(x.type)
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    ptr = mu.pointee(t) is not None
    v = create(TT.PTR_TO_INT, [i64], [x], loc=loc).results[0] if ptr else x
    asm, constraints = _ASM[32 if t == "i32" else 64]
    props = {"asm_string": ir.StringAttr.get(asm), "constraints": ir.StringAttr.get(constraints),
             "packed_element": ir.IntegerAttr.get(i32, 1), "pure": ir.BoolAttr.get(False)}
    c = create(TT.ELEMENTWISE_INLINE_ASM, [v.type], [v], props, loc).results[0]
    if ptr:
        c = create(TT.INT_TO_PTR, [x.type], [c], loc=loc).results[0]
    c.owner.attributes[ATTR.DIVISIBILITY] = ir.IntegerAttr.get(i32, min(max(div, 1), MAX_DIV))
    return c
