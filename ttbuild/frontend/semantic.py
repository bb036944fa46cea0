"""Typed IR construction for Triton semantics: constants, casts, broadcasting, arithmetic, comparisons, pointers.

Mirrors Triton 3.6 `triton/language/semantic.py`: Python numbers and constexprs stay `Constexpr`
(folded in Python) until an IR op needs them, then materialize in the dtype the promotion rules
(`types.computation_type`) pick. Every op takes the location of the AST node being lowered.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from ttbuild.errors import CompilationError

from . import types as T
from .irtext import IRBuilder, Value

OVF = {"overflowFlags": "#arith.overflow<none>"}
FM = {"fastmath": "#arith.fastmath<none>"}


@dataclass(frozen=True, repr=False)
class Constexpr:
    """A compile-time value: a Python number, bool, None, str, dtype, or tuple of them."""

    value: Any

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"  # Triton's constexpr.__repr__ spelling


@dataclass(frozen=True)
class Ctx:
    """What every lowering rule receives: the IR builder (whose `loc` is the current node),
    `call(fn, args)`, which lowers a call to a @jit function value (a combine_fn) inline, and
    `debug` (the variant's debug option: whether tl.device_assert emits tt.assert) and `tma`
    (the target loads descriptors through TMA: ttbuild.tma)."""

    b: IRBuilder
    call: Any = None
    debug: bool = False
    tma: bool = False


def fail(cx: Ctx, message: str, cls=CompilationError):
    """Raise a CompilationError at the node being lowered (resolved later via `locs.locate`)."""
    raise cls(message, stage="ttir", node_id=cx.b.loc if isinstance(cx.b.loc, int) else None)


def warn(cx: Ctx, message: str) -> None:
    """Warn as Triton does (`warnings.warn` in its semantic.py), at the node being lowered: a
    CompilerWarning carrying the node id, which `ttbuild.compile` and the build locate."""
    import warnings

    from ttbuild.errors import CompilerWarning

    warnings.warn(CompilerWarning(message, node_id=cx.b.loc if isinstance(cx.b.loc, int) else None), stacklevel=2)


def is_number(v) -> bool:
    """Whether `v` is a constexpr int, float or bool (a Python number, which Triton's promotion treats as weakly
    typed)."""
    return isinstance(v, Constexpr) and isinstance(v.value, (int, float))


def py_dtype(cx: Ctx, value) -> T.DType:
    """Triton's dtype for a Python number; one that fits no dtype is the user's error."""
    try:
        return T.dtype_of_python(value)
    except TypeError as e:
        fail(cx, str(e))


def to_value(cx: Ctx, v, dtype: T.DType | None = None) -> Value:
    """An IR value for `v`; a Constexpr number materializes as `dtype` (default: Triton's pick)."""
    if isinstance(v, Value):
        return v
    if not is_number(v):
        fail(cx, f"expected a tensor or a number, got {describe(v)}")
    return cx.b.constant(v.value, dtype or py_dtype(cx, v.value))


def describe(v) -> str:
    """How diagnostics name `v`: "a value of type fp32[128]", "constexpr 4", a block pointer's or descriptor's repr,
    else its class name."""
    if isinstance(v, Value):
        return f"a value of type {v.type}"
    if isinstance(v, Constexpr):
        return f"constexpr {v.value!r}"
    if type(v).__repr__ is not object.__repr__:  # block pointers, tensor descriptors: Triton's type
        return repr(v)
    return type(v).__name__


def with_shape(scalar: T.Scalar, shape: tuple[int, ...]) -> T.Type:
    """A BlockType of `scalar` and `shape`, or `scalar` itself for shape ()."""
    return T.BlockType(scalar, shape) if shape else scalar


def splat(cx: Ctx, v: Value, shape: tuple[int, ...]) -> Value:
    """tt.splat of the scalar `v` to a block of `shape` (same element type)."""
    return cx.b.op1("tt.splat", [v], T.BlockType(v.type.scalar, shape))


def broadcast_to(cx: Ctx, v: Value, shape: tuple[int, ...]) -> Value:
    """`v` (scalar or block) as a block of `shape`: tt.splat for scalars, tt.broadcast for size-1 dims."""
    if v.type.shape == tuple(shape):
        return v
    if not v.type.shape:
        return splat(cx, v, shape)
    src = v.type.shape
    if len(src) < len(shape):  # numpy rule: leading size-1 dims (Triton: expand_dims at 0)
        for _ in range(len(shape) - len(src)):
            v = expand_dims(cx, v, 0)
        src = v.type.shape
    try:
        T.broadcast_shapes(src, shape)
    except ValueError:
        fail(cx, f"cannot broadcast shape {list(src)} to {list(shape)}")
    return cx.b.op1("tt.broadcast", [v], T.BlockType(v.type.scalar, tuple(shape)))


def expand_dims(cx: Ctx, v: Value, axis: int) -> Value:
    """`v` with a size-1 dimension inserted at `axis` (negative counts from the end) by tt.expand_dims; a 0-d value
    becomes a block of one (Triton 3.6 semantic.expand_dims). Fails for an axis out of range."""
    shape = list(v.type.shape)
    if not shape:  # a 0-d value becomes a block of one (Triton 3.6 `semantic.expand_dims`: splat)
        if axis not in (0, -1):
            fail(cx, f"expand_dims axis {axis} is out of range for a 0-d value")
        return splat(cx, v, (1,))
    axis = axis + len(shape) + 1 if axis < 0 else axis
    shape.insert(axis, 1)
    return cx.b.op1("tt.expand_dims", [v], T.BlockType(v.type.scalar, tuple(shape)), {"axis": f"{axis} : i32"})


def broadcast_pair(cx: Ctx, a: Value, b: Value) -> tuple[Value, Value]:
    """`a` and `b` broadcast to their common shape (numpy's rules, Triton 3.6 semantic.broadcast_impl_value). Fails
    when the shapes do not broadcast."""
    try:
        shape = T.broadcast_shapes(a.type.shape, b.type.shape)
    except ValueError:
        fail(cx, f"cannot broadcast shapes {list(a.type.shape)} and {list(b.type.shape)}")
    return broadcast_to(cx, a, shape), broadcast_to(cx, b, shape)


_ROUNDING = {"rtz": 0, "rtne": 1}  # triton::RoundingMode


def cast(cx: Ctx, v, dst: T.Scalar, bitcast: bool = False, rounding: str | None = None) -> Value:
    """Convert `v` elementwise to `dst`, rule for rule as Triton 3.6 `semantic.cast` (and
    `semantic.bitcast` when `bitcast`): fp8 conversions are tt.fp_to_fp (RTNE when narrowing),
    fp16/bf16 reach anything but fp32 through fp32, int↔int extends by the source's signedness,
    bool results compare with zero; fp8↔int and odd pointer casts are errors."""
    if isinstance(v, Constexpr):
        if is_number(v) and isinstance(dst, T.DType):
            return to_value(cx, v, dst)
        fail(cx, f"cannot cast {describe(v)} to {dst}")
    src = v.type.scalar
    rt = with_shape(dst, v.type.shape)
    if bitcast:
        if src.is_ptr() != dst.is_ptr():
            fail(cx, f"cannot bitcast {src} to {dst}: only pointer to pointer or value to value")
        if not src.is_ptr() and src.bits != dst.bits:
            fail(cx, f"cannot bitcast {src} to {dst}: sizes differ ({src.bits} and {dst.bits} bits)")
        return v if src == dst else cx.b.op1("tt.bitcast", [v], rt)
    if src == dst:
        return v
    narrowing = src.is_float() and dst.is_float() and dst.bits < src.bits
    if rounding is not None:
        if not narrowing:
            fail(cx, f"fp_downcast_rounding applies only to narrowing float casts, not {src} to {dst}")
        if rounding not in _ROUNDING:
            fail(cx, f"fp_downcast_rounding must be 'rtne' or 'rtz', got {rounding!r}")
    custom = rounding == "rtz"
    if (src.is_float() and dst.is_float() and (src.is_fp8() or dst.is_fp8())) or custom:
        props = {"rounding": f"{_ROUNDING[rounding or 'rtne']} : i32"} if narrowing else None
        return cx.b.op1("tt.fp_to_fp", [v], rt, props)
    if src in (T.fp16, T.bf16) and dst != T.fp32:
        return cast(cx, cast(cx, v, T.fp32), dst)
    if narrowing:
        return cx.b.op1("arith.truncf", [v], rt, FM)
    if src.is_float() and dst.is_float():
        return cx.b.op1("arith.extf", [v], rt, FM)
    if src.is_int() and dst.is_int():
        if dst.is_bool():
            return compare(cx, "!=", v, cx.b.constant(0, v.type))
        if dst.bits > src.bits:
            return cx.b.op1("arith.extsi" if src.is_signed() else "arith.extui", [v], rt)
        if dst.bits < src.bits:
            return cx.b.op1("arith.trunci", [v], rt, OVF)
        return _retag(v, rt)
    standard = (T.fp16, T.bf16, T.fp32, T.fp64)
    if src in standard and dst.is_int():
        if dst.is_bool():
            return compare(cx, "!=", v, cx.b.constant(0.0, v.type))
        return cx.b.op1("arith.fptosi" if dst.is_signed() else "arith.fptoui", [v], rt)
    if src.is_int() and dst in standard:
        return cx.b.op1("arith.sitofp" if src.is_signed() else "arith.uitofp", [v], rt)
    if src.is_ptr() and dst.is_int() and dst.bits in (1, 64):
        as_int = cx.b.op1("tt.ptr_to_int", [v], with_shape(T.int64, v.type.shape))
        return as_int if dst.bits == 64 else compare(cx, "!=", as_int, cx.b.constant(0, as_int.type))
    if src.is_int() and dst.is_ptr():
        return cx.b.op1("tt.int_to_ptr", [v], rt)
    if src.is_ptr() and dst.is_ptr():
        return cx.b.op1("tt.bitcast", [v], rt)
    fail(cx, f"cannot cast {src} to {dst}")


def _retag(v: Value, rt: T.Type) -> Value:
    # int32 <-> uint32 share the signless MLIR type: a frontend-only relabel, no op.
    return Value(v.name, rt)


_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
         "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
         "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
         "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
         "==": operator.eq, "!=": operator.ne}


def fold(cx: Ctx, op: str, a: Constexpr, b: Constexpr) -> Constexpr:
    """`a op b` on two constexprs, computed in Python as Triton folds them (a constexpr result). Fails (CompileError)
    when Python raises (division by zero, bad types)."""
    try:
        return Constexpr(_FOLD[op](a.value, b.value))
    except Exception as e:  # noqa: BLE001  (any Python error folding constants is the user's)
        fail(cx, f"cannot evaluate constexpr {a.value!r} {op} {b.value!r}: {e}")


def binary_operands(cx: Ctx, a, b, div_or_mod=False, allow_ptr=False, weak=True) -> tuple[Value, Value, T.DType]:
    """Promote and broadcast two operands (Triton `binary_op_type_checking_impl`). A Python number is weakly typed
    (it takes the tensor's type when its kind is no higher) unless `weak` is False: then it counts as the tensor
    Triton's `to_tensor` makes of it (int32, fp32...), as tensor.__lt__ & co. do before comparing."""
    for v in (a, b):
        if not isinstance(v, Value) and not is_number(v):
            fail(cx, f"unsupported operand: {describe(v)}")
    at = a.type.scalar if isinstance(a, Value) else py_dtype(cx, a.value)
    bt = b.type.scalar if isinstance(b, Value) else py_dtype(cx, b.value)
    if at.is_ptr() or bt.is_ptr():
        if not allow_ptr:
            fail(cx, f"unsupported operand types {at} and {bt}")
        return _bcast(cx, to_value(cx, a), to_value(cx, b)) + (None,)
    try:
        ct = T.computation_type(at, weak and not isinstance(a, Value), bt, weak and not isinstance(b, Value), div_or_mod)
    except TypeError as e:
        fail(cx, str(e))
    if ct.is_fp8() and (is_number(a) or is_number(b)):
        # Triton 3.6 has no fp8 scalar constants here (its builder lacks get_fp8*): refuse clearly.
        fail(cx, f"a Python number cannot be combined with a {ct} tensor; cast the tensor with .to() first")
    for v in (a, b):
        if is_number(v) and ct.is_int():
            lo, hi = ct.int_range()
            if not lo <= v.value <= hi:
                fail(cx, f"scalar {v.value} is out of range for type {ct}")
    # A Python number next to a block materializes as a dense splat constant of the block's
    # shape (what Triton's canonicalizer leaves), not as a scalar plus tt.splat.
    shape = a.type.shape if isinstance(a, Value) else b.type.shape if isinstance(b, Value) else ()
    va = cast(cx, a, ct) if isinstance(a, Value) else cx.b.constant(a.value, with_shape(ct, shape))
    vb = cast(cx, b, ct) if isinstance(b, Value) else cx.b.constant(b.value, with_shape(ct, shape))
    return _bcast(cx, va, vb) + (ct,)


def _bcast(cx, a, b):
    return broadcast_pair(cx, a, b)


_INT_OPS = {"+": "arith.addi", "-": "arith.subi", "*": "arith.muli", "&": "arith.andi",
            "|": "arith.ori", "^": "arith.xori", "<<": "arith.shli"}
_FLOAT_OPS = {"+": "arith.addf", "-": "arith.subf", "*": "arith.mulf", "/": "arith.divf", "%": "arith.remf"}


def binary(cx: Ctx, op: str, a, b):
    """`a <op> b` for + - * / // % & | ^ << >> and comparisons, with Triton's typing."""
    if isinstance(a, Constexpr) and isinstance(b, Constexpr):
        return fold(cx, op, a, b)
    if op in ("<<", ">>"):
        check_bit_width(cx, a, b)
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return compare(cx, op, a, b)
    if op in ("+", "-") and any(isinstance(v, Value) and v.type.scalar.is_ptr() for v in (a, b)):
        return _ptr_arith(cx, op, a, b)
    if op == "/":
        # int / int is true division in fp32 (Triton `semantic.truediv`).
        at = a.type.scalar if isinstance(a, Value) else py_dtype(cx, a.value)
        bt = b.type.scalar if isinstance(b, Value) else py_dtype(cx, b.value)
        if at.is_int() and bt.is_int():
            try:  # Triton type-checks (signedness) before casting int / int to fp32
                T.computation_type(at, isinstance(a, Constexpr), bt, isinstance(b, Constexpr), True)
            except TypeError as e:
                fail(cx, str(e))
            a, b = (cast(cx, v, T.fp32) if isinstance(v, Value) else Constexpr(float(v.value)) for v in (a, b))
    va, vb, ct = binary_operands(cx, a, b, div_or_mod=op in ("/", "%", "//"))
    rt = va.type
    if ct.is_float():
        if op not in _FLOAT_OPS:
            fail(cx, f"operator {op} is not supported on {ct}")
        return cx.b.op1(_FLOAT_OPS[op], [va, vb], rt, FM)
    if op in _INT_OPS:
        return cx.b.op1(_INT_OPS[op], [va, vb], rt, OVF if op in "+-*" else None)
    unsigned = ct.is_unsigned()
    name = {"//": "arith.divui" if unsigned else "arith.divsi", "%": "arith.remui" if unsigned else "arith.remsi",
            ">>": "arith.shrui" if unsigned else "arith.shrsi"}.get(op)
    if name is None:
        fail(cx, f"operator {op} is not supported on {ct}")
    return cx.b.op1(name, [va, vb], rt)


def check_bit_width(cx: Ctx, value, shift) -> None:
    """Triton 3.6 `core.check_bit_width` (tensor.__lshift__/__rshift__): a tensor shifted by a
    constexpr at least its element's bit width warns, word for word, before any type check."""
    # A pointer block has no bit width in Triton (it fails there); ours fails in `binary`.
    if isinstance(value, Value) and is_number(shift) and not value.type.scalar.is_ptr():
        bits = value.type.scalar.bits
        if shift.value >= bits:
            warn(cx, f"Value {shift.value} exceeds the maximum bitwidth ({bits}) for type '{value.type.scalar}'. "
                     f"This may result in undefined behavior.")


def _ptr_arith(cx: Ctx, op: str, a, b) -> Value:
    ptr, off = (a, b) if isinstance(a, Value) and a.type.scalar.is_ptr() else (b, a)
    if op == "-" and ptr is not a:
        fail(cx, "cannot subtract a pointer from a number")
    if isinstance(off, Value) and off.type.scalar.is_ptr():
        fail(cx, "cannot add two pointers")
    if isinstance(off, Constexpr):
        if not isinstance(off.value, int) or isinstance(off.value, bool):
            fail(cx, f"pointer offset must be an integer, got {describe(off)}")
        off = to_value(cx, Constexpr(-off.value if op == "-" else off.value))
    else:
        if not off.type.scalar.is_int():
            fail(cx, f"pointer offset must be an integer, got {off.type}")
        if op == "-":
            off = unary(cx, "-", off)
    ptr, off = broadcast_pair(cx, ptr, off)
    if off.type.scalar.is_unsigned() and off.type.scalar.bits < 64:
        # tt.addptr reads its offset as signed: Triton 3.6 `semantic.add` zero-extends an unsigned
        # one to int64 first (after `-` negates it, for ptr - offset)
        off = cx.b.op1("arith.extui", [off], with_shape(T.int64, off.type.shape))
    return cx.b.op1("tt.addptr", [ptr, off], ptr.type)


_CMPI = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
_CMPF = {"==": 1, ">": 2, ">=": 3, "<": 4, "<=": 5, "!=": 13}  # arith.cmpf: oeq ogt oge olt ole une


def compare(cx: Ctx, op: str, a, b) -> Value:
    """`a op b` for ==, !=, <, <=, >, >=: an int1 value shaped like the broadcast operands (arith.cmpi signed or
    unsigned by the promoted type, arith.cmpf ordered for floats except != unordered, as Triton 3.6); two
    constexprs fold."""
    if isinstance(a, Constexpr) and isinstance(b, Constexpr):
        return fold(cx, op, a, b)
    # Triton 3.6's tensor comparison methods turn a Python number into a tensor first (core.py tensor.__lt__:
    # `_semantic.to_tensor(other)`), so `x_fp16 > 0.5` compares in fp32 and `y_int16 != 0` in int32.
    va, vb, ct = binary_operands(cx, a, b, allow_ptr=True, weak=False)
    rt = with_shape(T.int1, va.type.shape)
    if ct is None or ct.is_int():
        pred = _CMPI[op]
        if ct is None or ct.is_unsigned():
            pred += 4 if op in ("<", "<=", ">", ">=") else 0  # slt→ult ...
        return cx.b.op1("arith.cmpi", [va, vb], rt, {"predicate": f"{pred} : i64"})
    return cx.b.op1("arith.cmpf", [va, vb], rt, {"predicate": f"{_CMPF[op]} : i64", **FM})


def unary(cx: Ctx, op: str, v):
    """`-v`, `+v`, `~v`, `not v` (Triton: minus is 0 - v for ints, negf for floats)."""
    if isinstance(v, Constexpr):
        try:
            return Constexpr({"-": operator.neg, "+": operator.pos, "~": operator.invert,
                              "not": operator.not_}[op](v.value))
        except TypeError as e:
            fail(cx, f"cannot evaluate {op} {v.value!r}: {e}")
    st = v.type.scalar
    if op == "+":
        return v
    if op == "-":
        if st.is_ptr():
            fail(cx, "cannot negate a pointer")
        # Triton lowers minus as `zero of v's own type - v` (floats too: its TTIR→TTGIR conversion
        # has no arith.negf), so -bool stays bool.
        zero = cx.b.constant(0.0 if st.is_float() else 0, v.type)
        return binary(cx, "-", zero, v)
    if op == "~":
        if not st.is_int():
            fail(cx, f"operator ~ needs an integer, got {st}")
        return binary(cx, "^", v, Constexpr(-1 if not st.is_unsigned() else (1 << st.bits) - 1))
    if op == "not":
        return compare(cx, "==", v, Constexpr(0))
    fail(cx, f"unsupported unary operator {op}")


def minmax(cx, x, y, is_max: bool):
    """max (`is_max`) or min of `x` and `y` after promotion: arith.maxnumf / minnumf for floats, arith.max / min
    signed or unsigned for integers; two constexprs fold in Python."""
    if isinstance(x, Constexpr) and isinstance(y, Constexpr):
        return Constexpr(max(x.value, y.value) if is_max else min(x.value, y.value))
    vx, vy, ct = binary_operands(cx, x, y)
    if ct.is_float():
        name = "arith.maxnumf" if is_max else "arith.minnumf"
        return cx.b.op1(name, [vx, vy], vx.type, FM)
    sign = "u" if ct.is_unsigned() else "s"
    return cx.b.op1(f"arith.{'max' if is_max else 'min'}{sign}i", [vx, vy], vx.type)
