"""Op classes by name (pure, not speculatable, open regions, terminators, scalar combiner regions) and the one IR walker, shared by the frontend's TTIR cleanup and every backend pass.

The effect classes are Triton's (include/triton/Dialect/Triton/IR/TritonOps.td, TritonGPUOps.td):
`tt` ops marked `Pure` have no memory effects; arith/math ops are NoMemoryEffect upstream. Loads
(read memory), stores, atomics, prints/asserts, barriers and the async-copy ops are not pure.
One list, in the style of tinygrad's `GroupOp`: a pass asks `is_pure(name)` and never keeps its
own copy.
"""

from __future__ import annotations

from mlir import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import ARITH, SCF, TT, TTG, TTNG

# Pure `tt`/`ttg` ops (TritonOps.td / TritonGPUOps.td `Pure`).
PURE = frozenset({
    TT.SPLAT, TT.BROADCAST, TT.EXPAND_DIMS, TT.MAKE_RANGE, TT.ADDPTR, TT.GET_PROGRAM_ID,
    TT.GET_NUM_PROGRAMS, TT.RESHAPE, TT.TRANS, TT.MULHIUI, TT.BITCAST, TT.INT_TO_PTR,
    TT.PTR_TO_INT, TT.FP_TO_FP, TT.JOIN, TT.SPLIT, TT.CAT, TT.CLAMPF, TT.PRECISE_DIVF,
    TT.PRECISE_SQRT, TT.DOT, TT.REDUCE, TT.SCAN, TT.HISTOGRAM, TT.MAKE_TENSOR_PTR, TT.ADVANCE,
    TTG.CONVERT_LAYOUT,
    TT.EXTERN_ELEMENTWISE,  # pure only with pure = true: the only form the frontend emits
})
# Dialects whose every op is pure (MLIR arith and math: NoMemoryEffect).
PURE_DIALECTS = ("arith.", "math.")
# Pure but not speculatable (integer division traps on zero; combiners run user code): never
# hoisted out of a loop.
NOT_SPECULATABLE = frozenset({ARITH.DIVSI, ARITH.DIVUI, ARITH.REMSI, ARITH.REMUI, ARITH.CEILDIVSI,
                              ARITH.CEILDIVUI, ARITH.FLOORDIVSI, TT.REDUCE, TT.SCAN})
# Ops whose regions see the values of enclosing regions (not IsolatedFromAbove combiner bodies).
OPEN_REGIONS = frozenset({SCF.FOR, SCF.IF, SCF.WHILE, TT.FUNC, TTG.WARP_SPECIALIZE})
# Ops whose regions hold scalar code (combiners), not tensors.
SCALAR_REGIONS = frozenset({TT.REDUCE, TT.SCAN})
# Ops that end a region by handing values to the op that holds it (tt.return ends a function).
TERMINATORS = frozenset({SCF.YIELD, TT.REDUCE_RETURN, TT.SCAN_RETURN, SCF.CONDITION, TTG.WARP_YIELD, TTG.WARP_RETURN})
# Matrix products: `tt.dot` (mma.sync / FMA) and the `ttng.warp_group_dot` (wgmma) that
# accelerate_matmul turns it into on sm_90.
DOT_OPS = frozenset({TT.DOT, TTNG.WARP_GROUP_DOT})
# `tt` ops with Triton's Elementwise trait: each result element depends only on the operands'
# elements at the same index, so the op runs in any layout (arith/math ops are elementwise too).
ELEMENTWISE_TT = frozenset({TT.FP_TO_FP, TT.BITCAST, TT.PRECISE_DIVF, TT.PRECISE_SQRT, TT.CLAMPF,
                            TT.MULHIUI, TT.ADDPTR, TT.INT_TO_PTR, TT.PTR_TO_INT, TT.EXTERN_ELEMENTWISE,
                            TT.ELEMENTWISE_INLINE_ASM})


def is_elementwise(name: str) -> bool:
    """Whether the op named `name` maps operand elements to result elements index by index
    (arith and math ops but arith.constant, and ELEMENTWISE_TT)."""
    return (name.startswith(PURE_DIALECTS) and name != ARITH.CONSTANT) or name in ELEMENTWISE_TT


def is_pure(name: str) -> bool:
    """Whether the op named `name` has no memory effects (removable when unused, mergeable)."""
    return name.startswith(PURE_DIALECTS) or name in PURE


def is_volatile(op) -> bool:
    """Whether a tt.load (or store) carries `isVolatile = true` (`tl.load(..., volatile=True)`): it is then
    read as written, never repeated, merged or moved (Triton's `ld.volatile`)."""
    v = mu.props(op).get("isVolatile")
    return v is not None and ir.BoolAttr(v).value


def ancestor_in(op, ops):
    """`op` or its closest enclosing op that is in `ops` (a set or dict of a block's operations:
    the block-level op a nested use belongs to); None when none is."""
    op = op.operation
    while op is not None and op not in ops:
        op = op.parent
        op = op.operation if op is not None else None
    return op


def defined_in(value, op) -> bool:
    """Whether `value` is defined inside `op`: by an op nested in it, or as a block argument of
    one of its regions (a loop's induction variable or iter_arg)."""
    owner = value.owner.owner if isinstance(value, mu.ir.BlockArgument) else value.owner
    return owner is not None and ancestor_in(owner, {op.operation}) is not None


def walk(op, *, post_order: bool = False, skip_regions_of=frozenset()) -> list[ir.Operation]:
    """Every op nested in `op` (an Operation or OpView; `op` itself excluded), in program order:
    parents before their children (pre-order), or children first (post-order). The regions of
    ops named in `skip_regions_of` are not entered (the op itself is listed). Returns a list, so
    callers may erase or move ops while going through it. Uses the bindings' Operation.walk."""
    if post_order and skip_regions_of:
        raise ValueError("skip_regions_of needs pre-order: post-order has entered the regions already")
    root = op.operation
    out: list = []

    def visit(o):
        if o == root:
            return ir.WalkResult.ADVANCE
        out.append(o)
        return ir.WalkResult.SKIP if o.name in skip_regions_of else ir.WalkResult.ADVANCE

    root.walk(visit, walk_order=ir.WalkOrder.POST_ORDER if post_order else ir.WalkOrder.PRE_ORDER)
    return out


def erase_dead(func, removable=lambda op: is_pure(op.name)) -> int:
    """Erase the ops of `func` for which `removable(op)` holds (default: pure ops) and whose
    results are all unused, innermost and last first, to a fixpoint; returns how many."""
    n, changed = 0, True
    while changed:
        changed = False
        for op in reversed(walk(func)):
            if removable(op) and all(not list(r.uses) for r in op.results):
                op.erase()
                n += 1
                changed = True
    return n
