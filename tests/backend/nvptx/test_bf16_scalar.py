"""bf16 arithmetic reaches codegen scalar, as in Triton 3.6's build (its SLP vectorizer runs without
a target machine, python/src/llvm.cpp optimize_module, and leaves bf16 ops alone): ptxas packs
scalar bf16 ops into HFMA2 itself and folds their negations, which it does not do for
`neg.bf16x2`. ttbuild.backend.nvptx.bf16_scalar splits the pairs our SLP pass makes.

Kernel: tests/data/rotate_pairs.py (ours), a rotation of row halves in bf16."""

from __future__ import annotations

import re
from pathlib import Path

import llvmlite.binding as llvm
from oracle import triton_ptx

import ttbuild
from ttbuild.backend.nvptx.bf16_scalar import scalarize

SOURCE = Path(__file__).parents[2] / "data" / "rotate_pairs.py"
ROW = ("rotate_rows", "*bf16:16,*bf16:16,*bf16:16", {"ROWS": 32, "HALF": 64})
ARITH = r"\b(fma\.rn|mul|neg|add|sub)\.bf16(x2)?\b"

PAIRED = """
define <2 x bfloat> @f(<2 x bfloat> %a, <2 x bfloat> %b, <2 x bfloat> %c) {
  %1 = fmul contract <2 x bfloat> %a, <bfloat 0xR3F80, bfloat 0xR4000>
  %2 = fneg <2 x bfloat> %1
  %3 = tail call contract <2 x bfloat> @llvm.fma.v2bf16(<2 x bfloat> %2, <2 x bfloat> %b, <2 x bfloat> %c)
  %4 = fsub contract <2 x bfloat> %3, %a
  ret <2 x bfloat> %4
}
declare <2 x bfloat> @llvm.fma.v2bf16(<2 x bfloat>, <2 x bfloat>, <2 x bfloat>)
"""


def _counts(ptx: str) -> dict:
    found: dict = {}
    for op, x2 in re.findall(ARITH, ptx):
        key = op + (x2 or "")
        found[key] = found.get(key, 0) + 1
    return found


def test_pairs_are_split_lane_by_lane_and_stay_valid_ir():
    text = scalarize(PAIRED)
    llvm.parse_assembly(text).verify()
    assert not re.search(r"= (fmul|fneg|fsub|fadd)[a-z ]* <2 x bfloat>|call[a-z ]* <2 x bfloat> @llvm\.fma", text)
    assert text.count("fmul contract bfloat") == 2 and text.count("fneg bfloat") == 2
    assert text.count("call contract bfloat @llvm.fma.bf16(") == 2 and "declare bfloat @llvm.fma.bf16(" in text
    assert "ret <2 x bfloat> %4" in text  # the result keeps its name for its users


def test_text_without_bf16_pairs_is_unchanged():
    text = PAIRED.replace("bfloat", "half").replace("v2bf16", "v2f16").replace("0xR3F80", "0xH3C00").replace(
        "0xR4000", "0xH4000")
    assert scalarize(text) == text


def test_the_rotation_is_scalar_bf16_as_tritons():
    kernel, sig, cx = ROW
    ours = ttbuild.compile(SOURCE, kernel=kernel, signature=sig, constexprs=cx, num_warps=4, until="ptx")["ptx"].decode()
    counts = _counts(ours)
    assert counts and not any(k.endswith("x2") for k in counts), counts
    assert counts == _counts(triton_ptx(SOURCE, *ROW))
