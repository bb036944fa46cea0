"""LLIR rules for `math.*` through libdevice and Triton's own math ops: math.absi, tt.mulhiui, tt.clampf, tt.precise_divf, tt.precise_sqrt.

libdevice: functions `__nv_<name>f` (f32) / `__nv_<name>` (f64) from NVIDIA's libdevice.10.bc,
declared here and linked in by ttbuild.backend.nvptx before the O3 pipeline (Triton's
`tl.math` lowers the same way). f16/bf16 go through f32, as Triton's elementwise lowering does.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import MATH, TT
from ttbuild.backend.llir.context import F32, F64, llvm_type
from ttbuild.backend.llir.elementwise import elementwise, result_type
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _elementwise(names, make):
    elementwise(RULES, names, make)  # this module's rules: `make(ctx, op) -> fn(*scalars)`

# math op -> libdevice base name (Triton's tl.math, MLIR math dialect op names)
LIBDEVICE = {
    MATH.SIN: "sin", MATH.COS: "cos", MATH.TAN: "tan", MATH.ERF: "erf", MATH.ERFC: "erfc",
    MATH.ASIN: "asin", MATH.ACOS: "acos", MATH.ATAN: "atan", MATH.SINH: "sinh",
    MATH.COSH: "cosh", MATH.TANH: "tanh", MATH.ASINH: "asinh", MATH.ACOSH: "acosh",
    MATH.ATANH: "atanh", MATH.LOG1P: "log1p", MATH.EXPM1: "expm1", MATH.LOG10: "log10",
    MATH.CBRT: "cbrt", MATH.ROUND: "round", MATH.TRUNC: "trunc", MATH.ATAN2: "atan2",
    MATH.POWF: "pow", MATH.COPYSIGN: "copysign", MATH.ROUNDEVEN: "rint",
    MATH.LOG: "log", MATH.LOG2: "log2", MATH.EXP2: "exp2",
}


def _libdevice(base):
    def make(ctx, op):
        b = ctx.builder
        t = result_type(op)
        ct = F64 if str(t) == "double" else F32
        name = f"__nv_{base}" + ("f" if ct == F32 else "")
        n = len(op.operands)
        fn = ctx.intrinsic(name, ct, [ct] * n)

        def call(*xs):
            xs = [b.fpext(x, ct) if x.type != ct else x for x in xs]
            y = b.call(fn, xs)
            return b.fptrunc(y, t) if t != ct else y
        return call
    return make


for _n, _b in LIBDEVICE.items():
    _elementwise([_n], _libdevice(_b))


def _extern(ctx, op):
    """tt.extern_elementwise: a call of its `symbol` per element (libdevice's `__nv_*`, linked
    and inlined by ttbuild.backend.nvptx before O3), declared with the operand and result types."""
    from mlir import ir as mir

    b = ctx.builder
    symbol = mir.StringAttr(mu.props(op)["symbol"]).value
    args = [llvm_type(mu.elem_str(v.type)) for v in op.operands]
    fn = ctx.intrinsic(symbol, result_type(op), args)
    return lambda *xs: b.call(fn, list(xs))


_elementwise([TT.EXTERN_ELEMENTWISE], _extern)


def _absi(ctx, op):
    b = ctx.builder
    return lambda x: b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


_elementwise([MATH.ABSI], _absi)


def _mulhi(ctx, op):
    """High 32 bits of the 64-bit product (PTX mul.hi; Triton's tt.mulhiui for Philox)."""
    b = ctx.builder
    t = result_type(op)
    wide = ir.IntType(2 * t.width)
    sh = ir.Constant(wide, t.width)
    return lambda x, y: b.trunc(b.lshr(b.mul(b.zext(x, wide), b.zext(y, wide)), sh), t)


_elementwise([TT.MULHIUI], _mulhi)


def _clampf(ctx, op):
    """tt.clampf(x, lo, hi): min(max(x, lo), hi); propagateNan ALL (0xffff) keeps NaN operands
    (llvm.maximum/minimum = PTX max.NaN), NONE ignores them (maxnum/minnum), as Triton."""
    b = ctx.builder
    t = result_type(op)
    p = mu.props(op)
    nan = "propagateNan" in p and mu.int_attr(p["propagateNan"]) != 0
    suffix = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[str(t)]
    mx = ctx.intrinsic(f"llvm.{'maximum' if nan else 'maxnum'}.{suffix}", t, [t, t])
    mn = ctx.intrinsic(f"llvm.{'minimum' if nan else 'minnum'}.{suffix}", t, [t, t])
    return lambda x, lo, hi: b.call(mn, [b.call(mx, [x, lo]), hi])


_elementwise([TT.CLAMPF], _clampf)
# IEEE-rounded forms (tl.div_rn, tl.sqrt_rn): LLVM's fdiv / llvm.sqrt are div.rn / sqrt.rn on NVPTX.
_elementwise([TT.PRECISE_DIVF], lambda ctx, op: (lambda x, y: ctx.builder.fdiv(x, y)))


def _precise_sqrt(ctx, op):
    t = result_type(op)
    suffix = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[str(t)]
    fn = ctx.intrinsic(f"llvm.sqrt.{suffix}", t, [t])
    return lambda x: ctx.builder.call(fn, [x])


_elementwise([TT.PRECISE_SQRT], _precise_sqrt)
