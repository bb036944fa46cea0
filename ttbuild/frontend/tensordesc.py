"""Tensor descriptors: TMA ops on a TMA target for eligible descriptors, pointer blocks and masks for everything else.

Covers `tl.make_tensor_descriptor`, `desc.load` / `desc.store` / `desc.atomic_*`, `tl.load_tensor_descriptor` and
`tl.store_tensor_descriptor`. On a TMA target (ttbuild.tma), loads, stores and reductions of an eligible descriptor
are `tt.descriptor_load` / `tt.descriptor_store` / `tt.descriptor_reduce`; everything else is lowered to pointer
blocks and masks (Triton's `rewrite_tensor_descriptor_to_pointer`, its form where there is no TMA).

With the TMA option (the ttir stage's `tma`), a rank-2 descriptor with blocks of at most 256
elements, given as a parameter or made at the kernel's top level (`tt.make_tensor_descriptor`),
carries its tensormap value: its loads, whole-block stores and reductions (`desc.atomic_*`) go
through it; gathers and scatters keep the pointer form, which the record keeps for every
descriptor.

A descriptor is a compile-time record: `base` (a scalar pointer), `shape` (i32, as Triton makes
them) and `strides` (i64; the last must be the constant 1), `block_shape` (constexpr ints) and the
padding option. `desc.load(offsets)` is the block at `offsets` with every dimension
bounds-checked (`0 <= offset + i < shape`), out-of-bounds elements the padding (zero, or NaN for
`padding_option="nan"`), as a TMA load fills them. `desc.store(offsets, value)` writes the
in-bounds elements. `desc.gather(x_offsets, y_offset)` / `desc.scatter(value, x_offsets,
y_offset)` read / write the rows `x_offsets` (a 1-D integer tensor) at the columns `y_offset +
arange(block_shape[1])`, bounds-checked the same way (a TMA gather4 / scatter4). `desc.atomic_add/min/max/and/or/xor(offsets, value)` reduce the in-bounds
elements with relaxed atomics, as a TMA reduction does. The validation follows Triton 3.6's
`semantic.make_tensor_descriptor` (python/triton/language/semantic.py). The indices are
built by ttbuild.frontend.blockptr, so a descriptor and a block pointer over the same tile give
the same TTIR.
"""

from __future__ import annotations

from ttbuild import tma

from . import atomics, blockptr, builtins
from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin

# desc.<name>(offsets, value) that reduce like a TMA reduction (Triton's descriptor_atomic_*)
ATOMICS = ("atomic_add", "atomic_min", "atomic_max", "atomic_and", "atomic_or", "atomic_xor")
METHODS = ("load", "store", "gather", "scatter") + ATOMICS


class TensorDescriptor:
    """A tensor descriptor: `base`, per dimension `shape`/`strides` (an i64 scalar Value or a
    Constexpr int), `block_shape` (ints) and `padding` ("zero" or "nan")."""

    def __init__(self, base: Value, shape, strides, block_shape, padding: str, tmap: Value | None = None):
        self.base, self.shape, self.strides = base, list(shape), list(strides)
        self.block_shape, self.padding = tuple(block_shape), padding
        self.tmap = tmap  # a TMA parameter's tensormap (`!tt.tensordesc`): loads go through it

    @property
    def dtype(self):
        return self.base.type.scalar.element

    def block(self, cx, offsets, what: str) -> blockptr.BlockPtr:
        """The block pointer of the tile at `offsets` (one integer per dimension)."""
        offs = blockptr.ints(cx, offsets, f"{what} offsets")
        if len(offs) != len(self.block_shape):
            fail(cx, f"{what}: {len(offs)} offsets for a descriptor of rank {len(self.block_shape)}")
        order = tuple(reversed(range(len(self.block_shape))))
        return blockptr.BlockPtr(self.base, self.shape, self.strides, [blockptr.i64(cx, o) for o in offs],
                                 self.block_shape, order)

    def __repr__(self):
        return f"a tensor descriptor of type tensor_descriptor<{self.dtype}[{', '.join(map(str, self.block_shape))}]>"


@builtin("make_tensor_descriptor")
def make_tensor_descriptor(cx, base, shape, strides, block_shape, padding_option="zero"):
    """Triton `semantic.make_tensor_descriptor`: rank 1 to 5, as many strides and block
    dimensions as shape entries, at least 16 bytes in the block's last dimension, the last
    stride the constant 1, `nan` padding for floats only."""
    if not (isinstance(base, Value) and not base.type.shape and base.type.scalar.is_ptr()):
        fail(cx, f"tl.make_tensor_descriptor needs a scalar pointer base, got {S.describe(base)}")
    sh = blockptr.ints(cx, shape, "shape")
    st = blockptr.ints(cx, strides, "strides")
    bs = cval(cx, block_shape, "block_shape")
    bs = (bs,) if isinstance(bs, int) else tuple(bs)
    if not 1 <= len(sh) <= 5:
        fail(cx, f"Expected 1 <= ndim <= 5 but got {len(sh)} dimensions")
    if len(st) != len(sh):
        fail(cx, f"Expected {len(sh)} strides but got {len(st)}")
    if len(bs) != len(sh):
        fail(cx, f"Expected block_shape to have {len(sh)} dimensions but got {len(bs)}")
    if not all(isinstance(d, int) and d > 0 and d & (d - 1) == 0 for d in bs):
        fail(cx, f"block_shape {list(bs)} must be powers of two")
    elt = base.type.scalar.element
    size = max(1, elt.bits // 8)
    if bs[-1] * size < 16:
        fail(cx, f"Descriptor block shape must have at least 16 bytes in the last dimension, but got "
                 f"{bs[-1]} * {size} = {bs[-1] * size} bytes")
    if not (isinstance(st[-1], Constexpr) and st[-1].value == 1):
        fail(cx, f"Tensor descriptor last dim must be 1 but got {S.describe(st[-1])}")
    pad = cval(cx, padding_option, "padding_option") or "zero"
    if pad not in ("zero", "nan"):
        fail(cx, f"padding_option must be 'zero' or 'nan', got {pad!r}")
    if pad == "nan" and not elt.is_float():
        fail(cx, "Padding option `nan` is not supported for integer blocks")
    # shape entries are i32 in Triton (make_scalar(x, tl.int32)); the bounds compare in i64
    shape32 = [S.cast(cx, x, T.int32) if isinstance(x, Value) else x for x in sh]
    shape64 = [blockptr.i64(cx, x) for x in shape32]
    strides64 = [blockptr.i64(cx, x) for x in st]
    tmap = None
    if cx.tma and cx.b.depth == 1 and tma.eligible(bs, elt.bits):
        # made once per program at the kernel's top level: a tensormap in global scratch, loads
        # through TMA (Triton's tt.make_tensor_descriptor on sm_90; the ttgir stage lowers it)
        i32 = [x if isinstance(x, Value) else cx.b.constant(x.value, T.int32) for x in shape32]
        i64 = [x if isinstance(x, Value) else cx.b.constant(x.value, T.int64) for x in strides64]
        tmap = cx.b.op1("tt.make_tensor_descriptor", [base] + i32 + i64, T.TensorDescType(elt, bs), {
            "padding": "2 : i32" if pad == "nan" else "1 : i32",
            "operandSegmentSizes": f"array<i32: 1, {len(i32)}, {len(i64)}>"})
    return TensorDescriptor(base, shape64, strides64, bs, pad, tmap)


def from_parameter(cx, sig, vals: list, tmap: Value | None = None) -> TensorDescriptor:
    """The descriptor a `tensordesc<...>` kernel parameter stands for, from its expanded
    arguments (ttbuild.frontend.abi.runtime_params: base, shape as i32, strides but the last)
    and, compiled for TMA, its tensormap argument (ttbuild.tma)."""
    rank = len(sig.block_shape)
    base, shape, strides = vals[0], vals[1:1 + rank], vals[1 + rank:]
    return TensorDescriptor(base, [blockptr.i64(cx, x) for x in shape], list(strides) + [Constexpr(1)],
                            sig.block_shape, "zero", tmap)


def _desc(cx, d, what: str) -> TensorDescriptor:
    if not isinstance(d, TensorDescriptor):
        fail(cx, f"{what} needs a tensor descriptor (tl.make_tensor_descriptor), got {S.describe(d)}")
    return d


@builtin("load_tensor_descriptor")
def load_tensor_descriptor(cx, desc, offsets):
    """`tl.load_tensor_descriptor(desc, offsets)`, the same as `desc.load(offsets)`."""
    d = _desc(cx, desc, "tl.load_tensor_descriptor")
    if d.tmap is not None:
        return _tma_load(cx, d, offsets)
    bp = d.block(cx, offsets, "desc.load")
    everything = tuple(range(len(d.block_shape)))
    return blockptr.load_block(cx, bp, None, None, everything, d.padding, builtins.load)


def _indices(cx, d: TensorDescriptor, offsets, what: str) -> list:
    """A TMA op's i32 indices, one per dimension of the descriptor."""
    offs = blockptr.ints(cx, offsets, f"{what} offsets")
    if len(offs) != len(d.block_shape):
        fail(cx, f"{what}: {len(offs)} offsets for a descriptor of rank {len(d.block_shape)}")
    return [S.cast(cx, o, T.int32) if isinstance(o, Value) else cx.b.constant(o.value, T.int32) for o in offs]


def _tma_load(cx, d: TensorDescriptor, offsets) -> Value:
    """`tt.descriptor_load` (Triton's DescriptorLoadOp: i32 indices, the block, out-of-bounds
    elements zero as the TMA fills them) of a TMA descriptor parameter."""
    idx = _indices(cx, d, offsets, "desc.load")
    rt = T.BlockType(d.dtype, d.block_shape)
    return cx.b.op1("tt.descriptor_load", [d.tmap] + idx, rt, {"cache": "1 : i32", "evict": "1 : i32"})


@builtin("store_tensor_descriptor")
def store_tensor_descriptor(cx, desc, offsets, value):
    """`tl.store_tensor_descriptor(desc, offsets, value)`, the same as `desc.store(offsets, value)`:
    the value has the block's shape (Triton's descriptor_store checks it)."""
    d = _desc(cx, desc, "tl.store_tensor_descriptor")
    if isinstance(value, Value) and tuple(value.type.shape) != d.block_shape:
        fail(cx, f"desc.store: value shape {list(value.type.shape)} does not match the descriptor's block "
                 f"shape {list(d.block_shape)}")
    if d.tmap is not None and isinstance(value, Value) and tuple(value.type.shape) == d.block_shape:
        return _tma_store(cx, d, offsets, value)
    bp = d.block(cx, offsets, "desc.store")
    return blockptr.store_block(cx, bp, value, None, tuple(range(len(d.block_shape))), builtins.store)


def _tma_store(cx, d: TensorDescriptor, offsets, value: Value) -> None:
    """`tt.descriptor_store` (Triton's DescriptorStoreOp: the block, cast to the descriptor's
    element type, written in bounds by a TMA store) of a TMA descriptor."""
    idx = _indices(cx, d, offsets, "desc.store")
    cx.b.op("tt.descriptor_store", [d.tmap, S.cast(cx, value, d.dtype)] + idx, [])
    return None


# Triton 3.6's element types per descriptor reduction (semantic.descriptor_atomic_*: the types
# `cp.reduce.async.bulk.tensor` reduces, PTX ISA 9.7.9.25.5.2), and its kind numbers
# (TT_DescriptorReduceKindAttr, include/triton/Dialect/Triton/IR/TritonAttrDefs.td).
REDUCE_DTYPES = {
    "add": ("uint32", "int32", "uint64", "fp32", "fp16", "bf16"),
    "min": ("uint32", "int32", "uint64", "int64", "fp16", "bf16"),
    "max": ("uint32", "int32", "uint64", "int64", "fp16", "bf16"),
    "and": ("uint32", "int32", "uint64", "int64"),
    "or": ("uint32", "int32", "uint64", "int64"),
    "xor": ("uint32", "int32", "uint64", "int64"),
}
REDUCE_KINDS = {"add": 1, "min": 2, "max": 3, "and": 6, "or": 7, "xor": 8}


def atomic(cx, desc: TensorDescriptor, op: str, offsets, value):
    """`desc.atomic_<op>(offsets, value)`: the in-bounds elements of the block at `offsets`
    reduced into memory (`value` has the block's shape and is cast to the descriptor's dtype).
    Through a TMA descriptor, a `tt.descriptor_reduce` (one `cp.reduce.async.bulk.tensor` per
    box); otherwise relaxed atomics on the in-bounds elements. Element types as Triton 3.6 allows
    them per op (REDUCE_DTYPES; 16-bit float min / max only where there is TMA), else a located
    error."""
    what = f"desc.atomic_{op}"
    allowed = REDUCE_DTYPES[op]
    if desc.dtype.name not in allowed:
        fail(cx, f"{what}: unsupported dtype {desc.dtype} (Triton allows {', '.join(allowed)})")
    if op in ("min", "max") and desc.dtype.name in ("fp16", "bf16") and not cx.tma:
        fail(cx, f"{what}: 16-bit float types require native tma support (sm_90 or newer, without disable_tma)")
    if isinstance(value, Value) and tuple(value.type.shape) != desc.block_shape:
        fail(cx, f"{what}: value shape {list(value.type.shape)} does not match the descriptor's block "
                 f"shape {list(desc.block_shape)}")
    # and / or / xor through a map of signed 64-bit elements stop the H200 with an illegal
    # instruction (measured; .u64 maps and 32-bit ones reduce correctly): such a descriptor's
    # bitwise reductions keep the pointer form, which gives the same bits
    bitwise_s64 = op in ("and", "or", "xor") and desc.dtype.name == "int64"
    if desc.tmap is not None and isinstance(value, Value) and not bitwise_s64:
        idx = _indices(cx, desc, offsets, what)
        cx.b.op("tt.descriptor_reduce", [desc.tmap, S.cast(cx, value, desc.dtype)] + idx, [],
                {"kind": f"{REDUCE_KINDS[op]} : i32"})
        return None
    bp = desc.block(cx, offsets, what)
    ptrs, mask = blockptr.pointers_and_mask(cx, bp, tuple(range(len(desc.block_shape))), what)
    atomics.atomic_rmw(cx, op, ptrs, value, mask, "relaxed", "gpu")
    return None


def _rows_and_cols(cx, desc: TensorDescriptor, x_offsets, y_offset, what: str):
    """Triton `semantic.descriptor_gather` / `descriptor_scatter`'s checks (python/triton/language/
    semantic.py), then the pointers and in-bounds mask of rows `x_offsets` x columns `y_offset +
    arange(block_shape[1])`, shaped [len(x_offsets), block_shape[1]]."""
    bs = desc.block_shape
    if len(bs) != 2:
        fail(cx, f"descriptor must be 2D, but got {list(bs)}")
    if bs[0] != 1:
        fail(cx, f"descriptor block must have 1 row, but got {list(bs)}")
    if not (isinstance(x_offsets, Value) and x_offsets.type.shape and x_offsets.type.scalar.is_int()):
        fail(cx, f"desc.{what}: x offsets must be a 1-D integer tensor, got {S.describe(x_offsets)}")
    if len(x_offsets.type.shape) != 1:
        fail(cx, f"x offsets must be 1D, but got {list(x_offsets.type.shape)}")
    n = x_offsets.type.shape[0]
    if n < 8:
        fail(cx, f"descriptor {what} must have at least 8 rows, but got {list(x_offsets.type.shape)}")
    min_cols = 32 // desc.dtype.bits * 8
    if bs[1] < min_cols:
        fail(cx, f"descriptor {what} of {desc.dtype} must have at least {min_cols} columns, but got {bs[1]}")
    (y,) = blockptr.ints(cx, [y_offset], f"desc.{what} y offset")
    rows = S.expand_dims(cx, S.cast(cx, x_offsets, T.int64), 1)
    cols = S.expand_dims(cx, blockptr.span(cx, blockptr.i64(cx, y), bs[1]), 0)
    nonneg = {1} if isinstance(y, Constexpr) and y.value >= 0 else set()
    shape = (n, bs[1])
    ptrs, mask = blockptr.address(cx, desc.base, desc.shape, desc.strides, [rows, cols], shape, (0, 1), nonneg)
    return ptrs, mask, shape


def gather(cx, desc: TensorDescriptor, x_offsets, y_offset):
    """`desc.gather(x_offsets, y_offset)`: an [len(x_offsets), block_shape[1]] tile of the rows
    `x_offsets`, out-of-bounds elements the padding (Triton's descriptor_gather)."""
    ptrs, mask, shape = _rows_and_cols(cx, desc, x_offsets, y_offset, "gather")
    fill = cx.b.constant(float("nan") if desc.padding == "nan" else 0, T.BlockType(desc.dtype, shape))
    return builtins.load(cx, ptrs, mask=mask, other=fill)


def scatter(cx, desc: TensorDescriptor, value, x_offsets, y_offset):
    """`desc.scatter(value, x_offsets, y_offset)`: writes the in-bounds elements of the
    [len(x_offsets), block_shape[1]] `value` to the rows `x_offsets` (Triton's descriptor_scatter)."""
    ptrs, mask, shape = _rows_and_cols(cx, desc, x_offsets, y_offset, "scatter")
    if isinstance(value, Value) and tuple(value.type.shape) != shape:
        fail(cx, f"desc.scatter: value shape {list(value.type.shape)} does not match the gathered shape "
                 f"{list(shape)}")
    builtins.store(cx, ptrs, value, mask=mask)
    return None


def call_method(cx, desc: TensorDescriptor, name: str, args: list, kwargs: dict):
    """`desc.<name>(...)` for the names in METHODS (Triton's tensor_descriptor methods)."""
    import inspect

    if name == "load":
        fn = load_tensor_descriptor
    elif name == "store":
        fn = store_tensor_descriptor
    elif name == "gather":
        fn = gather
    elif name == "scatter":
        fn = scatter
    else:
        def fn(cx, desc, offsets, value):
            return atomic(cx, desc, name.removeprefix("atomic_"), offsets, value)
    try:
        inspect.signature(fn).bind(cx, desc, *args, **kwargs)
    except TypeError as e:
        fail(cx, f"desc.{name}: {e}")
    return fn(cx, desc, *args, **kwargs)


def check_not_descriptor_call(cx, obj, name: str, args: list) -> None:
    """`p.load([0, 0])` (a descriptor's call form) on a pointer: say that `p` is not a tensor
    descriptor, instead of the tensor method's complaint about its mask."""
    if name not in METHODS or not args or not isinstance(obj, Value) or not obj.type.scalar.is_ptr():
        return
    first = args[0]
    offsets = isinstance(first, (tuple, list)) or (isinstance(first, Constexpr) and isinstance(first.value, (tuple, list)))
    if offsets:
        fail(cx, f".{name}([...]) is a tensor descriptor's call, and this is {S.describe(obj)}, not a tensor "
                 f"descriptor: make one with tl.make_tensor_descriptor, or give the parameter a "
                 f"tensordesc<...> signature entry")


def attribute(cx, desc: TensorDescriptor, attr: str):
    """`desc.block_shape` / `desc.dtype` (constexprs), or a method of METHODS to call."""
    if attr == "block_shape":
        return Constexpr(desc.block_shape)
    if attr == "dtype":
        return Constexpr(desc.dtype)
    if attr in METHODS:
        return ("desc_method", desc, attr)
    fail(cx, f"a tensor descriptor has no attribute {attr!r} here (block_shape, dtype, {', '.join(METHODS)})")
