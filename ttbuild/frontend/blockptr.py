"""Block pointers (`tl.make_block_ptr`, `tl.advance`, `tl.load`/`tl.store` on them) lowered straight to pointer blocks + masks, the TTIR Triton's make_ttir leaves after `rewrite_tensor_pointer`.

Triton builds `tt.make_tensor_ptr` / `tt.advance` and then rewrites every use into plain pointer
arithmetic (RewriteTensorPointer.cpp) before any later stage sees it. We skip the intermediate
form: a block pointer is a compile-time record (base, shape, strides, offsets as i64 scalars,
block_shape, order), and each load/store computes, per dimension `i`,
`idx_i = offset_i + arange(0, block_shape[i])` (i64), expanded to the block's rank,
`ptr = base + sum_i idx_i * stride_i`, and for each dimension in `boundary_check` the mask
`0 <= idx_i < shape_i`; `padding_option` "zero"/"nan" gives `other`. Carried through scf.for and
scf.while, a block pointer travels as its offsets (the same loop-carried i64 values Triton's
rewrite produces).
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


class BlockPtr:
    """A block pointer: `base` (scalar `!tt.ptr<elt>`), `shape`/`strides`/`offsets` (per dimension
    an i64 scalar Value or a Constexpr int), `block_shape` and `order` (constexpr int tuples)."""

    def __init__(self, base: Value, shape, strides, offsets, block_shape, order):
        self.base, self.shape, self.strides = base, list(shape), list(strides)
        self.offsets, self.block_shape, self.order = list(offsets), tuple(block_shape), tuple(order)

    def with_offsets(self, offsets) -> "BlockPtr":
        """The same block pointer at `offsets` (Values or constexprs, one per dimension)."""
        return BlockPtr(self.base, self.shape, self.strides, offsets, self.block_shape, self.order)

    def fields(self) -> list:
        """The run-time fields, in the order Triton's rewrite_tensor_pointer splits a
        `!tt.ptr<tensor>` into: base, shape, strides, offsets."""
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def with_fields(self, fields) -> "BlockPtr":
        """This block pointer with `fields` (as `fields()` lists them) in place of its own."""
        r = len(self.block_shape)
        return BlockPtr(fields[0], fields[1:1 + r], fields[1 + r:1 + 2 * r], fields[1 + 2 * r:], self.block_shape,
                        self.order)

    @property
    def type_str(self) -> str:
        """Triton's spelling of a block pointer's type (pointer_type of a block_type)."""
        return f"pointer<{self.base.type.scalar.element}[{', '.join(map(str, self.block_shape))}]>"

    def __repr__(self):
        return f"a block pointer of type {self.type_str}"


def ints(cx, v, what: str) -> list:
    """A tuple argument: each entry a Constexpr int or an integer scalar Value."""
    if isinstance(v, Constexpr):
        v = v.value
    items = list(v) if isinstance(v, (tuple, list)) else [v]
    out = []
    for x in items:
        x = x if isinstance(x, (Value, Constexpr)) else Constexpr(x)
        ok = (isinstance(x, Value) and not x.type.shape and x.type.scalar.is_int()) or \
             (isinstance(x, Constexpr) and isinstance(x.value, int) and not isinstance(x.value, bool))
        if not ok:
            fail(cx, f"{what} must be integer scalars, got {S.describe(x)}")
        out.append(x)
    return out


def i64(cx, x):
    """An i64 scalar Value, or a Constexpr int kept as is so that zero offsets and unit strides
    fold away at compile time (as Triton's canonicalizer folds them after the rewrite)."""
    if isinstance(x, Constexpr):
        if not -2**63 <= x.value < 2**63:
            fail(cx, f"{x.value} does not fit in int64")
        return x
    return S.cast(cx, x, T.int64)


def as_value(cx, x) -> Value:
    """`x` as a Value: a constexpr becomes an int64 constant (block pointer fields are i64)."""
    return S.to_value(cx, x, T.int64) if isinstance(x, Constexpr) else x


@builtin("make_block_ptr")
def make_block_ptr(cx, base, shape, strides, offsets, block_shape, order):
    """Triton `semantic.make_block_ptr`: shape/strides become i64, block_shape must be powers of
    two, `order` a permutation; all four tuples of one length."""
    if not (isinstance(base, Value) and not base.type.shape and base.type.scalar.is_ptr()):
        fail(cx, f"tl.make_block_ptr needs a scalar pointer base, got {S.describe(base)}")
    bs = cval(cx, block_shape, "block_shape")
    bs = (bs,) if isinstance(bs, int) else tuple(bs)
    od = cval(cx, order, "order")
    od = (od,) if isinstance(od, int) else tuple(od)
    if not all(isinstance(d, int) and d > 0 and d & (d - 1) == 0 for d in bs):
        fail(cx, f"block_shape {list(bs)} must be powers of two")
    sh, st, of = ints(cx, shape, "shape"), ints(cx, strides, "strides"), ints(cx, offsets, "offsets")
    if not len(sh) == len(st) == len(of) == len(bs):
        fail(cx, f"shape, strides, offsets and block_shape must have the same length, got "
                 f"{len(sh)}, {len(st)}, {len(of)} and {len(bs)}")
    if sorted(od) != list(range(len(bs))):
        fail(cx, f"order {list(od)} must be a permutation of 0..{len(bs) - 1}")
    return BlockPtr(base, [i64(cx, x) for x in sh], [i64(cx, x) for x in st], [i64(cx, x) for x in of], bs, od)


def _block_ptr(cx, p, what) -> BlockPtr:
    if not isinstance(p, BlockPtr):
        fail(cx, f"{what} needs a block pointer (tl.make_block_ptr), got {S.describe(p)}")
    return p


@builtin("advance")
def advance(cx, base, offsets):
    """`tl.advance(base, offsets)`: the block pointer with each offset increased (zero increments leave the offset as
    it is, as Triton 3.6 folds them). Fails for a non-block-pointer or an offset count that differs from its rank."""
    bp = _block_ptr(cx, base, "tl.advance")
    inc = ints(cx, offsets, "tl.advance offsets")
    if len(inc) != len(bp.offsets):
        fail(cx, f"tl.advance: {len(inc)} offsets for a block pointer of rank {len(bp.offsets)}")
    new = [o if isinstance(d, Constexpr) and d.value == 0 else S.binary(cx, "+", o, i64(cx, d))
           for o, d in zip(bp.offsets, inc)]
    return bp.with_offsets(new)


def span(cx, off, n: int) -> Value:
    """off + arange(0, n) as a 1-D i64 index (`off`: an i64 scalar Value or a Constexpr int)."""
    rng = S.cast(cx, cx.b.op1("tt.make_range", [], T.BlockType(T.int32, (n,)),
                              {"start": "0 : i32", "end": f"{n} : i32"}), T.int64)
    if isinstance(off, Constexpr):
        return rng if off.value == 0 else S.binary(cx, "+", rng, off)
    return S.binary(cx, "+", S.splat(cx, off, (n,)), rng)


def _indices(cx, bp: BlockPtr) -> list[Value]:
    """idx_i = offset_i + arange(0, block_shape[i]) as i64, shaped [1, .., B_i, .., 1]."""
    rank, out = len(bp.block_shape), []
    for i, n in enumerate(bp.block_shape):
        idx = span(cx, bp.offsets[i], n)
        for axis in range(rank):
            if axis != i:
                idx = S.expand_dims(cx, idx, axis)
        out.append(idx)
    return out


def pointers_and_mask(cx, bp: BlockPtr, boundary_check, what: str):
    """(block of pointers, mask or None) for a block pointer's load or store: base + sum of (offset + arange) *
    stride per dimension, masked 0 <= index < shape on the `boundary_check` dimensions (Triton's
    RewriteTensorPointer). Fails for a dimension out of range."""
    dims = cval(cx, boundary_check, "boundary_check")
    dims = () if dims is None else ((dims,) if isinstance(dims, int) else tuple(dims))
    rank = len(bp.block_shape)
    for d in dims:
        if not isinstance(d, int) or not 0 <= d < rank:
            fail(cx, f"{what}: boundary_check dimension {d!r} is out of range for a block of rank {rank}")
    # an index offset + arange with a constant offset >= 0 is never negative
    nonneg = {d for d, off in enumerate(bp.offsets) if isinstance(off, Constexpr) and off.value >= 0}
    return address(cx, bp.base, bp.shape, bp.strides, _indices(cx, bp), bp.block_shape, dims, nonneg)


def address(cx, base: Value, shape, strides, idx: list[Value], block_shape, dims, nonneg=frozenset()):
    """Pointers base + sum_i idx_i * stride_i over `block_shape` (each idx_i i64, broadcastable to
    it), and the mask `0 <= idx_d < shape_d` over the dimensions `dims` (None when there are
    none; the `>= 0` half is left out for the dimensions in `nonneg`)."""
    offs = None
    for i, ix in enumerate(idx):
        stride = strides[i]
        scaled = ix if isinstance(stride, Constexpr) and stride.value == 1 else S.binary(cx, "*", ix, stride)
        term = S.broadcast_to(cx, scaled, block_shape)
        offs = term if offs is None else S.binary(cx, "+", offs, term)
    ptrs = S.binary(cx, "+", S.splat(cx, base, block_shape), offs)
    mask = None
    for d in sorted(set(dims)):
        ok = S.compare(cx, "<", idx[d], shape[d])
        if d not in nonneg:
            ok = S.binary(cx, "&", S.compare(cx, ">=", idx[d], Constexpr(0)), ok)
        ok = S.broadcast_to(cx, ok, block_shape)
        mask = ok if mask is None else S.binary(cx, "&", mask, ok)
    return ptrs, mask


def _no_mask(cx, mask, other, what):
    for v, name in ((mask, "mask"), (other, "other")):
        if v is not None and not (isinstance(v, Constexpr) and v.value is None):
            fail(cx, f"`{name}` cannot be given to {what} of a block pointer (use boundary_check)")


def load_block(cx, bp: BlockPtr, mask, other, boundary_check, padding_option, load_rule, **kw):
    """`tl.load` of a block pointer: Triton `semantic._load_block_pointer`, rewritten."""
    _no_mask(cx, mask, other, "tl.load")
    pad = cval(cx, padding_option, "padding_option") or ""
    if pad not in ("", "zero", "nan"):
        fail(cx, f"padding_option must be 'zero' or 'nan', got {pad!r}")
    elt = bp.base.type.scalar.element
    if pad == "nan" and not elt.is_float():
        fail(cx, "padding_option 'nan' is not supported for integer block pointers")
    ptrs, m = pointers_and_mask(cx, bp, boundary_check, "tl.load")
    fill = None
    if m is not None and pad:
        fill = cx.b.constant(float("nan") if pad == "nan" else 0, T.BlockType(elt, bp.block_shape))
    return load_rule(cx, ptrs, mask=m, other=fill, **kw)


def store_block(cx, bp: BlockPtr, value, mask, boundary_check, store_rule, **kw):
    """`tl.store` to a block pointer: Triton `semantic._store_block_pointer`, rewritten; the value
    must have the block's shape (broadcast from a scalar or smaller block as Triton does)."""
    _no_mask(cx, mask, None, "tl.store")
    if isinstance(value, Value) and value.type.shape and \
            len(value.type.shape) == len(bp.block_shape) and any(
            a != b and a != 1 for a, b in zip(value.type.shape, bp.block_shape)):
        fail(cx, f"value shape {list(value.type.shape)} does not match block shape {list(bp.block_shape)}")
    ptrs, m = pointers_and_mask(cx, bp, boundary_check, "tl.store")
    return store_rule(cx, ptrs, value, mask=m, **kw)
