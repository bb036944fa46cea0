"""LLIR rules for Triton's debug ops: `tt.print` -> vprintf, `tt.assert` -> __assertfail (CUDA device runtime), `gpu.barrier` (tl.debug_barrier).

Sources: Triton 3.6 `PrintOpToLLVM.cpp` / `AssertOpToLLVM.cpp` (format strings, argument
promotion, one line per element a thread holds) and the CUDA device runtime's
`int vprintf(const char *fmt, void *args)` (arguments packed in a struct, each at its natural
alignment, ints below 32 bits widened to 32, floats to double: C's default promotions) and
`void __assertfail(const char *msg, const char *file, unsigned line, const char *func, size_t
charSize)`, which prints "<file>:<line>: <func>: block: [..], thread: [..] Assertion `<msg>`
failed." and traps, so the launch's stream reports CUDA_ERROR_ASSERT (710).
"""

from __future__ import annotations

import math
import re

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import GPU, TT
from ttbuild.backend.llir.context import F64, I8, I32, I64, TensorVal
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

PTR = ir.PointerType()  # generic address space: what vprintf/__assertfail take
# A debug build's location: loc("n17"("file.py":12:5)) (docs/CONTRACTS.md, "IR locations").
_FILE_LINE = re.compile(r'\("((?:[^"\\]|\\.)*)":(\d+):(\d+)\)')


def _string(ctx, prefix: str, text: str) -> ir.Value:
    """A NUL-terminated internal constant `@<prefix><n>` holding `text` (one per distinct text),
    in the generic address space as Triton's addStringToModule (NVPTX places it in .global)."""
    def make():
        data = bytearray(text.encode("utf-8") + b"\0")
        count = ctx.memo(("str-count", prefix), lambda: [0])  # names in creation order: prefix0, prefix1, ...
        g = ir.GlobalVariable(ctx.module, ir.ArrayType(I8, len(data)), f"{prefix}{count[0]}")
        count[0] += 1
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
        g.align = 1
        return g

    g = ctx.memo(("str", prefix, text), make)
    return g if g.type == PTR else ctx.builder.bitcast(g, PTR)


def _elems(value) -> list:
    return value.elems if isinstance(value, TensorVal) else [value]


def _indices(ctx, value) -> list[tuple]:
    if isinstance(value, TensorVal):
        return ctx.indices(value.layout, value.shape)
    return [()]


def _mlir_unescape(s: str) -> str:
    """An MLIR string literal's body (\\XX hex escapes, \\\\, \\") back to text."""
    out, i = bytearray(), 0
    raw = s.encode("utf-8")
    while i < len(raw):
        if raw[i] == 0x5C and i + 1 < len(raw):
            nxt = raw[i + 1:i + 3]
            if len(nxt) == 2 and all(chr(c) in "0123456789abcdefABCDEF" for c in nxt):
                out.append(int(nxt, 16))
                i += 3
                continue
            out.append(raw[i + 1])
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "replace")


def _str_prop(op, name: str) -> str:
    from mlir import ir as mir
    return mir.StringAttr(mu.props(op)[name]).value


# ---- tt.print -------------------------------------------------------------------------------


def _format(elem: str, signed: bool, hex_: bool, width: int | None = None) -> str:
    """Triton's getFormatSubstr for one value of MLIR element type `elem`."""
    if mu.pointee(elem) is not None:
        return "%p"
    bits = mu.elem_bits(elem) if elem != "i1" else 1
    if hex_:
        return f"0x%0{bits // 4}" + ("ll" if bits > 32 else "") + "x"
    spec = "%" + (str(width) if width is not None else "")
    if elem in ("f16", "bf16", "f32", "f64"):
        return spec + "f"
    if signed:
        return spec + ("lli" if bits == 64 else "i")
    return spec + ("llu" if bits == 64 else "u")


def _promote(ctx, x: ir.Value, elem: str, signed: bool, hex_: bool) -> ir.Value:
    """vprintf's argument for `x`: ints below 32 bits widened (sign per `signed`), floats to
    double; with hex, floats are printed as their bits (Triton would pass the double)."""
    b = ctx.builder
    if elem.startswith("f8"):
        raise NotSupportedYet(f"tt.print of {elem}", None, "llir")
    if elem in ("f16", "bf16", "f32", "f64") and hex_:
        x = b.bitcast(x, ir.IntType(mu.elem_bits(elem)))
    elif elem in ("f16", "bf16", "f32"):
        return b.fpext(x, F64)
    if isinstance(x.type, ir.IntType) and x.type.width < 32:
        return b.sext(x, I32) if signed and not hex_ and x.type.width > 1 else b.zext(x, I32)
    return x


def _vprintf(ctx, fmt: str, args: list[ir.Value]) -> None:
    """One vprintf call: `fmt` (newline added) and `args` packed into a stack struct. The buffer
    is one entry-block alloca per struct type, reused: vprintf copies it before returning."""
    b = ctx.builder
    vprintf = ctx.intrinsic("vprintf", I32, [PTR, PTR])
    fmt_ptr = _string(ctx, "printfFormat_", fmt + "\n")
    if not args:
        b.call(vprintf, [fmt_ptr, ir.Constant(PTR, None)])
        return
    struct = ir.LiteralStructType([a.type for a in args])
    def make():
        with b.goto_block(b.function.entry_basic_block):
            return b.alloca(struct)

    buf = ctx.memo(("printbuf", str(struct)), make)
    for i, a in enumerate(args):
        b.store(a, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True))
    b.call(vprintf, [fmt_ptr, b.bitcast(buf, PTR)])


@rule(TT.PRINT)
def print_(ctx, op, *operands):
    """Per element this thread holds, one line (Triton 3.6's format):
    `pid (<x>, <y>, <z>) idx (<i0>, <i1>, ...)<prefix>[(operand <k>) ]<value>`, index fields
    `%<ceil(log10(dim))>u`, `(operand k)` only with several operands; a scalar prints `idx ()`
    once per thread; no operands: `pid (<x>, <y>, <z>)<prefix>`."""
    from mlir import ir as mir
    p = mu.props(op)
    prefix = mir.StringAttr(p["prefix"]).value
    hex_ = mir.BoolAttr(p["hex"]).value if "hex" in p else False
    signed = list(mir.DenseI32ArrayAttr(p["isSigned"])) if "isSigned" in p else [0] * len(operands)
    pid = [ctx.sreg(f"ctaid.{a}") for a in "xyz"]
    head = "pid (%u, %u, %u)"
    if not operands:
        _vprintf(ctx, head + prefix, pid)
        return None
    for k, (value, mval) in enumerate(zip(operands, op.operands)):
        elem = mu.elem_str(mval.type)
        shape = mu.shape_of(mval.type)
        widths = [math.ceil(math.log10(d)) if d > 0 else 0 for d in shape]
        idx = ", ".join(f"%{w}u" for w in widths)
        tag = f"(operand {k}) " if len(operands) > 1 else ""
        fmt = f"{head} idx ({idx}){prefix}{tag}{_format(elem, bool(signed[k]), hex_)}"
        for x, index in zip(_elems(value), _indices(ctx, value)):
            _vprintf(ctx, fmt, pid + list(index) + [_promote(ctx, x, elem, bool(signed[k]), hex_)])
    return None


# ---- tt.assert ------------------------------------------------------------------------------


def _position(op) -> tuple[str, int]:
    """(file, line) from a debug build's location, else Triton's ("unknown", 0)."""
    m = _FILE_LINE.search(str(op.location))
    return (_mlir_unescape(m.group(1)), int(m.group(2))) if m else ("unknown", 0)


@rule(TT.ASSERT)
def assert_(ctx, op, cond):
    """If any element of `cond` this thread holds is false, call __assertfail(message, file,
    line, function, 1) (Triton's llAssert); file and line come from the op's location (a debug
    build's `loc("n17"("k.py":12:5))`), the function is the kernel's name."""
    b = ctx.builder
    elems = _elems(cond)
    failed = None
    for e in elems:
        f = b.icmp_unsigned("==", e, ir.Constant(e.type, 0))
        failed = f if failed is None else b.or_(failed, f)
    file, line = _position(op)
    fn = b.function
    fail_bb = fn.append_basic_block("assert.fail")
    cont_bb = fn.append_basic_block("assert.cont")
    b.cbranch(failed, fail_bb, cont_bb)
    b.position_at_end(fail_bb)
    assertfail = ctx.intrinsic("__assertfail", ir.VoidType(), [PTR, PTR, I32, PTR, I64])
    b.call(assertfail, [_string(ctx, "assertMessage_", _str_prop(op, "message")),
                        _string(ctx, "assertFile_", file), ir.Constant(I32, line),
                        _string(ctx, "assertFunc_", fn.name), ir.Constant(I64, 1)])
    b.branch(cont_bb)
    b.position_at_end(cont_bb)
    return None


@rule("llvm.intr.assume")
def assume(ctx, op, cond):
    """`call void @llvm.assume(i1 cond)` (LLVM LangRef, llvm.assume), as Triton's LLVM::AssumeOp."""
    ctx.builder.call(ctx.intrinsic("llvm.assume", ir.VoidType(), [cond.type]), [cond])
    return None


@rule(GPU.BARRIER)
def gpu_barrier(ctx, op):
    """tl.debug_barrier(): every thread of the CTA meets."""
    ctx.barrier()
