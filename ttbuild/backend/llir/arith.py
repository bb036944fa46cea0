"""LLIR rules for `arith.*` and `math.*`: one elementwise emitter per op, applied to each element.

Semantics: MLIR arith dialect docs (predicate numbering of CmpIPredicate / CmpFPredicate);
math.exp lowers as Triton does for f32 (ex2.approx with a log2(e) pre-scale); exp2/log/log2 use libdevice.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import ARITH, MATH
from ttbuild.backend.llir.context import F32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.elementwise import elementwise, result_type
from ttbuild.errors import CompilationError
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _elementwise(names, make):
    elementwise(RULES, names, make)  # this module's rules: `make(ctx, op) -> fn(*scalars)`


_FBIN = {ARITH.ADDF: "fadd", ARITH.SUBF: "fsub", ARITH.MULF: "fmul", ARITH.DIVF: "fdiv",
         ARITH.REMF: "frem"}
_FAST_F32 = {ARITH.DIVF, MATH.SQRT}  # f32 forms Triton lowers to PTX's full-range approximations
for _n, _m in _FBIN.items():
    if _n == ARITH.DIVF:
        _elementwise([_n], lambda ctx, op: _divf(ctx, op))
        continue

    def _mk(ctx, op, _m=_m):
        flags = ("contract",) if ctx.fp_fusion and _m in ("fadd", "fsub", "fmul") else ()
        return lambda a, b: getattr(ctx.builder, _m)(a, b, flags=flags)
    _elementwise([_n], _mk)

_IBIN = {ARITH.ADDI: "add", ARITH.SUBI: "sub", ARITH.MULI: "mul", ARITH.DIVSI: "sdiv",
         ARITH.DIVUI: "udiv", ARITH.REMSI: "srem", ARITH.REMUI: "urem", ARITH.ANDI: "and_",
         ARITH.ORI: "or_", ARITH.XORI: "xor", ARITH.SHLI: "shl", ARITH.SHRSI: "ashr",
         ARITH.SHRUI: "lshr"}
for _n, _m in _IBIN.items():
    _elementwise([_n], lambda ctx, op, _m=_m: (lambda a, b: getattr(ctx.builder, _m)(a, b)))

_ICMP = {0: ("s", "=="), 1: ("s", "!="), 2: ("s", "<"), 3: ("s", "<="), 4: ("s", ">"), 5: ("s", ">="),
         6: ("u", "<"), 7: ("u", "<="), 8: ("u", ">"), 9: ("u", ">=")}


def _cmpi(ctx, op):
    kind, pred = _ICMP[mu.int_attr(op.attributes["predicate"])]
    f = ctx.builder.icmp_signed if kind == "s" else ctx.builder.icmp_unsigned
    return lambda a, b: f(pred, a, b)


_elementwise([ARITH.CMPI], _cmpi)

# CmpFPredicate: 0 false, 1-6 ordered (eq gt ge lt le ne), 7 ord, 8-13 unordered, 14 uno, 15 true.
_FCMP = {1: ("o", "=="), 2: ("o", ">"), 3: ("o", ">="), 4: ("o", "<"), 5: ("o", "<="), 6: ("o", "!="),
         7: ("o", "ord"), 8: ("u", "=="), 9: ("u", ">"), 10: ("u", ">="), 11: ("u", "<"),
         12: ("u", "<="), 13: ("u", "!="), 14: ("u", "uno")}


def _cmpf(ctx, op):
    p = mu.int_attr(op.attributes["predicate"])
    if p in (0, 15):
        return lambda a, b: ir.Constant(ir.IntType(1), int(p == 15))
    kind, pred = _FCMP[p]
    f = ctx.builder.fcmp_ordered if kind == "o" else ctx.builder.fcmp_unordered
    return lambda a, b: f(pred, a, b)


_elementwise([ARITH.CMPF], _cmpf)
_elementwise([ARITH.SELECT], lambda ctx, op: ctx.builder.select)

_CASTS = {ARITH.EXTF: "fpext", ARITH.TRUNCF: "fptrunc", ARITH.SITOFP: "sitofp",
          ARITH.UITOFP: "uitofp", ARITH.FPTOSI: "fptosi", ARITH.FPTOUI: "fptoui",
          ARITH.EXTSI: "sext", ARITH.EXTUI: "zext", ARITH.TRUNCI: "trunc",
          ARITH.BITCAST: "bitcast"}
for _n, _m in _CASTS.items():
    _elementwise([_n], lambda ctx, op, _m=_m: (
        lambda a, _t=result_type(op): getattr(ctx.builder, _m)(a, _t)))  # noqa: B008  (bound once per op)

_elementwise([ARITH.NEGF], lambda ctx, op: ctx.builder.fneg)


def _min_max(signed_pred):
    def make(ctx, op):
        """The integer max / min of one op: a compare (signed or unsigned, as `signed_pred` says) and a select."""
        b = ctx.builder
        kind, pred = signed_pred
        f = b.icmp_signed if kind == "s" else b.icmp_unsigned
        return lambda x, y: b.select(f(pred, x, y), x, y)
    return make


for _n, _p in {ARITH.MAXSI: ("s", ">"), ARITH.MINSI: ("s", "<"), ARITH.MAXUI: ("u", ">"),
               ARITH.MINUI: ("u", "<")}.items():
    _elementwise([_n], _min_max(_p))


def _intrinsic_call(base):
    """LLVM's overloaded float intrinsics (`llvm.maximum.f32`, `llvm.sqrt.f16`, ...)."""
    def make(ctx, op):
        """The `llvm.<base>.<f16|bf16|f32|f64>` intrinsic call for one op's result type."""
        t = result_type(op)
        suffix = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[str(t)]
        def call(*xs):
            """Call the intrinsic on the operands `xs` (all of the result type)."""
            fn = ctx.intrinsic(f"llvm.{base}.{suffix}", t, [t] * len(xs))
            return ctx.builder.call(fn, list(xs))
        return call
    return make


for _n, _b in {ARITH.MAXIMUMF: "maximum", ARITH.MINIMUMF: "minimum", ARITH.MAXNUMF: "maxnum",
               ARITH.MINNUMF: "minnum", MATH.ABSF: "fabs",
               MATH.FLOOR: "floor", MATH.CEIL: "ceil", MATH.FMA: "fma"}.items():
    _elementwise([_n], _intrinsic_call(_b))


def _approx(nvvm_name, pre_scale, post_scale):
    """f32 via PTX's approximate base-2 units (ex2.approx.f32 / lg2.approx.f32), as Triton does;
    f16/bf16 go through f32 and back."""
    def make(ctx, op):
        """The approximate unit call of one op: x (widened to f32) times `pre_scale`, the nvvm intrinsic, times
        `post_scale`, narrowed back."""
        b = ctx.builder
        t = result_type(op)
        fn = ctx.intrinsic(nvvm_name, F32, [F32])
        def call(x):
            """The approximate result for one element `x`."""
            y = b.fpext(x, F32) if t != F32 else x
            if pre_scale != 1.0:  # may fuse with the producer (Triton emits a plain mul.f32)
                y = b.fmul(y, ir.Constant(F32, pre_scale), flags=("contract",) if ctx.fp_fusion else ())
            y = b.call(fn, [y])
            if post_scale != 1.0:
                y = b.fmul(y, ir.Constant(F32, post_scale))
            return b.fptrunc(y, t) if t != F32 else y
        if str(t) == "double":
            raise CompilationError(f"{op.operation.name} on f64 is not supported yet", stage="llir")
        return call
    return make


_elementwise([MATH.EXP], _approx("llvm.nvvm.ex2.approx.f", 1.0 / math.log(2.0), 1.0))
# math.exp2 / log / log2 go through libdevice (math_ops.LIBDEVICE), as Triton 3.6 lowers them:
# tl.randn's Box-Muller log must round as Triton's __nv_logf does for bit-identical output.


def fp8_bits(v: float, elem: str) -> int:
    """A float rounded to nearest even as an fp8 byte: e5m2 (bias 15, IEEE-like) or e4m3fn
    (bias 7, no infinities, saturating at 448), per the OCP FP8 formats."""
    import math
    import struct
    if elem == "f8E5M2":
        h = struct.unpack("<H", struct.pack("<e", v))[0]
        return ((h + 0x7F + ((h >> 8) & 1)) >> 8) & 0xFF
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a != a:
        return sign | 0x7F
    if a == 0:
        return sign
    m, e = math.frexp(a)           # a = m 2^e, 0.5 <= m < 1
    exp = e - 1 + 7
    if exp < 1:                    # subnormal: multiples of 2^-9
        q = round(a / 2.0 ** -9)
        return sign | q if q < 8 else sign | 0x08
    q = round((2 * m - 1) * 8)
    if q == 8:
        exp, q = exp + 1, 0
    if exp > 15 or (exp == 15 and q > 6):
        return sign | 0x7E         # saturate to 448
    return sign | (exp << 3) | q


@rule(ARITH.CONSTANT)
def constant(ctx, op):
    """Scalars and splat dense tensors; a non-splat dense tensor is not supported yet."""
    res = op.results[0]
    attr = op.attributes["value"]
    t = llvm_type(mu.elem_str(res.type))
    shape = mu.shape_of(res.type)
    if shape:
        dense = mu.ir.DenseElementsAttr(attr)
        if not dense.is_splat:
            from ttbuild.errors import NotSupportedYet
            raise NotSupportedYet("arith.constant (non-splat dense)", None, "llir")
        attr = dense.get_splat_value()
    elem = mu.elem_str(res.type)
    if elem in ("f8E4M3FN", "f8E5M2"):  # fp8 lives in bytes (context.llvm_type)
        c = ir.Constant(t, fp8_bits(mu.ir.FloatAttr(attr).value, elem))
    elif isinstance(t, ir.IntType):
        v = mu.ir.IntegerAttr(attr).value
        c = ir.Constant(t, v & ((1 << t.width) - 1))
    else:
        c = ir.Constant(t, mu.ir.FloatAttr(attr).value)
    if not shape:
        return c
    layout = layout_of(res)
    return TensorVal([c] * layout.elems_per_thread(shape), layout, shape)


def _divf(ctx, op):
    """f32: `div.full.f32` (2 ulp, full range; Triton's FDivOpConversion), other types: IEEE fdiv.
    `tl.math.div_rn` is the frontend's way to ask for the rounded form."""
    b = ctx.builder
    if result_type(op) != F32:
        return lambda x, y: b.fdiv(x, y)
    ftype = ir.FunctionType(F32, [F32, F32])
    return lambda x, y: b.asm(ftype, "div.full.f32 $0, $1, $2;", "=r,r,r", [x, y], side_effect=False)


def _sqrt(ctx, op):
    """f32: `sqrt.approx.ftz.f32` (Triton's math.sqrt lowering); other types: llvm.sqrt."""
    b = ctx.builder
    t = result_type(op)
    if t == F32:
        fn = ctx.intrinsic("llvm.nvvm.sqrt.approx.ftz.f", F32, [F32])
        return lambda x: b.call(fn, [x])
    return _intrinsic_call("sqrt")(ctx, op)


def _rsqrt(ctx, op):
    """`rsqrt.approx.ftz.f32` (Triton's math.rsqrt); f16/bf16 through f32."""
    b = ctx.builder
    t = result_type(op)
    if str(t) == "double":
        fn = ctx.intrinsic("llvm.nvvm.rsqrt.approx.d", t, [t])
        return lambda x: b.call(fn, [x])
    fn = ctx.intrinsic("llvm.nvvm.rsqrt.approx.ftz.f", F32, [F32])

    def call(x):
        """rsqrt.approx.ftz.f32 of `x`, f16 / bf16 through f32 and back."""
        y = b.call(fn, [b.fpext(x, F32) if t != F32 else x])
        return b.fptrunc(y, t) if t != F32 else y
    return call


def _div_rn(ctx, op):
    b = ctx.builder
    return lambda x, y: b.fdiv(x, y)


_elementwise([MATH.SQRT], _sqrt)
_elementwise([MATH.RSQRT], _rsqrt)
