"""Typed builders: every op a TTGIR pass creates is made here (`create` owns `ir.Operation.create`), at the caller's insertion point unless the builder names its own.

Layout conversions (`ttg.convert_layout`), shared-memory buffers and views (`ttg.local_alloc`,
`ttg.memdesc_index`, `ttg.local_load`, `ttg.local_dealloc`) and cp.async (`ttg.async_copy_global_to_local`,
`ttg.async_commit_group`, `ttg.async_wait`) take and return `ir.Value`s; `ArithBuilder` makes the
index arithmetic of a rewrite at one location; the TMA copy and mbarrier wait spellings are here
too. Operand and attribute spellings are Triton 3.6's generic form (TritonGPUOps.td,
TritonNvidiaGPUOps.td).
"""

from __future__ import annotations

from mlir import ir

from ttbuild.backend.ir.ops import ARITH, TT, TTG, TTNG
from ttbuild.backend.ir.types import barrier_type, token_type


def create(name: str, results=None, operands=None, attrs=None, loc=None, regions: int = 0, ip=None) -> ir.Operation:
    """The op `name` at `ip` or else the current insertion point (results: types; attrs: name ->
    Attribute; regions: how many empty regions it gets)."""
    return ir.Operation.create(name, results=results, operands=operands, attributes=attrs or {},
                               loc=loc, regions=regions, ip=ip)


def convert_layout(v, result_type, loc) -> ir.Value:
    """`ttg.convert_layout` of `v` into `result_type` at the current insertion point."""
    return create(TTG.CONVERT_LAYOUT, [result_type], [v], loc=loc).results[0]


def convert_operand(op, i: int, result_type) -> ir.Value:
    """Operand `i` of `op` converted into `result_type` right before `op`, which then reads the
    conversion (its location is op's)."""
    with ir.InsertionPoint(op):
        c = convert_layout(op.operands[i], result_type, op.location)
    op.operands[i] = c
    return c


def convert_back_after(op, r, have_type) -> ir.Value:
    """After `op`, a conversion of its result `r` (already retyped) back into `have_type`, which
    every other user of `r` reads from then on: the form a pass leaves when it moves one op's
    result into another layout."""
    with ir.InsertionPoint.after(op):
        c = create(TTG.CONVERT_LAYOUT, [have_type], [r], loc=op.location)
    r.replace_all_uses_except(c.results[0], c)
    return c.results[0]


def retype_result(op, r, new_type) -> ir.Value:
    """Result `r` of `op` takes `new_type`; its users keep reading the old type through a
    conversion right after `op` (convert_back_after)."""
    have = r.type
    r.set_type(new_type)
    return convert_back_after(op, r, have)


def local_alloc(result_type, src=None, loc=None) -> ir.Value:
    """`ttg.local_alloc`: a shared buffer of memdesc `result_type`, written from the register
    tensor `src` when given (then immutable), else mutable and empty."""
    return create(TTG.LOCAL_ALLOC, [result_type], [src] if src is not None else [], loc=loc).results[0]


def local_dealloc(buf, loc=None) -> None:
    """`ttg.local_dealloc` of the buffer `buf`."""
    create(TTG.LOCAL_DEALLOC, [], [buf], loc=loc)


def memdesc_index(ring, idx, view_type, loc=None) -> ir.Value:
    """`ttg.memdesc_index`: slot `idx` (an i32) of `ring`, as a view of memdesc `view_type`."""
    return create(TTG.MEMDESC_INDEX, [view_type], [ring, idx], loc=loc).results[0]


def local_load(result_type, view, token=None, loc=None) -> ir.Value:
    """`ttg.local_load` of `view` into a register tensor of `result_type`, ordered after the
    async wait `token` when given."""
    return create(TTG.LOCAL_LOAD, [result_type], [view] if token is None else [view, token], loc=loc).results[0]


def async_copy(ptr, dst, mask, attrs, loc=None) -> ir.Value:
    """`ttg.async_copy_global_to_local` of pointer tensor `ptr` into view `dst` under `mask`
    (`attrs`: cache, evict, isVolatile, operandSegmentSizes); returns its token."""
    return create(TTG.ASYNC_COPY_GLOBAL_TO_LOCAL, [token_type()], [ptr, dst, mask], attrs, loc).results[0]


def async_commit_group(tokens, loc=None) -> ir.Value:
    """`ttg.async_commit_group` of the copies `tokens`; returns the group's token."""
    return create(TTG.ASYNC_COMMIT_GROUP, [token_type()], list(tokens), loc=loc).results[0]


def async_wait(tokens, num: int, loc=None) -> ir.Value:
    """`ttg.async_wait {num}`: wait until at most `num` commit groups are in flight."""
    i32 = ir.IntegerType.get_signless(32)
    return create(TTG.ASYNC_WAIT, [token_type()], list(tokens), {"num": ir.IntegerAttr.get(i32, num)}, loc).results[0]


def tma_copy_operands(desc, coords, dst, bar, pred) -> list:
    """`ttng.async_tma_copy_global_to_local`'s operands in Triton 3.6's generic order: desc,
    coords, (no im2col offsets), barrier, result (the destination), pred."""
    return [desc, *coords, bar, dst, pred]


def wait_barrier_attrs() -> dict:
    """`ttng.wait_barrier`'s operand segments: alloc, phase, no pred, no deps (Triton 3.6)."""
    return {"operandSegmentSizes": ir.Attribute.parse("array<i32: 1, 1, 0, 0>")}


def tma_copy_attrs(rank: int) -> dict:
    """`ttng.async_tma_copy_global_to_local`'s attributes for `rank` coordinates: default cache
    and eviction, not volatile, and its operand segments (tma_copy_operands' order)."""
    i32 = ir.IntegerType.get_signless(32)
    return {"cache": ir.IntegerAttr.get(i32, 1), "evict": ir.IntegerAttr.get(i32, 1),
            "isVolatile": ir.BoolAttr.get(False),
            "operandSegmentSizes": ir.Attribute.parse(f"array<i32: 1, {rank}, 0, 1, 1, 1>")}


class ArithBuilder:
    """Creates ops at the current insertion point with one location (a rewrite's): i32
    constants and the integer arithmetic of loop indices (MLIR arith, no overflow flags set)."""

    def __init__(self, loc):
        self.loc = loc
        self.i32 = ir.IntegerType.get_signless(32)

    def at(self, loc) -> "ArithBuilder":
        """The same builder with another location (a load's ops keep the load's, so errors
        and line info point at its tl.load)."""
        return ArithBuilder(loc)

    def op(self, name, results, operands, attrs=None):
        """Any op `name` at this builder's location (create)."""
        return create(name, results, operands, attrs, self.loc)

    def const(self, v: int):
        """An i32 `arith.constant`."""
        return self.op(ARITH.CONSTANT, [self.i32], [], {"value": ir.IntegerAttr.get(self.i32, v)}).results[0]

    def arith(self, name, a, b, extra=None):
        """A binary arith op `name` on a and b (result of a's type)."""
        return self.op(name, [a.type], [a, b], extra).results[0]

    def addi(self, a, b):
        """a + b (`arith.addi`, no overflow flags)."""
        return self.arith(ARITH.ADDI, a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def muli(self, a, b):
        """a * b (`arith.muli`, no overflow flags)."""
        return self.arith(ARITH.MULI, a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def subi(self, a, b):
        """a - b (`arith.subi`, no overflow flags)."""
        return self.arith(ARITH.SUBI, a, b, {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")})

    def cmpi(self, pred: int, a, b):
        """`arith.cmpi` with predicate `pred` (SLT, SGE below); an i1 tensor for tensor operands."""
        i1 = ir.IntegerType.get_signless(1)
        t = ir.RankedTensorType.get(a.type.shape, i1, a.type.encoding) if isinstance(a.type, ir.RankedTensorType) else i1
        return self.op(ARITH.CMPI, [t], [a, b], {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pred)}).results[0]

    def select(self, c, a, b):
        """c ? a : b (`arith.select`)."""
        return self.op(ARITH.SELECT, [a.type], [c, a, b]).results[0]

    def splat_i1(self, pred, like):
        """The i1 scalar `pred` splat to the shape and encoding of tensor `like`."""
        t = ir.RankedTensorType(like.type)
        i1 = ir.IntegerType.get_signless(1)
        return self.op(TT.SPLAT, [ir.RankedTensorType.get(t.shape, i1, t.encoding)], [pred]).results[0]

    def andi(self, a, b):
        """a & b (`arith.andi`)."""
        return self.arith(ARITH.ANDI, a, b)


SLT, SGT, SGE = 2, 4, 5  # arith.cmpi predicates (MLIR ArithBase.td CmpIPredicate)


def barrier_ring(b: ArithBuilder, slots: int, count: int) -> ir.Value:
    """`slots` mbarriers in one `ttg.local_alloc` at the insertion point, each initialised
    (`ttng.init_barrier`) to complete a phase after `count` arrivals; returns the ring."""
    ring = local_alloc(barrier_type(slots), loc=b.loc)
    for k in range(slots):
        bar = memdesc_index(ring, b.const(k), barrier_type(), b.loc)
        b.op(TTNG.INIT_BARRIER, [], [bar], {"count": ir.IntegerAttr.get(b.i32, count)})
    return ring


def inval_ring(b: ArithBuilder, ring, slots: int) -> None:
    """Every mbarrier of `ring` invalidated (`ttng.inval_barrier`), then the ring freed."""
    for k in range(slots):
        b.op(TTNG.INVAL_BARRIER, [], [memdesc_index(ring, b.const(k), barrier_type(), b.loc)])
    local_dealloc(ring, b.loc)
