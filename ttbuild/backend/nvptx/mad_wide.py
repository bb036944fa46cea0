"""Warp-uniform 64-bit addresses in PTX text: `mul.wide` of uniform values then `add.s64` of a uniform base, as one `mad.wide` (PTX ISA 9.7.1.5), the form Triton 3.6's PTX has.

Why: a program's row address (`base + program_id * stride`) reaches our PTX as `mul.wide.s32` then
`add.s64`; Triton's has one `mad.wide.s32` (its make_ptx passes `nvptx-mad-wide-opt` to LLVM's
codegen). ptxas computes the fused form on the uniform datapath (UIMAD, ULEA after ULDC) and the
split one per thread (IMAD.WIDE after vector constant loads), which delayed each program's first
load: a one-wave bf16 softmax over 1024 rows of 4096 (cold L2) took 6.27 us against Triton's 6.11,
and 6.05 fused (H200). Turning the LLVM flag on fused per-thread addresses too: attention forward
d128 (kernels/) lost 5 % of its TFLOP/s under ptxas 13.0, so only uniform operands are fused here.
`mad.wide` computes exactly `mul.wide` then `add`, so the rewrite changes no value.
"""

from __future__ import annotations

import re
from collections import Counter

from ttbuild.signature import split_entries

# Instructions whose result is warp-uniform when every source is; `ld.param` reads a kernel parameter.
_PURE = re.compile(r"(mov|add|sub|mul|mad|shl|shr|and|or|xor|not|neg|cvt|min|max|selp|setp|div|rem|abs|ld\.param)\b")
_UNIFORM_SREG = re.compile(r"%n?ctaid\.[xyz]$")
_IMM = re.compile(r"-?(\d+|0[fdxFDX][0-9a-fA-F]+)$")
_REG = re.compile(r"%[a-z]+\d+")
_LINE = re.compile(r"^(\s*)(@!?%p\d+\s+)?([a-z][\w.:]*)\s+([^;]*);")


def _parse(lines: list[str]) -> list[tuple[int, str, str | None, str, list[str]]]:
    """(line index, indent, predicate, opcode, operands) of each instruction line of PTX text;
    a `{ ... }` vector operand stays one operand."""
    out = []
    for i, line in enumerate(lines):
        if m := _LINE.match(line):
            ops = [o.strip() for o in split_entries(m.group(4)) if o.strip()]
            out.append((i, m.group(1), m.group(2), m.group(3), ops))
    return out


def _dests(ops: list[str]) -> list[str]:
    if not ops:
        return []
    first = ops[0]
    return _REG.findall(first) if first.startswith("{") or _REG.fullmatch(first) else []


def uniform_registers(lines: list[str]) -> set[str]:
    """Registers of a PTX kernel that hold one value for the whole warp: written once, by an
    unpredicated `_PURE` instruction whose sources are such registers, `%ctaid` / `%nctaid`,
    immediates or parameters. Conservative: anything else is not uniform."""
    return _uniform(_parse(lines))


def _uniform(insts) -> set[str]:
    defs = Counter(d for *_, ops in insts for d in _dests(ops))
    uniform: set[str] = set()
    for _, _, pred, opcode, ops in insts:
        dests = _dests(ops)
        if pred or len(dests) != 1 or defs[dests[0]] != 1 or not _PURE.match(opcode):
            continue
        if opcode.startswith("ld.param") or all(
                s in uniform or _UNIFORM_SREG.match(s) or _IMM.match(s) for s in ops[1:]):
            uniform.add(dests[0])
    return uniform


def fuse(ptx: str) -> str:
    """`ptx` with each `mul.wide.{s32,u32} %a, x, y` whose only use is `add.s64 %b, c, %a` (or
    `%a, c`), x, y and c warp-uniform (uniform_registers), rewritten as `mad.wide.{s32,u32} %b,
    x, y, c` in place of the add (the mul dropped). Other text unchanged."""
    if "mul.wide." not in ptx:
        return ptx
    lines = ptx.split("\n")
    insts = _parse(lines)
    uniform = _uniform(insts)
    uses = Counter(r for *_, ops in insts for o in ops for r in _REG.findall(o))
    products = {}
    for i, _, pred, opcode, ops in insts:
        if (not pred and opcode in ("mul.wide.s32", "mul.wide.u32") and len(ops) == 3 and uses[ops[0]] == 2
                and all(o in uniform or _IMM.match(o) for o in ops[1:])):
            products[ops[0]] = (i, opcode[-3:], ops[1], ops[2])
    drop = set()
    for i, indent, pred, opcode, ops in insts:
        if pred or opcode != "add.s64" or len(ops) != 3:
            continue
        for a, c in ((ops[2], ops[1]), (ops[1], ops[2])):
            if a in products and c in uniform and products[a][0] < i:
                j, kind, x, y = products.pop(a)
                lines[i] = f"{indent}mad.wide.{kind} \t{ops[0]}, {x}, {y}, {c};"
                drop.add(j)
                break
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)
