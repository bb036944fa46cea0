"""`tl.device_print` -> `tt.print` (always kept) and `tl.device_assert` -> `tt.assert` (debug builds only), as Triton 3.6 emits them.

Source of the rules: Triton 3.6 `triton/language/core.py` (device_print, device_assert) and
`semantic.py` (prefix munging, `cond | ~mask`, asserts dropped unless `debug`); its
`code_generator.py` maps Python `print(...)` and `assert cond, msg` onto these two.
"""

from __future__ import annotations

import string

from . import semantic as S
from .args import BuiltinRules, cval, tensor
from .irtext import mlir_string
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


def munge_prefix(prefix: str, has_args: bool) -> str:
    """Triton's prefix spelling: with values to print it ends in ": " and, when longer than two
    characters, starts with " " (`"x"` -> `" x: "`); without values it is kept as given."""
    if not prefix.endswith(" ") and has_args:
        prefix += " "
    if not prefix.endswith(": ") and has_args:
        prefix = prefix[:-1] + ": "
    if len(prefix) > 2 and not prefix.startswith(" "):
        prefix = " " + prefix
    return prefix


def _literal(cx, v, what: str) -> str:
    text = cval(cx, v, what)
    if not isinstance(text, str):
        fail(cx, f"{what} must be a string literal, got {text!r}")
    if any(ch not in string.printable for ch in text):
        fail(cx, f"{what} {text!r} is not an ascii string")
    return text


@builtin("device_print")
def device_print(cx, prefix, *args, hex=False):
    """`tt.print` of `args` (tensors or scalars, any dtype; numbers become constants) after
    `prefix` (a constexpr printable-ASCII string). Every thread prints its own elements, one
    line each; see ttbuild/backend/llir/debug.py for the format."""
    text = _literal(cx, prefix, "device_print prefix")
    as_hex = cval(cx, hex, "device_print hex")
    if not isinstance(as_hex, bool):
        fail(cx, f"device_print hex must be a bool, got {as_hex!r}")
    values = []
    for i, a in enumerate(args):
        if isinstance(a, Constexpr) and isinstance(a.value, str):
            fail(cx, f"device_print argument {i + 1} is a string: only the prefix may be one")
        values.append(tensor(cx, a, f"device_print argument {i + 1}"))
    signed = ", ".join("1" if not v.type.scalar.is_ptr() and v.type.scalar.is_signed() else "0" for v in values)
    props = {"hex": "true" if as_hex else "false",
             "isSigned": f"array<i32{': ' + signed if values else ''}>",
             "prefix": mlir_string(munge_prefix(text, bool(values)))}
    cx.b.op("tt.print", values, [], props)
    return Constexpr(None)


@builtin("assume")
def assume(cx, cond):
    """`tl.assume(cond)`: the compiler may take the scalar boolean `cond` to hold (Triton
    `semantic.assume`: `llvm.intr.assume`, an LLVM hint; nothing is checked at run time, a false
    condition is undefined behaviour). Tutorial 03 asserts non-negative program ids and strides."""
    c = tensor(cx, cond, "assume condition")
    if not c.type.scalar.is_bool():
        fail(cx, f"tl.assume condition must be boolean (int1), got {c.type}")
    if c.type.shape:
        fail(cx, f"tl.assume takes a scalar condition, got {c.type}")
    # the LLVM dialect's AssumeOp carries (empty) operand bundles: their sizes are inherent
    cx.b.op("llvm.intr.assume", [c], [], {"op_bundle_sizes": "array<i32>", "operandSegmentSizes": "array<i32: 1, 0>"})
    return Constexpr(None)


@builtin("device_assert")
def device_assert(cx, cond, msg="", mask=None):
    """`tt.assert` that `cond` (a boolean tensor or scalar) holds where `mask` is true, with
    `msg` (a constexpr string) in the failure report. Emitted only when the variant is built
    with `debug = true` (Triton drops device asserts otherwise); the operands are still checked."""
    text = _literal(cx, msg, "device_assert msg")
    c = tensor(cx, cond, "device_assert condition")
    if not c.type.scalar.is_bool():
        fail(cx, f"device_assert condition must be boolean (int1), got {c.type}")
    if mask is not None and not (isinstance(mask, Constexpr) and mask.value is None):
        m = tensor(cx, mask, "device_assert mask")
        if not m.type.scalar.is_bool():
            fail(cx, f"device_assert mask must be boolean (int1), got {m.type}")
        if not cx.debug:
            return Constexpr(None)
        # Triton: cond | not_(mask), both i1 (not_ is xor with true; no widening as `~` on ints).
        c, m = S.broadcast_pair(cx, c, m)
        true = cx.b.constant(True, m.type)
        c = cx.b.op1("arith.ori", [c, cx.b.op1("arith.xori", [m, true], m.type)], c.type)
    if not cx.debug:
        return Constexpr(None)
    cx.b.op("tt.assert", [c], [], {"message": mlir_string(text)})
    return Constexpr(None)
