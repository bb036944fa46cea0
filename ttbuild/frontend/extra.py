"""Less common `tl` builtins, each after Triton 3.6 `core`/`math`/`semantic`.

clamp (tt.clampf), fdiv, div_rn (tt.precise_divf), sqrt_rn (tt.precise_sqrt), umulhi (tt.mulhiui), join (tt.join),
interleave (join + reshape), split (tt.split), cat (tt.cat), histogram (tt.histogram), pointer_type,
add/sub/mul (`tl.add(x, y)`: the operators), swizzle2d (Triton `standard.swizzle2d`).
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval, dtype_arg, tensor
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin

_NAN = {0: 0, 0xFFFF: 0xFFFF}  # triton::PropagateNan: NONE, ALL


def _tensors(cx, *vs):
    # The math functions here turn numbers into tensors first (`_semantic.to_tensor`), so numbers
    # take part in promotion, unlike `x + 1.0`.
    return [tensor(cx, v, "operand") for v in vs]


@builtin("clamp")
def clamp(cx, x, min, max, propagate_nan=0):
    """Float-only clamp: bf16 widened to fp32, then min/max and x promoted pairwise."""
    x, lo, hi = (S.cast(cx, v, T.fp32) if v.type.scalar == T.bf16 else v for v in _tensors(cx, x, min, max))
    lo, hi, _ = S.binary_operands(cx, lo, hi)
    x, lo, _ = S.binary_operands(cx, x, lo)
    x, hi, ct = S.binary_operands(cx, x, hi)
    if not ct.is_float():
        fail(cx, f"tl.clamp supports floating-point tensors only, got {ct}")
    nan = cval(cx, propagate_nan, "propagate_nan")
    if nan not in _NAN:
        fail(cx, f"propagate_nan must be tl.PropagateNan.NONE or ALL, got {nan!r}")
    lo, hi = S.broadcast_to(cx, lo, x.type.shape), S.broadcast_to(cx, hi, x.type.shape)
    return cx.b.op1("tt.clampf", [x, lo, hi], x.type, {"propagateNan": f"{nan} : i32"})


@builtin("fdiv", "math.fdiv")
def fdiv(cx, x, y, ieee_rounding=False):
    """Triton `semantic.fdiv`: float operands, broadcast but not promoted (same dtype required)."""
    a, b = _tensors(cx, x, y)
    if not (a.type.scalar.is_float() and b.type.scalar.is_float()):
        fail(cx, "both operands of fdiv must have floating scalar type")
    if a.type.scalar != b.type.scalar:
        fail(cx, f"fdiv operands must have the same dtype (no implicit promotion), got {a.type.scalar} "
                 f"and {b.type.scalar}")
    a, b = S.broadcast_pair(cx, a, b)
    return cx.b.op1("arith.divf", [a, b], a.type, S.FM)


@builtin("div_rn", "math.div_rn")
def div_rn(cx, x, y):
    """Triton `math.div_rn`: tensor arguments must be fp32 (numbers may be anything), then the
    usual promotion; the division itself must end up in fp32."""
    for v in (x, y):
        if isinstance(v, Value) and v.type.scalar != T.fp32:
            fail(cx, f"tl.div_rn expects dtype fp32 but got {v.type.scalar}")
    a, b, ct = S.binary_operands(cx, *_tensors(cx, x, y))
    if ct != T.fp32:
        fail(cx, f"tl.div_rn computes in fp32, but its operands promote to {ct}")
    return cx.b.op1("tt.precise_divf", [a, b], a.type)


@builtin("sqrt_rn", "math.sqrt_rn")
def sqrt_rn(cx, x):
    (v,) = _tensors(cx, x)
    if v.type.scalar != T.fp32:
        fail(cx, f"tl.sqrt_rn expects dtype fp32 but got {v.type.scalar}")
    return cx.b.op1("tt.precise_sqrt", [v], v.type)


@builtin("umulhi", "math.umulhi")
def umulhi(cx, x, y):
    a, b = _tensors(cx, x, y)
    for v in (a, b):
        if v.type.scalar.name not in ("int32", "int64", "uint32", "uint64"):
            fail(cx, f"tl.umulhi expects int32, int64, uint32 or uint64 but got {v.type.scalar}")
    a, b, _ = S.binary_operands(cx, a, b)
    return cx.b.op1("tt.mulhiui", [a, b], a.type)


@builtin("join", method="join")
def join(cx, a, b):
    """Stack two same-shaped blocks along a new minor dim of size 2 (scalars become [2])."""
    x, y = S.broadcast_pair(cx, *_tensors(cx, a, b))
    if x.type.scalar != y.type.scalar:
        fail(cx, f"tl.join needs operands of one dtype, got {x.type.scalar} and {y.type.scalar}")
    if not x.type.shape:
        x, y = S.splat(cx, x, (1,)), S.splat(cx, y, (1,))
        out = cx.b.op1("tt.join", [x, y], T.BlockType(x.type.scalar, (1, 2)))
        return cx.b.op1("tt.reshape", [out], T.BlockType(x.type.scalar, (2,)))
    return cx.b.op1("tt.join", [x, y], T.BlockType(x.type.scalar, x.type.shape + (2,)))


@builtin("interleave", method="interleave")
def interleave(cx, a, b):
    """Interleave two same-shaped blocks along their last dim: [..., N] x 2 -> [..., 2N], a's
    elements at even positions (Triton `standard.interleave`: join, then a reshape that merges the
    new dim into the last one; two scalars give a block of 2)."""
    c = join(cx, a, b)
    shape = c.type.shape
    if len(shape) == 1:
        return c
    return cx.b.op1("tt.reshape", [c], T.BlockType(c.type.scalar, shape[:-2] + (2 * shape[-2],)))


@builtin("split", method="split")
def split(cx, a):
    """Split a block whose minor dim is 2 into its two halves (tt.split, two results)."""
    if not isinstance(a, Value) or not a.type.shape or a.type.shape[-1] != 2:
        fail(cx, f"tl.split needs a block whose last dimension is 2, got {S.describe(a)}")
    rt = S.with_shape(a.type.scalar, a.type.shape[:-1])
    return tuple(cx.b.op("tt.split", [a], [rt, rt]))


@builtin("cat")
def cat(cx, input, other, can_reorder=False):
    """`tl.cat(a, b, can_reorder=True)`: two 1-D blocks of one dtype, concatenated (tt.cat). Triton 3.6
    `semantic.cat` asserts can_reorder (the lowering may reorder elements) and a 1-D first operand."""
    a, b = _tensors(cx, input, other)
    if not cval(cx, can_reorder, "can_reorder"):
        fail(cx, "current implementation of `cat` always may reorder elements")
    if len(a.type.shape) != 1 or len(b.type.shape) != 1:
        fail(cx, f"tl.cat joins 1-D blocks, got shapes {list(a.type.shape)} and {list(b.type.shape)}")
    if a.type.scalar != b.type.scalar:
        fail(cx, f"tl.cat needs operands of one dtype, got {a.type.scalar} and {b.type.scalar}")
    return cx.b.op1("tt.cat", [a, b], T.BlockType(a.type.scalar, (a.type.shape[0] + b.type.shape[0],)))


def _arith(op: str):
    def rule(cx, x, y, sanitize_overflow=True):
        # Triton `core.add`/`sub`/`mul` unwrap constexprs and call the operator's semantic rule,
        # which makes tensors of two numbers (no folding); sanitize_overflow acts in debug builds only
        if isinstance(x, Constexpr) and isinstance(y, Constexpr) and S.is_number(x) and S.is_number(y):
            x = S.to_value(cx, x)
        return S.binary(cx, op, x, y)
    return rule


builtin("add")(_arith("+"))
builtin("sub")(_arith("-"))
builtin("mul")(_arith("*"))


@builtin("swizzle2d")
def swizzle2d(cx, i, j, size_i, size_j, size_g):
    """Triton `standard.swizzle2d`: row-major (i, j) of a size_i x size_j grid to the column-major
    order of each group of size_g rows; returns (new_i, new_j). Same steps as Triton's @jit body."""
    from .builtins import minimum

    def b(op, x, y):
        return S.binary(cx, op, x, y)

    ij = b("+", b("*", i, size_j), j)
    size_gj = b("*", size_g, size_j)
    off_i = b("*", b("//", ij, size_gj), size_g)
    size_g = minimum(cx, b("-", size_i, off_i), size_g)
    ij = b("%", ij, size_gj)
    return b("+", off_i, b("%", ij, size_g)), b("//", ij, size_g)


@builtin("histogram", method="histogram")
def histogram(cx, input, num_bins, mask=None):
    """`tl.histogram(x, num_bins, mask=None)`: int32[num_bins] counts of the values of the 1-D
    integer block `x` (bins of width 1 from 0; elements where `mask` is false are not counted).
    Triton `semantic.histogram`: 1-D integer input, a boolean mask broadcast to it; its lowering
    bins a value by its low log2(max(num_bins, 32)) bits (HistogramOpToLLVM), so num_bins must
    be a power of two here."""
    x = tensor(cx, input, "input")
    if len(x.type.shape) != 1:
        fail(cx, "histogram only supports 1D input")
    if not x.type.scalar.is_int() or x.type.scalar.is_bool():
        fail(cx, "histogram only supports integer input")
    n = cval(cx, num_bins, "num_bins")
    if not isinstance(n, int) or n < 1 or n & (n - 1):
        fail(cx, f"tl.histogram needs num_bins a power of two, got {n!r}")
    operands = [x]
    if mask is not None and not (isinstance(mask, Constexpr) and mask.value is None):
        m = S.broadcast_to(cx, tensor(cx, mask, "mask"), x.type.shape)
        if not m.type.scalar.is_bool():
            fail(cx, "Mask must have boolean scalar type")
        operands.append(m)
    return cx.b.op1("tt.histogram", operands, T.BlockType(T.int32, (n,)))


@builtin("pointer_type")
def pointer_type(cx, element_ty, address_space=1, const=False):
    """`tl.pointer_type(tl.float16)`: the type of a global pointer to fp16, a constexpr usable as a
    cast target (`tl.load(table + g).to(tl.pointer_type(tl.float16))`, tutorial 08) and in
    comparisons. Only address space 1 (global) and non-const pointers, as `!tt.ptr<f16>` is."""
    if cval(cx, address_space, "address_space") != 1 or cval(cx, const, "const"):
        fail(cx, "tl.pointer_type supports global (address_space=1), non-const pointers only")
    return Constexpr(T.PointerType(dtype_arg(cx, element_ty, "element_ty")))

