"""`tl.inline_asm_elementwise` -> `tt.elementwise_inline_asm`, and programmatic dependent launch built on it (`tl.extra.cuda.gdc_wait`, `gdc_launch_dependents`), as Triton 3.6 emits them.

Sources: Triton 3.6 `triton/language/core.py` (inline_asm_elementwise: arguments broadcast to
one shape, one result per dtype, `pack` elements per asm instance) and
`triton/language/extra/cuda/gdc.py` (the PDL calls: `griddepcontrol.wait` and
`griddepcontrol.launch_dependents`, PTX ISA 9.7.12.15, sm_90 and newer).
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval, dtype_arg, tensor
from .irtext import mlir_string
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


def _string(cx, v, what: str) -> str:
    text = cval(cx, v, what)
    if not isinstance(text, str):
        fail(cx, f"{what} must be a string literal, got {text!r}")
    return text


@builtin("inline_asm_elementwise")
def inline_asm_elementwise(cx, asm, constraints, args, dtype, is_pure, pack):
    """Run `asm` (PTX with $0.. operands, `constraints` as LLVM's inline asm) once per element
    of the broadcast `args` (`pack` elements per instance); returns one tensor per dtype in
    `dtype` (a dtype or a tuple of them); elements narrower than 32 bits share registers in a
    pack (ttbuild/backend/llir/inline_asm.py). Raises CompilationError for non-literal
    strings, a bad `pack` or dtype."""
    text = _string(cx, asm, "inline_asm_elementwise asm")
    cons = _string(cx, constraints, "inline_asm_elementwise constraints")
    pure = cval(cx, is_pure, "inline_asm_elementwise is_pure")
    n = cval(cx, pack, "inline_asm_elementwise pack")
    if not isinstance(pure, bool):
        fail(cx, f"inline_asm_elementwise is_pure must be a bool, got {pure!r}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        fail(cx, f"inline_asm_elementwise pack must be a positive int, got {n!r}")
    items = args.value if isinstance(args, Constexpr) and isinstance(args.value, (tuple, list)) else args
    if not isinstance(items, (tuple, list)):
        fail(cx, f"inline_asm_elementwise args must be a list of tensors, got {S.describe(args)}")
    vals = [tensor(cx, a if not isinstance(a, (int, float)) else Constexpr(a), f"inline_asm_elementwise argument {i + 1}")
            for i, a in enumerate(items)]
    for i in range(1, len(vals)):
        vals[0], vals[i] = S.broadcast_pair(cx, vals[0], vals[i])
    shape = tuple(vals[0].type.shape) if vals else ()
    vals = [v if tuple(v.type.shape) == shape else S.broadcast_to(cx, v, shape) for v in vals]
    dts = cval(cx, dtype, "inline_asm_elementwise dtype")
    many = isinstance(dts, (tuple, list))
    dts = [dtype_arg(cx, Constexpr(d), "inline_asm_elementwise dtype") for d in (dts if many else [dts])]
    props = {"asm_string": mlir_string(text), "constraints": mlir_string(cons),
             "packed_element": f"{n} : i32", "pure": "true" if pure else "false"}
    outs = cx.b.op("tt.elementwise_inline_asm", vals, [S.with_shape(d, shape) for d in dts], props)
    return tuple(outs) if many else outs[0]


def _gdc(cx, instruction: str):
    inline_asm_elementwise(cx, Constexpr(f"{instruction}; // dummy $0"), Constexpr("=r"), Constexpr(()),
                           Constexpr(T.int32), Constexpr(False), Constexpr(1))
    return Constexpr(None)


@builtin("extra.cuda.gdc_wait")
def gdc_wait(cx):
    """Programmatic dependent launch: wait until the grids this one depends on have finished
    or triggered (`griddepcontrol.wait`); without PDL a no-op."""
    return _gdc(cx, "griddepcontrol.wait")


@builtin("extra.cuda.gdc_launch_dependents")
def gdc_launch_dependents(cx):
    """Programmatic dependent launch: let the dependent grid start launching
    (`griddepcontrol.launch_dependents`); without PDL a no-op."""
    return _gdc(cx, "griddepcontrol.launch_dependents")
