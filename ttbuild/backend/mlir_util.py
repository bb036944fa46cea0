"""Parsing and printing Triton generic-form MLIR with the upstream bindings, and reading op properties.

Triton's ops are unregistered in upstream MLIR, so their properties (`<{...}>`) are opaque to the
Python bindings; `props()` recovers them from the op's own generic text. Registered ops (arith,
math, scf) expose their properties as attributes.
"""

from __future__ import annotations

import re
import struct
import threading

from mlir import ir

from ttbuild.backend.ir.ops import ARITH
from ttbuild.errors import CompilationError

PRINT_FLAGS = dict(print_generic_op_form=True, use_local_scope=True, enable_debug_info=True)


def _stub_triton_dialect_modules() -> None:
    """Make `mlir.dialects.{tt,ttg,ttng}` importable (empty modules). The bindings look up a
    Python module for an op's dialect each time they wrap an op (`.operations`, `.owner`, ...)
    and remember only successful imports, so for Triton's unregistered dialects every wrap ran
    a failing `import` through sys.meta_path: ~17,000 of them compiling attention backward,
    10-20 % of the ttgir and llir stages. With a module present the lookup is cached; ops
    still come back as generic OpViews (no op classes are registered), as before."""
    import sys
    import types

    for ns in ("tt", "ttg", "ttng"):
        name = f"mlir.dialects.{ns}"
        if name not in sys.modules:
            mod = types.ModuleType(name, "Triton's dialect: no Python op classes (ttbuild.backend.mlir_util)")
            sys.modules[name] = mod


_stub_triton_dialect_modules()


# A context serves this many modules before a fresh one replaces it: creating one costs
# 12-15 ms (its thread pool and dialect registry), more than the ttgir or llir stage of a
# small kernel, while attributes and types it uniques live as long as it does.
CONTEXT_REUSE = 64

_contexts = threading.local()


def context() -> ir.Context:
    """The calling thread's MLIR context (unregistered dialects allowed), shared by the stages
    that parse or build modules and renewed every CONTEXT_REUSE calls. Modules keep their own
    context alive, so renewal never invalidates one still in use."""
    ctx, uses = getattr(_contexts, "entry", (None, CONTEXT_REUSE))
    if uses >= CONTEXT_REUSE:
        ctx, uses = ir.Context(), 0
        ctx.allow_unregistered_dialects = True
        # No worker threads: our modules hold one function (nothing to verify in parallel),
        # and the stage runner forks (ttbuild.limits) from a process that may hold a context.
        ctx.enable_multithreading(False)
    _contexts.entry = (ctx, uses + 1)
    return ctx


def parse_module(text: str | bytes, ctx: ir.Context, what: str) -> ir.Module:
    """Parse MLIR text; raise CompilationError (no source loc) naming the stage input `what`."""
    if isinstance(text, bytes):
        text = text.decode()
    try:
        return ir.Module.parse(text, ctx)
    except Exception as e:  # MLIRError carries the diagnostics text
        raise CompilationError(f"cannot parse {what}: {e}", None, stage=what) from None


def print_module(module: ir.Module) -> bytes:
    """Generic form, local scope, debug info (docs/CONTRACTS.md), newline-terminated."""
    return (module.operation.get_asm(**PRINT_FLAGS).rstrip("\n") + "\n").encode()


def _match_brace(s: str, i: int) -> int:
    """Index just past the `}` matching the `{` at s[i], skipping quoted strings."""
    depth, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == '"':
            i += 1
            while i < n and s[i] != '"':
                i += 2 if s[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced properties")


def props(op) -> dict[str, ir.Attribute]:
    """Inherent attributes of `op` (properties plus attribute dict) as name -> Attribute."""
    op = op.operation
    out = {}
    for item in op.attributes:  # MLIR 22's bindings yield names; older ones NamedAttributes
        name = item if isinstance(item, str) else item.name
        out[name] = op.attributes[name]
    if op.context.is_registered_operation(op.name):
        return out
    # The generic form (which needs no verifier to pass) without regions: the properties
    # `<{...}>` come before them, and a tt.func's body cost 2-7 ms to verify and print for an
    # attention kernel.
    text = op.get_asm(print_generic_op_form=True, use_local_scope=True, large_elements_limit=16,
                      skip_regions=True, assume_verified=True)
    head = text.index('"(', text.index('"' + op.name + '"')) + 1
    close = text.index(")", head)
    rest = text[close + 1:].lstrip(" ")
    if rest.startswith("<{"):
        start = text.index("<{", close)
        end = _match_brace(text, start + 1)
        d = ir.Attribute.parse(text[start + 1:end], op.context)
        for na in ir.DictAttr(d):
            out[na.name] = na.attr
    return out


def int_attr(a) -> int:
    return ir.IntegerAttr(a).value


def is_zero_splat(v) -> bool:
    """Whether value v is an `arith.constant` splat whose bits are all zero (+0.0, 0): what a
    zero-filled buffer or an ignored accumulator already holds (-0.0 is not)."""
    if not isinstance(v, ir.OpResult) or v.owner.name != ARITH.CONSTANT:
        return False
    a = v.owner.attributes["value"]
    if not (isinstance(a, ir.DenseElementsAttr) and a.is_splat):
        return False
    s = a.get_splat_value()
    if isinstance(s, ir.FloatAttr):
        return struct.pack("<d", s.value) == b"\0" * 8
    return ir.IntegerAttr(s).value == 0


def loc_name(op) -> str | None:
    """The node id of a `loc("n17")` location, or None (unknown/other forms)."""
    m = re.match(r'loc\("(n\d+)"', str(op.location))
    return m.group(1) if m else None


# ---- types -----------------------------------------------------------------------------------

_PTR = re.compile(r"^!tt\.ptr<(.+?)(?:,\s*(\d+))?>$")


def elem_str(t: ir.Type) -> str:
    """Element type spelling of a tensor or scalar type: 'f32', 'i1', '!tt.ptr<f16>'."""
    if isinstance(t, ir.RankedTensorType):
        t = t.element_type
    return str(t)


def pointee(elem: str) -> str | None:
    """'!tt.ptr<f16>' -> 'f16'; None for non-pointers."""
    m = _PTR.match(elem)
    return m.group(1) if m else None


_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}


def elem_bits(elem: str) -> int:
    """Bits of a scalar element type in memory (i1 is stored as one byte, pointers as 64 bits)."""
    if elem in _BITS:
        return _BITS[elem]
    if pointee(elem) is not None:
        return 64
    m = re.fullmatch(r"[iu](\d+)", elem)
    if m:
        return max(8, int(m.group(1)))
    raise CompilationError(f"unsupported element type {elem}")


_TENSORDESC = re.compile(r"!tt\.tensordesc<tensor<([0-9x]+)x([a-zA-Z0-9]+)\s*[,>]")


def tensordesc_block(t, stage: str = "ttgir", signed: bool = False) -> tuple[tuple[int, ...], str]:
    """`!tt.tensordesc<tensor<128x64xf16>>` (an encoding inside or not) -> ((128, 64), 'f16').
    An integer element is given signless ('i32' for `si32` / `ui32`, the type of the block's
    values and tiles) unless `signed`. Raises CompilationError (of `stage`) for another type."""
    m = _TENSORDESC.match(str(t))
    if m is None:
        raise CompilationError(f"not a tensor descriptor type: {t}", stage=stage)
    elem = m.group(2)
    if not signed and re.fullmatch(r"[su]i\d+", elem):
        elem = elem[1:]
    return tuple(int(s) for s in m.group(1).split("x")), elem


def is_tensor(v: ir.Value) -> bool:
    """Whether `v` is a ranked tensor (not a scalar, pointer or memdesc)."""
    return isinstance(v.type, ir.RankedTensorType)


def shape_of(t: ir.Type) -> tuple[int, ...]:
    """The shape of a ranked tensor type; () for a scalar type."""
    return tuple(ir.RankedTensorType(t).shape) if isinstance(t, ir.RankedTensorType) else ()


def nbytes(t: ir.Type) -> int:
    """Bytes of a ranked tensor type's elements (bits * elements / 8; a scalar type: its own)."""
    n = elem_bits(elem_str(t))
    for d in shape_of(t):
        n *= d
    return n // 8


def encoding_str(t: ir.Type) -> str | None:
    if isinstance(t, ir.RankedTensorType) and t.encoding is not None:
        return str(t.encoding)
    return None
