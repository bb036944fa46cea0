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


def _fp_to_fp(ctx, op):
    """Float conversions among f16/bf16/f32/f64 (round to nearest even when narrowing; the
    `rounding` attribute's RTZ form and fp8 are not supported yet)."""
    b = ctx.builder
    t = _result_type(op)
    src = mu.elem_str(op.operands[0].type)
    if "f8" in src or "f8" in mu.elem_str(op.results[0].type):
        raise NotSupportedYet("tt.fp_to_fp with fp8", None, "llir")
    p = mu.props(op)
    if "rounding" in p and mu.int_attr(p["rounding"]) != 1:
        raise NotSupportedYet("tt.fp_to_fp rounding other than rtne", None, "llir")
    bits = {"half": 16, "bfloat": 16, "float": 32, "double": 64}

    def conv(x):
        if bits[str(x.type)] == bits[str(t)]:  # f16 <-> bf16: through f32
            x = b.fpext(x, F32)
        return b.fpext(x, t) if bits[str(x.type)] < bits[str(t)] else b.fptrunc(x, t)
    return conv


_elementwise(["tt.fp_to_fp"], _fp_to_fp)


@rule("gpu.barrier")
def gpu_barrier(ctx, op):
    """tl.debug_barrier(): every thread of the CTA meets."""
    ctx.barrier()
