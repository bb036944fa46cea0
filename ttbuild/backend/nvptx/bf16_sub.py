"""bf16 pair products added or subtracted, as LLVM's SLP vectorizer leaves them, split into scalar lanes when one is subtracted (Triton 3.6's form).

Works on optimized LLVM IR text, before codegen.

Why: codegen contracts `a * b - c * d` into `fma(a, b, -(c * d))`. On a `<2 x bfloat>` pair that is
`mul.bf16x2`, `neg.bf16x2`, `fma.rn.bf16x2`, and ptxas keeps the `neg.bf16x2` as an instruction of
its own. On scalars (Triton's build: its SLP vectorizer runs without a target machine,
python/src/llvm.cpp optimize_module, and pairs no bf16 product) ptxas folds each `neg.bf16` into
the HFMA2 that uses it and packs the scalar pairs itself. A multi-section rotary backward
(`x1 * cos + x2 * sin`, `x2 * cos - x1 * sin`, 4 warps) took 184 SASS instructions where Triton's
took 176, and 3-4 % more GPU time at 8192 tokens (H200). Its products that are added go scalar
too, so that no value is kept both paired and split; sums of loaded values stay paired
(`add.bf16x2`, as in Triton's PTX), and so does every pair tree of a kernel that subtracts no
product (GEGLU's backward: splitting every bf16 pair took it from 56 registers to 78).
"""

from __future__ import annotations

import re
from collections import Counter

from ttbuild.signature import split_entries

PAIR = "<2 x bfloat>"
_OP = re.compile(r"^(\s*)(%[\w.]+) = (fsub|fadd|fmul)((?: [a-z]+)*) <2 x bfloat> ([^!]*)$")
_NAME = re.compile(r"%[\w.]+")


def _operands(text: str) -> list[str]:
    """`%a, <bfloat 0xR3F80, bfloat 0xR3F80>` -> its two operands."""
    return [o.strip() for o in split_entries(text)]


def _chosen(lines: list[str]) -> set[str]:
    """Names of the pair ops to split: each contractable `fsub` or `fadd` with a single-use
    contractable `fmul` operand (codegen's fma candidates), and those `fmul`s (their lanes then
    feed the scalar op directly); none unless one is an `fsub` (an fma of a negated product).
    The `fadd`s go too so that values both halves of a rotation use are not kept both paired and
    split: a rotary backward then took 54 registers against Triton's 46."""
    uses = Counter(_NAME.findall("\n".join(lines)))
    ops = {}
    for line in lines:
        if m := _OP.match(line):
            ops[m.group(2)] = (m.group(3), set(m.group(4).split()), _operands(m.group(5)))
    contractable = {"contract", "fast"}
    chosen, subtracts = set(), False
    for name, (op, flags, args) in ops.items():
        if op == "fmul" or not contractable & flags:
            continue
        products = [a for a in args if a in ops and ops[a][0] == "fmul" and uses[a] == 2
                    and contractable & ops[a][1]]
        if products:
            chosen |= {name, *products}
            subtracts = subtracts or op == "fsub"
    return chosen if subtracts else set()


def split_subtractions(text: str) -> str:
    """`text` (LLVM IR) with the pair ops `_chosen` names computed lane by lane in scalar bf16,
    flags kept; each sum or difference is put back into a pair under its own name for its users.
    Text that subtracts no bf16 pair product comes back unchanged."""
    if PAIR not in text:
        return text
    lines = text.split("\n")
    chosen = _chosen(lines)
    if not chosen:
        return text
    lanes: dict[str, tuple[str, str]] = {}
    out = []
    for line in lines:
        m = _OP.match(line)
        if not m or m.group(2) not in chosen:
            out.append(line)
            continue
        indent, name, op, flags, rest = m.groups()
        tmp = "%bf" + name[1:]  # named temporaries: `%9.l0` would not parse, and numbered ones must stay sequential
        args = []
        for k, a in enumerate(_operands(rest)):
            if a not in lanes:  # extracted here, next to this use: an earlier extract may not dominate it
                for lane in (0, 1):
                    out.append(f"{indent}{tmp}.o{k}l{lane} = extractelement {PAIR} {a}, i64 {lane}")
            args.append(lanes.get(a, (f"{tmp}.o{k}l0", f"{tmp}.o{k}l1")))
        for lane in (0, 1):
            out.append(f"{indent}{tmp}.l{lane} = {op}{flags} bfloat {args[0][lane]}, {args[1][lane]}")
        lanes[name] = (f"{tmp}.l0", f"{tmp}.l1")
        if op != "fmul":  # products chosen have no other user
            out.append(f"{indent}{tmp}.v = insertelement {PAIR} poison, bfloat {tmp}.l0, i64 0")
            out.append(f"{indent}{name} = insertelement {PAIR} {tmp}.v, bfloat {tmp}.l1, i64 1")
    return "\n".join(out)
