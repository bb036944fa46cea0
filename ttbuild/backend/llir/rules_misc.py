"""LLIR rules for casts Triton keeps in its own dialect, barriers, and `math.*` through libdevice.

libdevice: functions `__nv_<name>f` (f32) / `__nv_<name>` (f64) from NVIDIA's libdevice.10.bc,
declared here and linked in by ttbuild.backend.nvptx before the O3 pipeline (Triton's
`tl.math` lowers the same way). f16/bf16 go through f32, as Triton's elementwise lowering does.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.llir.context import F32, F64, I32, I64, TensorVal, llvm_type
from ttbuild.backend.llir.registry import rule
from ttbuild.backend.llir.rules_arith import _elementwise, _result_type
from ttbuild.errors import NotSupportedYet

# math op -> libdevice base name (Triton's tl.math, MLIR math dialect op names)
LIBDEVICE = {
    "math.sin": "sin", "math.cos": "cos", "math.tan": "tan", "math.erf": "erf", "math.erfc": "erfc",
    "math.asin": "asin", "math.acos": "acos", "math.atan": "atan", "math.sinh": "sinh",
    "math.cosh": "cosh", "math.tanh": "tanh", "math.asinh": "asinh", "math.acosh": "acosh",
    "math.atanh": "atanh", "math.log1p": "log1p", "math.expm1": "expm1", "math.log10": "log10",
    "math.cbrt": "cbrt", "math.round": "round", "math.trunc": "trunc", "math.atan2": "atan2",
    "math.powf": "pow", "math.copysign": "copysign", "math.roundeven": "rint",
    "math.log": "log", "math.log2": "log2", "math.exp2": "exp2",
}


def _libdevice(base):
    def make(ctx, op):
        b = ctx.builder
        t = _result_type(op)
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


def _absi(ctx, op):
    b = ctx.builder
    return lambda x: b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


_elementwise(["math.absi"], _absi)


def _mulhi(ctx, op):
    """High 32 bits of the 64-bit product (PTX mul.hi; Triton's tt.mulhiui for Philox)."""
    b = ctx.builder
    t = _result_type(op)
    wide = ir.IntType(2 * t.width)
    sh = ir.Constant(wide, t.width)
    return lambda x, y: b.trunc(b.lshr(b.mul(b.zext(x, wide), b.zext(y, wide)), sh), t)


_elementwise(["tt.mulhiui"], _mulhi)


def _bitcast(ctx, op):
    b = ctx.builder
    t = _result_type(op)
    return lambda x: x if x.type == t else b.bitcast(x, t)


_elementwise(["tt.bitcast"], _bitcast)
_elementwise(["tt.ptr_to_int"], lambda ctx, op: (lambda x: ctx.builder.ptrtoint(x, I64)))
_elementwise(["tt.int_to_ptr"], lambda ctx, op: (lambda x: ctx.builder.inttoptr(x, llvm_type(mu.elem_str(op.results[0].type)))))


_F8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
I16 = ir.IntType(16)
F16 = ir.HalfType()


def _asm(b, ret, text, cons, args):
    return b.asm(ir.FunctionType(ret, [a.type for a in args]), text, cons, args, side_effect=False)


def _f8_to_f16(b, x, kind):
    """One fp8 byte -> half. e5m2 is the top byte of an f16 (exact); e4m3 through PTX
    `cvt.rn.f16x2.e4m3x2` (sm_89+, PTX ISA 9.7.9.21), low half taken."""
    w = b.zext(x, I16)
    if kind == "e5m2":
        return b.bitcast(b.shl(w, ir.Constant(I16, 8)), F16)
    h = _asm(b, I16, "{ .reg .b32 t; cvt.rn.f16x2.e4m3x2 t, $1; cvt.u16.u32 $0, t; }", "=h,h", [w])
    return b.bitcast(h, F16)


def _to_f8(b, x, kind, rtz):
    """f32/f16 -> one fp8 byte. Round to nearest even with saturation to the finite range
    (`cvt.rn.satfinite.<kind>x2`, Triton's choice); rtz exists for e5m2 only (Triton: the f16's
    top byte after an rz conversion to f16)."""
    src = str(x.type)
    if rtz:
        if kind != "e5m2":
            raise NotSupportedYet("tt.fp_to_fp to fp8e4nv with rtz rounding", None, "llir")
        if src == "float":
            x = b.bitcast(_asm(b, I16, "cvt.rz.f16.f32 $0, $1;", "=h,f", [x]), F16)
        elif src != "half":
            x = b.fptrunc(b.fpext(x, F32), F16) if src == "bfloat" else b.fptrunc(x, F16)
        return b.trunc(b.lshr(b.bitcast(x, I16), ir.Constant(I16, 8)), ir.IntType(8))
    if src == "half":
        w = b.zext(b.bitcast(x, I16), I32)
        r = _asm(b, I16, f"cvt.rn.satfinite.{kind}x2.f16x2 $0, $1;", "=h,r", [w])
    else:
        if src != "float":
            x = b.fpext(x, F32) if src in ("bfloat",) else b.fptrunc(x, F32)
        r = _asm(b, I16, f"cvt.rn.satfinite.{kind}x2.f32 $0, $1, $2;", "=h,f,f", [ir.Constant(F32, 0.0), x])
    return b.trunc(r, ir.IntType(8))


def _fp_to_fp(ctx, op):
    """Float conversions among fp8 (e4m3fn, e5m2), f16, bf16, f32, f64. Narrowing rounds to
    nearest even unless `rounding = 0` (rtz; Triton's RoundingMode RTZ=0, RTNE=1)."""
    b = ctx.builder
    t = _result_type(op)
    src = mu.elem_str(op.operands[0].type)
    dst = mu.elem_str(op.results[0].type)
    p = mu.props(op)
    rtz = "rounding" in p and mu.int_attr(p["rounding"]) == 0
    bits = {"half": 16, "bfloat": 16, "float": 32, "double": 64}

    def widen(x, to):
        if bits[str(x.type)] == bits[str(to)] and x.type != to:  # f16 <-> bf16: through f32
            x = b.fpext(x, F32)
        if x.type == to:
            return x
        return b.fpext(x, to) if bits[str(x.type)] < bits[str(to)] else b.fptrunc(x, to)

    def conv(x):
        if src in _F8:
            h = _f8_to_f16(b, x, _F8[src])
            return _to_f8(b, h, _F8[dst], rtz) if dst in _F8 else widen(h, t)
        if dst in _F8:
            return _to_f8(b, x, _F8[dst], rtz)
        if rtz and bits[str(t)] < bits[str(x.type)]:
            raise NotSupportedYet("tt.fp_to_fp rtz between wide float types", None, "llir")
        return widen(x, t)
    return conv


_elementwise(["tt.fp_to_fp"], _fp_to_fp)


@rule("gpu.barrier")
def gpu_barrier(ctx, op):
    """tl.debug_barrier(): every thread of the CTA meets."""
    ctx.barrier()


def _clampf(ctx, op):
    """tt.clampf(x, lo, hi): min(max(x, lo), hi); propagateNan ALL (0xffff) keeps NaN operands
    (llvm.maximum/minimum = PTX max.NaN), NONE ignores them (maxnum/minnum), as Triton."""
    b = ctx.builder
    t = _result_type(op)
    p = mu.props(op)
    nan = "propagateNan" in p and mu.int_attr(p["propagateNan"]) != 0
    suffix = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[str(t)]
    mx = ctx.intrinsic(f"llvm.{'maximum' if nan else 'maxnum'}.{suffix}", t, [t, t])
    mn = ctx.intrinsic(f"llvm.{'minimum' if nan else 'minnum'}.{suffix}", t, [t, t])
    return lambda x, lo, hi: b.call(mn, [b.call(mx, [x, lo]), hi])


_elementwise(["tt.clampf"], _clampf)
# IEEE-rounded forms (tl.div_rn, tl.sqrt_rn): LLVM's fdiv / llvm.sqrt are div.rn / sqrt.rn on NVPTX.
_elementwise(["tt.precise_divf"], lambda ctx, op: (lambda x, y: ctx.builder.fdiv(x, y)))


def _precise_sqrt(ctx, op):
    t = _result_type(op)
    suffix = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[str(t)]
    fn = ctx.intrinsic(f"llvm.sqrt.{suffix}", t, [t])
    return lambda x: ctx.builder.call(fn, [x])


_elementwise(["tt.precise_sqrt"], _precise_sqrt)
