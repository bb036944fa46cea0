"""FMA-dot operands loaded at the dot: which `ttg.convert_layout`s into `#ttg.dot_op<{parent = #blocked}>` only store their tile to shared memory, and where in the scratch each tile lies.

An FMA `tt.dot` (ttbuild.backend.llir.fma) reads, per thread, whole K rows of A and K columns of
B: with 4x4 outputs a thread over a 64x64x64 tile, 1280 operand values. Converted the ordinary
way (every thread loads all its new elements at the conversion) they are all live before the
first FMA, and ptxas spills most of them (issue 30: 4.3 KB of stack on a 64x64 fp32 dot, 2 warps).
When both operands come from such conversions just before the dot, the conversions store their
tiles side by side (A at scratch offset 0, B right after it) and the dot loads each K step's
elements as it multiplies them (ttbuild.backend.llir.fma), so only the accumulators and one K
step of operands are live. The ttgir stage's allocation sizes the scratch for both tiles
(`staged_bytes`) and the llir stage places them (`staged_base`); both ask `staged_pair`.
"""

from __future__ import annotations

from math import prod

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.encodings import FmaOperand, parse_encoding
from ttbuild.backend.ir.ops import TT, TTG
from ttbuild.backend.ir.optraits import walk

# The two tiles share the scratch with nothing else while the dot runs; above this many bytes
# the ordinary conversions (one tile at a time) are kept, so no kernel needs more shared
# memory than 64 KiB for them (the smallest per-block limit of the targets we build for).
STAGE_LIMIT = 64 * 1024
# Module attribute: no staging in this module (set by `turn_off` when the kernel would need more
# shared memory than its target has with it, and the ordinary conversions fit).
OFF = "ttbuild.fma_staging_off"


def _off(op) -> bool:
    """Whether the module holding `op` has OFF."""
    o = op.operation
    while o is not None and o.name != "builtin.module":
        o = o.parent.operation if o.parent is not None else None
    return o is not None and OFF in o.attributes


def turn_off(module) -> bool:
    """Set OFF on `module` when any of its dots stages its operands; whether it did (then the
    caller allocates again)."""
    dots = [op for func in module.body.operations for op in walk(func) if op.name == TT.DOT]
    if not any(staged_pair(d) is not None for d in dots):
        return False
    module.operation.attributes[OFF] = mu.ir.BoolAttr.get(True)  # valued: irattrs reads `name = value`
    return True


def tile_bytes(v) -> int:
    """Scratch bytes of a converted tile: one 32-bit word per element (8 bytes for fp64), as
    the ordinary conversion lays it out (allocation.convert_bytes without packed rows)."""
    return prod(mu.shape_of(v.type)) * max(4, mu.elem_bits(mu.elem_str(v.type)) // 8)


def _operand_convert(v, dot):
    """The convert_layout that makes dot operand `v`, when it converts into an FMA operand layout,
    only the dot uses it and it is in the dot's block; else None."""
    if not isinstance(v, mu.ir.OpResult):
        return None
    op = v.owner
    if op.name != TTG.CONVERT_LAYOUT or len(list(v.uses)) != 1:
        return None
    if op.operation.block != dot.operation.block:
        return None
    enc = mu.encoding_str(v.type)
    if not enc or not isinstance(parse_encoding(enc), FmaOperand):
        return None
    return op


def staged_pair(dot):
    """(A's convert_layout, B's convert_layout) of FMA `dot` when both operands are such
    conversions (_operand_convert), nothing but arith ops runs between the first of them and the
    dot (so no other shared-memory user overwrites the tiles), and the tiles fit STAGE_LIMIT
    together; else None."""
    if dot.name != TT.DOT or _off(dot):
        return None
    convs = [_operand_convert(dot.operands[i], dot) for i in (0, 1)]
    if any(c is None for c in convs) or tile_bytes(convs[0].results[0]) + tile_bytes(convs[1].results[0]) > STAGE_LIMIT:
        return None
    pending = {c.operation for c in convs}
    target = dot.operation
    for o in dot.operation.block.operations:
        o = o.operation
        if o == target:
            return tuple(convs) if not pending else None
        if o in pending:
            pending.discard(o)
        elif len(pending) < 2 and not o.name.startswith("arith."):
            return None
    return None


def _pair_of(convert):
    """(index of `convert` among its dot's staged operands, the pair), or None."""
    uses = list(convert.results[0].uses)
    if len(uses) != 1:
        return None
    pair = staged_pair(uses[0].owner)
    if pair is None:
        return None
    for i, c in enumerate(pair):
        if c.operation == convert.operation:
            return i, pair
    return None


def staged_base(convert) -> int | None:
    """The scratch byte offset of `convert`'s tile when its dot loads it (0 for A, A's tile bytes
    for B), or None for an ordinary conversion."""
    got = _pair_of(convert)
    if got is None:
        return None
    i, pair = got
    return 0 if i == 0 else tile_bytes(pair[0].results[0])


def staged_bytes(convert) -> int | None:
    """Scratch bytes `convert` needs when its dot loads the tile (its base plus its tile: the
    other operand's tile stays in place below it), or None for an ordinary conversion."""
    base = staged_base(convert)
    return None if base is None else base + tile_bytes(convert.results[0])
