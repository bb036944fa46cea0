"""bf16 arithmetic on `<2 x bfloat>` pairs, as LLVM's SLP vectorizer leaves it, split back into scalar bf16 ops in optimized LLVM IR text: the form Triton 3.6's build hands to codegen.

Why: Triton runs the SLP vectorizer without a target machine (python/src/llvm.cpp,
optimize_module), which leaves bf16 arithmetic scalar; ours runs it with NVPTX's cost model
(fp16 pairs through loops keep layer norm backward's registers down), which pairs bf16 ops into
`fma.rn.bf16x2` / `mul.bf16x2` / `neg.bf16x2`. ptxas folds a scalar `neg.bf16` into the HFMA2
that uses it and packs scalar pairs itself, but keeps `neg.bf16x2` as an instruction: a rotary
kernel's `q * cos - k * sin` took 50 half-precision instructions where Triton's took 40, and
1-4 % of its GPU time at small sizes. Only arithmetic is split; pairs that are loaded, stored,
converted or carried stay pairs.
"""

from __future__ import annotations

import re

PAIR = "<2 x bfloat>"
_BINARY = re.compile(r"^(\s*)(%[\w.]+) = (fadd|fsub|fmul|fdiv)((?: [a-z]+)*) <2 x bfloat> (.*)$")
_NEG = re.compile(r"^(\s*)(%[\w.]+) = fneg((?: [a-z]+)*) <2 x bfloat> (.*)$")
_FMA = re.compile(r"^(\s*)(%[\w.]+) = (?:tail )?call((?: [a-z]+)*) <2 x bfloat> @llvm\.(fma|fmuladd)\.v2bf16\((.*)\)(?: #\d+)?$")


def _operands(text: str) -> list[str]:
    """Split `text` at the commas outside brackets: `%a, <bfloat 0xR3F80, bfloat 0xR3F80>` is two
    operands (the type prefix `<2 x bfloat> ` of a call argument is dropped)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [o[len(PAIR):].strip() if o.startswith(PAIR) else o for o in out]


def _split(indent: str, name: str, ops: list[str], scalar) -> list[str]:
    """Lines computing `name` lane by lane: each operand's lane extracted, `scalar(args)` (the
    scalar instruction's text) per lane, the two results put back into a pair."""
    lines = []
    lanes = []
    tmp = "%bf" + name[1:]  # named temporaries: `%9.l0` would not parse, and numbered ones must stay sequential
    for lane in (0, 1):
        args = []
        for k, o in enumerate(ops):
            a = f"{tmp}.l{lane}o{k}"
            lines.append(f"{indent}{a} = extractelement {PAIR} {o}, i64 {lane}")
            args.append(a)
        r = f"{tmp}.l{lane}"
        lines.append(f"{indent}{r} = {scalar(args)}")
        lanes.append(r)
    lines.append(f"{indent}{tmp}.v = insertelement {PAIR} poison, bfloat {lanes[0]}, i64 0")
    lines.append(f"{indent}{name} = insertelement {PAIR} {tmp}.v, bfloat {lanes[1]}, i64 1")
    return lines


def scalarize(text: str) -> str:
    """`text` (LLVM IR) with every fadd / fsub / fmul / fdiv / fneg and llvm.fma / llvm.fmuladd
    call on `<2 x bfloat>` replaced by the same operation on each lane (flags kept), declaring the
    scalar intrinsics it then calls. Text without such ops comes back unchanged."""
    if PAIR not in text:
        return text
    out, intrinsics = [], set()
    for line in text.split("\n"):
        if m := _BINARY.match(line):
            ind, name, op, flags, rest = m.groups()
            out += _split(ind, name, _operands(rest), lambda a, op=op, f=flags: f"{op}{f} bfloat {a[0]}, {a[1]}")
        elif m := _NEG.match(line):
            ind, name, flags, rest = m.groups()
            out += _split(ind, name, _operands(rest), lambda a, f=flags: f"fneg{f} bfloat {a[0]}")
        elif m := _FMA.match(line):
            ind, name, flags, fn, rest = m.groups()
            intrinsics.add(fn)
            out += _split(ind, name, _operands(rest), lambda a, fn=fn, f=flags:
                          f"call{f} bfloat @llvm.{fn}.bf16(bfloat {a[0]}, bfloat {a[1]}, bfloat {a[2]})")
        else:
            out.append(line)
    for fn in sorted(intrinsics):
        decl = f"declare bfloat @llvm.{fn}.bf16(bfloat, bfloat, bfloat)"
        if decl not in text:
            out.append(decl)
    return "\n".join(out)
