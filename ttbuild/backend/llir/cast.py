"""LLIR rules for the casts Triton keeps in its own dialect: tt.bitcast, tt.ptr_to_int, tt.int_to_ptr, tt.fp_to_fp (fp8 through PTX cvt)."""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import F32, I32, I64, llvm_type
from ttbuild.backend.llir.elementwise import elementwise, result_type
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _elementwise(names, make):
    elementwise(RULES, names, make)  # this module's rules: `make(ctx, op) -> fn(*scalars)`

def _bitcast(ctx, op):
    b = ctx.builder
    t = result_type(op)
    return lambda x: x if x.type == t else b.bitcast(x, t)


_elementwise([TT.BITCAST], _bitcast)
_elementwise([TT.PTR_TO_INT], lambda ctx, op: (lambda x: ctx.builder.ptrtoint(x, I64)))
_elementwise([TT.INT_TO_PTR], lambda ctx, op: (lambda x: ctx.builder.inttoptr(x, llvm_type(mu.elem_str(op.results[0].type)))))


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
    t = result_type(op)
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


_elementwise([TT.FP_TO_FP], _fp_to_fp)
