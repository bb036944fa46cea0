"""Lowering rules for the core `tl.*` builtins and tensor methods (program ids, load/store, constructors, casts, math, hints), one `rule(cx, *args, **kwargs)` each.

Parameter names and defaults mirror `triton.language` (Triton 3.6) so keyword calls such as
`tl.load(p, mask=m, other=0.0)` bind the same way. Arguments arrive as `Constexpr` or IR `Value`;
defaults arrive as plain Python values (`cval` accepts both).
"""

from __future__ import annotations

from . import blockptr
from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval, dtype_arg, mask_other, pointer_arg, shape_arg, tensor
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


# triton::CacheModifier values of the modifiers each access accepts, and triton::EvictionPolicy's;
# anything else is refused with Triton 3.6's message (semantic._str_to_load_cache_modifier,
# _str_to_store_cache_modifier, _str_to_eviction_policy)
_LOAD_CACHE = {"": 1, ".ca": 2, ".cg": 3, ".cv": 7}
_STORE_CACHE = {"": 1, ".wb": 4, ".cg": 3, ".cs": 5, ".wt": 6}
_EVICT = {"": 1, "evict_first": 2, "evict_last": 3}


@builtin("program_id")
def program_id(cx, axis):
    """`tl.program_id(axis)`: the block's index along grid axis 0, 1 or 2 as an int32 scalar (tt.get_program_id).
    Fails (CompileError at the call) for another axis."""
    a = cval(cx, axis, "axis")
    if a not in (0, 1, 2):
        fail(cx, f"program_id axis must be 0, 1 or 2, got {a!r}")
    return cx.b.op1("tt.get_program_id", [], T.int32, {"axis": f"{a} : i32"})


@builtin("num_programs")
def num_programs(cx, axis):
    """`tl.num_programs(axis)`: the grid's size along axis 0, 1 or 2 as an int32 scalar (tt.get_num_programs). Fails
    for another axis."""
    a = cval(cx, axis, "axis")
    if a not in (0, 1, 2):
        fail(cx, f"num_programs axis must be 0, 1 or 2, got {a!r}")
    return cx.b.op1("tt.get_num_programs", [], T.int32, {"axis": f"{a} : i32"})


@builtin("arange")
def arange(cx, start, end):
    """`tl.arange(start, end)`: int32 block [start, end) of shape (end - start,). As Triton 3.6 semantic.arange:
    constexpr ints, end - start a power of two, 0 <= start and end < 2**31, else a CompileError."""
    s, e = cval(cx, start, "arange start"), cval(cx, end, "arange end")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (s, e)):
        fail(cx, f"arange bounds must be integers, got {s!r} and {e!r}")
    n = e - s
    if n <= 0 or n & (n - 1):
        fail(cx, f"arange's range must be a power of two, got {e} - {s} = {n}")
    if not (0 <= s and e <= 2**31 - 1):
        fail(cx, f"arange bounds must fit in int32, got [{s}, {e})")
    return cx.b.op1("tt.make_range", [], T.BlockType(T.int32, (n,)), {"start": f"{s} : i32", "end": f"{e} : i32"})


@builtin("load")
def load(cx, pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    """`tl.load`: a scalar or block of the pointer's element type, shaped like `pointer` (broadcast with mask and
    other), tt.load with Triton 3.6's cache, eviction and volatile attributes; a block pointer loads through
    blockptr.load_block (boundary_check, padding_option). Fails for a non-pointer or bad modifier."""
    if isinstance(pointer, blockptr.BlockPtr):
        return blockptr.load_block(cx, pointer, mask, other, boundary_check, padding_option, load,
                                   cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
    ptr = _bool_as_i8(cx, pointer_arg(cx, pointer, "tl.load"))
    mask, other = mask_other(cx, ptr, mask, other)
    cache, evict = _modifiers(cx, cache_modifier, eviction_policy, _LOAD_CACHE)
    operands = [ptr] + ([mask] if mask else []) + ([other] if other else [])
    rt = S.with_shape(ptr.type.scalar.element, ptr.type.shape)
    loaded = cx.b.op1("tt.load", operands, rt, {
        "boundaryCheck": "array<i32>", "cache": f"{cache} : i32", "evict": f"{evict} : i32",
        "isVolatile": "true" if cval(cx, volatile, "volatile") else "false",
        "operandSegmentSizes": f"array<i32: 1, {int(bool(mask))}, {int(bool(other))}>"})
    return S.cast(cx, loaded, T.int1) if pointer.type.scalar.element.is_bool() else loaded


def _modifiers(cx, cache_modifier, eviction_policy, accepted: dict) -> tuple[int, int]:
    """(triton::CacheModifier, triton::EvictionPolicy) values of a load's or store's options
    (`accepted`: its cache modifiers); a falsy value (None, "") means none, as Triton 3.6's
    semantic reads it, and anything else fails with its message."""
    cm = cval(cx, cache_modifier, "cache_modifier") or ""
    ep = cval(cx, eviction_policy, "eviction_policy") or ""
    if cm not in accepted:
        fail(cx, f"Cache modifier {cm} not supported")
    if ep not in _EVICT:
        fail(cx, f"Eviction policy {ep} not supported")
    return accepted[cm], _EVICT[ep]


def _bool_as_i8(cx, ptr: Value) -> Value:
    """Triton keeps bools as bytes in memory: a `*i1` pointer is used as `*i8` (tt.bitcast),
    stores widen the value to i8 and loads compare the byte with 0 (`semantic._load_legacy`)."""
    if not ptr.type.scalar.element.is_bool():
        return ptr
    return S.cast(cx, ptr, T.PointerType(T.DTYPES["int8"]))


@builtin("store")
def store(cx, pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """`tl.store`: tt.store of `value` cast to the pointer's element type and broadcast to its shape, under `mask`; a
    block pointer stores through blockptr.store_block. Returns Constexpr(None). Fails for a non-pointer, a bad
    modifier or an impossible cast."""
    if isinstance(pointer, blockptr.BlockPtr):
        return blockptr.store_block(cx, pointer, value, mask, boundary_check, store,
                                    cache_modifier=cache_modifier, eviction_policy=eviction_policy)
    ptr = _bool_as_i8(cx, pointer_arg(cx, pointer, "tl.store"))
    elt = ptr.type.scalar.element
    val = S.broadcast_to(cx, S.cast(cx, value, elt) if isinstance(value, Value) else
                         S.to_value(cx, value, elt), ptr.type.shape)
    mask, _ = mask_other(cx, ptr, mask, None)
    cache, evict = _modifiers(cx, cache_modifier, eviction_policy, _STORE_CACHE)
    cx.b.op("tt.store", [ptr, val] + ([mask] if mask else []), [], {
        "boundaryCheck": "array<i32>", "cache": f"{cache} : i32", "evict": f"{evict} : i32"})
    return Constexpr(None)


@builtin("cdiv")
def cdiv(cx, x, div):
    """`tl.cdiv(x, div)`: (x + div - 1) // div, with Triton's promotion of the operands (core.cdiv)."""
    return S.binary(cx, "//", S.binary(cx, "-", S.binary(cx, "+", x, div), Constexpr(1)), div)


@builtin("core.get_int_dtype")
def get_int_dtype(cx, bitwidth, signed):
    """`tl.core.get_int_dtype(bitwidth, signed)`: the integer dtype of that width and signedness (int1 for a width
    of 1, whatever `signed`), a constexpr. Triton 3.6 language/core.py get_int_dtype, a plain function its code
    generator runs at compile time; any other width fails with its message. Triton's `tl` does not re-export it,
    so `tl.get_int_dtype` stays unknown."""
    bits, sign = cval(cx, bitwidth, "bitwidth"), cval(cx, signed, "signed")
    if bits == 1:
        return Constexpr(T.int1)
    if bits in (8, 16, 32, 64):
        return Constexpr(T.DTYPES[("int" if sign else "uint") + str(bits)])
    fail(cx, f"Unsupported bitwidth {bits} and signedness {sign}")


@builtin("full")
def full(cx, shape, value, dtype):
    """`tl.full(shape, value, dtype)`: a block of `shape` filled with `value` as `dtype` (an arith.constant when
    value is a constexpr, a splat of the cast value otherwise); shape () gives a scalar."""
    s, d = shape_arg(cx, shape), dtype_arg(cx, dtype)
    if isinstance(value, Constexpr):
        # a shape of () is a scalar, not a 0-d block (Triton 3.6 `semantic.splat` returns the value)
        return cx.b.constant(cval(cx, value, "value"), S.with_shape(d, s))
    return S.broadcast_to(cx, S.cast(cx, value, d), s)


@builtin("zeros")
def zeros(cx, shape, dtype):
    """`tl.zeros(shape, dtype)`: tl.full(shape, 0, dtype)."""
    return full(cx, shape, Constexpr(0), dtype)


@builtin("zeros_like")
def zeros_like(cx, input):
    """`tl.zeros_like(input)`: zeros of `input`'s type (shape and dtype). Fails when `input` is not a tensor."""
    if not isinstance(input, Value):
        fail(cx, f"tl.zeros_like needs a tensor, got {S.describe(input)}")
    x = input
    return cx.b.constant(0, x.type)


@builtin("cast")
def cast(cx, input, dtype, fp_downcast_rounding=None, bitcast=False):
    """`tl.cast(input, dtype)`: `input` converted to `dtype` (a dtype or a pointer type) by Triton 3.6
    semantic.cast's rules; `bitcast` reinterprets bits of the same width, `fp_downcast_rounding` ("rtne" or "rtz")
    rounds a float narrowing."""
    # A pointer type is a valid target too (`x.to(tl.pointer_type(tl.float16))`: int -> pointer).
    dst = cval(cx, dtype, "dtype")
    dst = dst if isinstance(dst, T.PointerType) else dtype_arg(cx, dtype)
    return S.cast(cx, tensor(cx, input, "input"), dst, bitcast=cval(cx, bitcast, "bitcast"),
                  rounding=cval(cx, fp_downcast_rounding, "fp_downcast_rounding"))


@builtin(method="to")
def to(cx, input, dtype, fp_downcast_rounding=None, bitcast=False):
    """`x.to(dtype, ...)`: the same as tl.cast."""
    return cast(cx, input, dtype, fp_downcast_rounding, bitcast)


@builtin("where")
def where(cx, condition, x, y):
    """`tl.where(condition, x, y)`: elementwise select (arith.select) after broadcasting the three and promoting x
    and y together (pointers allowed); a non-boolean condition is cast to int1 with Triton's deprecation warning."""
    c = tensor(cx, condition, "condition")
    if not c.type.scalar.is_bool():
        # Triton 3.6 semantic.where, word for word
        S.warn(cx, f"tl.where with a non-boolean condition is deprecated and will error out in a future "
                   f"triton release. Got {c.type.scalar}")
        c = S.cast(cx, c, T.int1)
    vx, vy, _ = S.binary_operands(cx, x, y, allow_ptr=True)
    shape = T.broadcast_shapes(c.type.shape, vx.type.shape)
    vx, vy = S.broadcast_to(cx, vx, shape), S.broadcast_to(cx, vy, shape)
    return cx.b.op1("arith.select", [S.broadcast_to(cx, c, shape), vx, vy], vx.type)


def _minmax_args(cx, x, y):
    # Triton `core.maximum`: numbers become tensors first (so they do take part in promotion:
    # maximum(fp16 block, 0.0) is fp32), and bf16 widens to fp32 (no bf16 max/min in hardware).
    out = []
    for v in (x, y):
        v = tensor(cx, v, "operand")
        out.append(S.cast(cx, v, T.fp32) if v.type.scalar == T.bf16 else v)
    return out


@builtin("maximum", "math.max")
def maximum(cx, x, y, propagate_nan=0):
    """`tl.maximum(x, y)`: elementwise max after promotion (bf16 computes in fp32, Triton core.maximum):
    arith.maxnumf for floats, arith.maxsi / maxui for integers; `propagate_nan` is accepted and not used."""
    return S.minmax(cx, *_minmax_args(cx, x, y), True)


@builtin("minimum", "math.min")
def minimum(cx, x, y, propagate_nan=0):
    """`tl.minimum(x, y)`: elementwise min, promoted as tl.maximum."""
    return S.minmax(cx, *_minmax_args(cx, x, y), False)


def _float_unary(math_op: str):
    # Triton's math functions follow libdevice and take fp32/fp64 only (`math._check_dtype`):
    # an fp16 block must be cast explicitly, so the user sees where precision changes.
    def rule(cx, x):
        """The `tl.<fn>` rule of one math op: fp32 or fp64 blocks only (Triton's math._check_dtype); fails otherwise,
        asking for an explicit cast."""
        v = tensor(cx, x, "x")
        if v.type.scalar not in (T.fp32, T.fp64):
            fail(cx, f"tl.{math_op.split('.')[1]} expects dtype fp32 or fp64 but got {v.type.scalar}; "
                     f"cast with .to(tl.float32)")
        return cx.b.op1(math_op, [v], v.type, S.FM)
    return rule


MATH_UNARY: dict = {}  # name -> rule, for rules that call tl.exp & co. (sigmoid, random)
for _name, _op in {"exp": "math.exp", "exp2": "math.exp2", "log": "math.log", "log2": "math.log2",
                   "sqrt": "math.sqrt", "rsqrt": "math.rsqrt", "sin": "math.sin", "cos": "math.cos",
                   "floor": "math.floor", "ceil": "math.ceil", "erf": "math.erf"}.items():
    MATH_UNARY[_name] = builtin(_name, f"math.{_name}", method=_name)(_float_unary(_op))


@builtin("abs", "math.abs", method="abs")
def abs_(cx, x):
    """`tl.abs(x)`: math.absf for floats, math.absi for signed integers, `x` itself for unsigned ones."""
    v = tensor(cx, x, "x")
    st = v.type.scalar
    if st.is_float():
        return cx.b.op1("math.absf", [v], v.type, S.FM)
    if st.is_unsigned():
        return v
    return cx.b.op1("math.absi", [v], v.type)


@builtin("fma", "math.fma")
def fma(cx, x, y, z):
    """`tl.fma(x, y, z)`: x * y + z fused (math.fma) after promoting and broadcasting the three operands."""
    vx, vy, _ = S.binary_operands(cx, x, y)
    vx, vz, _ = S.binary_operands(cx, vx, z)
    vx, vy = S.broadcast_pair(cx, vx, vy)
    return cx.b.op1("math.fma", [vx, vy, vz], vx.type, S.FM)


@builtin("sigmoid", method="sigmoid")
def sigmoid(cx, x):
    """`tl.sigmoid(x)`: 1 / (1 + exp(-x)), as Triton's standard.sigmoid spells it (fp32 or fp64 input)."""
    v = tensor(cx, x, "x")
    return S.binary(cx, "/", Constexpr(1.0), S.binary(cx, "+", Constexpr(1.0),
                                                       MATH_UNARY["exp"](cx, S.unary(cx, "-", v))))


def _hint(attr: str, what: str):
    def rule(cx, input, values):
        """Triton `semantic.multiple_of` & co.: a per-dimension i32 list set as a discardable
        attribute (`tt.divisibility = dense<16> : tensor<1xi32>`) on the op defining `input`."""
        v = tensor(cx, input, "input")
        vals = cval(cx, values, "values")
        vals = [vals] if isinstance(vals, int) else list(vals)
        if max(1, len(v.type.shape)) != len(vals) or not all(isinstance(x, int) and x > 0 for x in vals):
            fail(cx, f"tl.{what} needs one positive int per dimension of {v.type}, got {vals}")
        dense = vals[0] if len(set(vals)) == 1 else "[" + ", ".join(map(str, vals)) + "]"
        cx.b.set_attr(v, attr, f"dense<{dense}> : tensor<{len(vals)}xi32>")
        return v
    return rule


for _attr, _what in (("tt.divisibility", "multiple_of"), ("tt.contiguity", "max_contiguous"),
                     ("tt.constancy", "max_constancy")):
    builtin(_what)(_hint(_attr, _what))


@builtin("static_assert")
def static_assert(cx, cond, msg=""):
    """`tl.static_assert(cond, msg)`: a CompileError "static_assert failed: msg" when the constexpr `cond` is false."""
    if not cval(cx, cond, "static_assert condition"):
        fail(cx, f"static_assert failed: {cval(cx, msg, 'msg')}")
    return Constexpr(None)


@builtin("static_print")
def static_print(cx, *values, sep=" ", end="\n", file=None, flush=False):
    """`tl.static_print(...)`: accepted and ignored (it prints at compile time in Triton and emits no IR)."""
    return Constexpr(None)  # compile-time printing has no effect on the IR


@builtin("debug_barrier")
def debug_barrier(cx):
    """`tl.debug_barrier()`: a gpu.barrier (bar.sync 0 across the block's threads)."""
    cx.b.op("gpu.barrier", [], [])
    return Constexpr(None)
