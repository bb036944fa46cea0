"""TTIR cleanup after code generation, in place on a parsed MLIR module: the parts of Triton's make_ttir that change our output.

Splat-constant folding, constant hoisting, dot-add combining, CSE, LICM, DCE.

Upstream MLIR cannot do this for us: the `tt` dialect is unregistered there, and unregistered ops
count as having unknown side effects, so its CSE/DCE would keep every `tt` op. The effect rules
(ttbuild.optraits) are Triton's (TritonOps.td): `tt` ops are Pure except loads (read memory: removable when
unused, never merged or hoisted), stores, atomics, prints/asserts and barriers (kept). Inlining
and `tl.static_range` unrolling already happen during code generation.
"""

from __future__ import annotations

import re

from ttbuild.optraits import NOT_SPECULATABLE, OPEN_REGIONS, defined_in, erase_dead, is_pure, walk

_NAME = re.compile(r"%[\w#]+")


def _removable(op) -> bool:
    """Trivially dead when unused: pure ops, and non-volatile loads (read-only effects)."""
    if op.name == "tt.load":
        return "isVolatile = true" not in _text(op)
    return is_pure(op.name)


def _text(op) -> str:
    """The op without its result names, operand names or location: with the operand values
    themselves it identifies the computation (unregistered ops keep their properties out of
    `op.attributes`, so the printed form is the one faithful view of them)."""
    asm = op.get_asm(print_generic_op_form=True)
    head, sep, rest = asm.partition(" = ")
    return _NAME.sub("%", rest if sep and head.lstrip().startswith("%") else asm)


def run(module) -> None:
    """Clean every `tt.func` of `module` (an `mlir.ir.Module`) in place."""
    from mlir import ir

    with module.context, ir.Location.unknown():
        for func in module.body.operations:
            if func.operation.name != "tt.func":
                continue
            entry = func.operation.regions[0].blocks[0]
            _fold_splat_constants(func.operation, ir)
            _hoist_constants(func.operation, entry)
            _combine_dot_add(func.operation, ir)
            _licm(func.operation)
            _cse(func.operation)
            _dce(func.operation)


def _blocks(op):
    for region in op.regions:
        for block in region.blocks:
            yield block


def _fold_splat_constants(func, ir) -> None:
    """`tt.splat(arith.constant c)` → `arith.constant dense<c>` (Triton's canonical form)."""
    for op in walk(func):
        if op.name != "tt.splat":
            continue
        src = op.operands[0].owner
        if not isinstance(src, ir.Operation) and hasattr(src, "operation"):
            src = src.operation
        if not hasattr(src, "name") or src.name != "arith.constant":
            continue
        ty = op.results[0].type
        dense = ir.DenseElementsAttr.get_splat(ty, src.attributes["value"])
        new = ir.Operation.create("arith.constant", results=[ty], attributes={"value": dense}, loc=op.location)
        ir.InsertionPoint(op).insert(new)
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()


def _hoist_constants(func, entry) -> None:
    """Constants inside scf regions move to the function's entry block (Triton's canonicalizer
    materializes them there), where CSE can merge them; combiner regions keep theirs."""
    first = next(iter(entry.operations), None)
    for op in walk(func):
        if op.name == "arith.constant" and op.parent.name in OPEN_REGIONS - {"tt.func"} and first is not None:
            op.move_before(first)


def _is_zero(value, ir) -> bool:
    """An `arith.constant` splat of 0, +0.0 or -0.0 (Triton's isZero: m_Zero / m_AnyZeroFloat)."""
    owner = value.owner
    if not hasattr(owner, "name") or owner.name != "arith.constant":
        return False
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return False
    v = attr.get_splat_value()
    return (ir.FloatAttr(v).value if isinstance(v, ir.FloatAttr) else ir.IntegerAttr(v).value) == 0


def _combine_dot_add(func, ir) -> None:
    """`d + tt.dot(a, b, 0)` (either order) -> `tt.dot(a, b, d)`, moved to the add, when the dot
    has no other use (Triton's CombineOpsPass, CombineDotAddPattern: `acc += tl.dot(a, b)` then
    accumulates in the dot itself, one fragment live instead of two); not for a float dot with a
    non-zero maxNumImpreciseAcc (fp8 partial accumulation), as Triton. (tl.dot_scaled is a
    tt.dot of upcast operands here, so it combines alike.)"""
    for add in [op for op in walk(func) if op.name in ("arith.addf", "arith.addi")]:
        for k in (1, 0):
            dot = add.operands[k].owner
            if not hasattr(dot, "name") or dot.name != "tt.dot":
                continue
            if len(list(add.operands[k].uses)) != 1 or not _is_zero(dot.operands[2], ir):
                continue
            if add.name == "arith.addf" and "maxNumImpreciseAcc = 0 : i32" not in _text(dot):
                continue
            other = add.operands[1 - k]
            if other.type != dot.results[0].type:
                continue
            dot.operands[2] = other
            dot.move_before(add)
            add.results[0].replace_all_uses_with(dot.results[0])
            add.erase()
            break


def _licm(func) -> None:
    """Pure, speculatable ops in an scf.for body whose operands all come from outside the loop
    move in front of it (MLIR's loop-invariant-code-motion, as Triton runs it)."""
    for loop in [op for op in walk(func) if op.name == "scf.for"][::-1]:
        moved = True
        while moved:
            moved = False
            for op in list(loop.regions[0].blocks[0].operations):
                op = op.operation
                if (not is_pure(op.name) or op.name in NOT_SPECULATABLE or len(op.regions)
                        or any(defined_in(v, loop) for v in op.operands)):
                    continue
                op.move_before(loop)
                moved = True


def _cse(func) -> None:
    """Merge identical pure ops (same op text and operands) where the first dominates the
    second: same block earlier, or an enclosing block of an open region."""
    def visit(block, scope: dict) -> None:
        local = dict(scope)
        for op in list(block.operations):
            op = op.operation
            if op.regions:
                for inner in _blocks(op):
                    visit(inner, local if op.name in OPEN_REGIONS else {})
            if not is_pure(op.name) or op.regions or not len(op.results):
                continue
            key = (_text(op), tuple(op.operands))
            prev = local.get(key)
            if prev is None:
                local[key] = op
                continue
            for old, new in zip(op.results, prev.results):
                old.replace_all_uses_with(new)
            op.erase()

    for block in _blocks(func):
        visit(block, {})


def _dce(func) -> None:
    """Erase removable ops whose results are unused, innermost and last first, to a fixpoint."""
    erase_dead(func, _removable)
