"""Op classes by name (pure, not speculatable, open regions, terminators, scalar combiner regions) and the one IR walker, shared by the frontend's TTIR cleanup and every backend pass.

The effect classes are Triton's (include/triton/Dialect/Triton/IR/TritonOps.td, TritonGPUOps.td):
`tt` ops marked `Pure` have no memory effects; arith/math ops are NoMemoryEffect upstream. Loads
(read memory), stores, atomics, prints/asserts, barriers and the async-copy ops are not pure.
One list, in the style of tinygrad's `GroupOp`: a pass asks `is_pure(name)` and never keeps its
own copy.
"""

from __future__ import annotations

from mlir import ir

# Pure `tt`/`ttg` ops (TritonOps.td / TritonGPUOps.td `Pure`).
PURE = frozenset({
    "tt.splat", "tt.broadcast", "tt.expand_dims", "tt.make_range", "tt.addptr", "tt.get_program_id",
    "tt.get_num_programs", "tt.reshape", "tt.trans", "tt.mulhiui", "tt.bitcast", "tt.int_to_ptr",
    "tt.ptr_to_int", "tt.fp_to_fp", "tt.join", "tt.split", "tt.cat", "tt.clampf", "tt.precise_divf",
    "tt.precise_sqrt", "tt.dot", "tt.reduce", "tt.scan", "tt.histogram", "tt.make_tensor_ptr", "tt.advance",
    "ttg.convert_layout",
    "tt.extern_elementwise",  # pure only with pure = true: the only form the frontend emits
})
# Dialects whose every op is pure (MLIR arith and math: NoMemoryEffect).
PURE_DIALECTS = ("arith.", "math.")
# Pure but not speculatable (integer division traps on zero; combiners run user code): never
# hoisted out of a loop.
NOT_SPECULATABLE = frozenset({"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi",
                              "arith.ceildivui", "arith.floordivsi", "tt.reduce", "tt.scan"})
# Ops whose regions see the values of enclosing regions (not IsolatedFromAbove combiner bodies).
OPEN_REGIONS = frozenset({"scf.for", "scf.if", "scf.while", "tt.func"})
# Ops whose regions hold scalar code (combiners), not tensors.
SCALAR_REGIONS = frozenset({"tt.reduce", "tt.scan"})
# Ops that end a region by handing values to the op that holds it (tt.return ends a function).
TERMINATORS = frozenset({"scf.yield", "tt.reduce.return", "tt.scan.return", "scf.condition"})
# Matrix products: `tt.dot` (mma.sync / FMA) and the `ttng.warp_group_dot` (wgmma) that
# accelerate_matmul turns it into on sm_90.
DOT_OPS = frozenset({"tt.dot", "ttng.warp_group_dot"})
# `tt` ops with Triton's Elementwise trait: each result element depends only on the operands'
# elements at the same index, so the op runs in any layout (arith/math ops are elementwise too).
ELEMENTWISE_TT = frozenset({"tt.fp_to_fp", "tt.bitcast", "tt.precise_divf", "tt.precise_sqrt", "tt.clampf",
                            "tt.mulhiui", "tt.addptr", "tt.int_to_ptr", "tt.ptr_to_int", "tt.extern_elementwise",
                            "tt.elementwise_inline_asm"})


def is_elementwise(name: str) -> bool:
    """Whether the op named `name` maps operand elements to result elements index by index
    (arith and math ops but arith.constant, and ELEMENTWISE_TT)."""
    return (name.startswith(PURE_DIALECTS) and name != "arith.constant") or name in ELEMENTWISE_TT


def is_pure(name: str) -> bool:
    """Whether the op named `name` has no memory effects (removable when unused, mergeable)."""
    return name.startswith(PURE_DIALECTS) or name in PURE


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
