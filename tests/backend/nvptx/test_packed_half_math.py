"""16-bit float math on tensors stays scalar in the PTX, as in Triton 3.6's (oracle): no `.bf16x2`/`.f16x2` arithmetic where the SLP vectorizer's threshold keeps it scalar, and no `neg.bf16x2` where it pairs."""

from __future__ import annotations

import collections
import json
import re

import llvmlite.binding as llvm
import pytest
from oracle import run_triton, triton_ttgir
from ptx_util import sass

import ttbuild
from ttbuild.backend.nvptx.bf16_sub import split_subtractions
from ttbuild.backend.nvptx.cubin_info import kernel_resources
from ttbuild.backend.nvptx.ptxas import assemble

# Rotate the two halves of each row of a [ROWS, 2 * HALF] tile by per-column (cos, sin), in
# place: a pair of products subtracted (fma with a negated product) and a pair added.
SRC = """import triton
import triton.language as tl


@triton.jit
def rotate_halves(x_ptr, stride, cos_ptr, sin_ptr, ROWS: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_ptr = x_ptr + row * stride
    cols = tl.arange(0, HALF)
    c = tl.load(cos_ptr + row * HALF + cols)
    s = tl.load(sin_ptr + row * HALF + cols)
    lo = tl.arange(0, ROWS)[:, None] * (2 * HALF) + cols[None, :]
    a = tl.load(x_ptr + lo)
    b = tl.load(x_ptr + lo + HALF)
    tl.store(x_ptr + lo, a * c - b * s)
    tl.store(x_ptr + lo + HALF, b * c + a * s)
"""
CONSTEXPRS = {"ROWS": 8, "HALF": 64}
# Float arithmetic of PTX, by instruction and type (`fma.rn.bf16x2`, `neg.f16`, ...).
_MATH = re.compile(r"^\s*((?:mul|add|sub|neg|fma\.rn|mul\.rn|add\.rn|sub\.rn)\.(?:bf16|f16)(?:x2)?)\s", re.M)


def math_ops(ptx: str) -> dict[str, int]:
    """Count of each 16-bit float arithmetic instruction of a PTX text."""
    return dict(collections.Counter(_MATH.findall(ptx)))


TRITON_PTX = r"""
import importlib.util, json, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
src, dtype, cx = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
path = tempfile.mktemp(suffix=".py")
open(path, "w").write(src)
spec = importlib.util.spec_from_file_location("rot", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
sig = {"x_ptr": "*" + dtype, "stride": "i32", "cos_ptr": "*" + dtype, "sin_ptr": "*" + dtype, "ROWS": "constexpr", "HALF": "constexpr"}
div = [["tt.divisibility", 16]]
k = triton.compile(ASTSource(mod.rotate_halves, sig, constexprs=cx, attrs={(i,): div for i in range(4)}),
                   target=GPUTarget("cuda", 90, 32))
print(json.dumps(k.asm["ptx"]))
"""


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_math_stays_scalar_as_in_tritons_ptx(dtype):
    """Our PTX has the same 16-bit float instructions as Triton's (scalar: `mul.bf16`,
    `neg.bf16`, `fma.rn.bf16`), and no more registers under the same ptxas. Before the fix
    LLVM's SLP vectorizer, costed by the NVPTX target, paired them into `.bf16x2` ops: ptxas
    then kept each `neg.bf16x2` as an instruction of its own (it folds a scalar `neg` into the
    fma) and took 34 registers instead of 32, 12 CTAs of 4 warps per SM instead of 16."""
    sig = f"*{dtype}:16,i32:16,*{dtype}:16,*{dtype}:16"
    out = ttbuild.compile(SRC, signature=sig, constexprs=CONSTEXPRS, until="cubin")
    ours = math_ops(out["ptx"].decode())
    assert ours and not any(op.endswith("x2") for op in ours), ours  # without the oracle too
    theirs_ptx = json.loads(run_triton(TRITON_PTX, SRC, dtype, json.dumps(CONSTEXPRS)).splitlines()[-1])
    assert ours == math_ops(theirs_ptx)
    theirs = assemble(theirs_ptx.encode(), "sm_90a")
    assert kernel_resources(out["cubin"])[0] <= kernel_resources(theirs)[0]


# A rotation whose angles are sums of two sections (the columns below SPLIT from one table, the
# rest from the next): the summed angles make the pair tree cheap enough for the SLP vectorizer
# even above SLP_THRESHOLD, so the sums and products stay `.bf16x2`; the backward form's
# subtraction `b * c - a * s` must still reach codegen scalar (nvptx/bf16_sub).
SECTIONS = """import triton
import triton.language as tl


@triton.jit
def rotate_sections(x_ptr, stride, cos_ptr, sin_ptr, SPLIT: tl.constexpr, ROWS: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_ptr = x_ptr + row * stride
    cols = tl.arange(0, HALF)
    first = cols < SPLIT
    c = tl.load(cos_ptr + row * HALF + cols, mask=first, other=0) + tl.load(cos_ptr + (row + 1) * HALF + cols, mask=~first, other=0)
    s = tl.load(sin_ptr + row * HALF + cols, mask=first, other=0) + tl.load(sin_ptr + (row + 1) * HALF + cols, mask=~first, other=0)
    lo = tl.arange(0, ROWS)[:, None] * (2 * HALF) + cols[None, :]
    a = tl.load(x_ptr + lo)
    b = tl.load(x_ptr + lo + HALF)
    tl.store(x_ptr + lo, a * c + b * s)
    tl.store(x_ptr + lo + HALF, b * c - a * s)
"""
SECTIONS_ROW = ("rotate_sections", "*bf16:16,i32:16,*bf16:16,*bf16:16", {"SPLIT": 16, "ROWS": 8, "HALF": 64})


def test_paired_subtraction_of_products_negates_scalars_as_tritons(tmp_path):
    """No `neg.bf16x2` (ptxas keeps it as an instruction; it folds each scalar `neg.bf16` into
    its HFMA2) and as many `neg.bf16` as Triton's PTX.
    The sums stay paired. Before bf16_sub the subtraction took `mul.bf16x2`, `neg.bf16x2`,
    `fma.rn.bf16x2`: a rotary backward of that form ran 3-4 % slower than Triton's on an H200.
    ptxas then makes the same half-precision SASS of both PTX texts (HFMA2 with negated operands)."""
    kernel, sig, cx = SECTIONS_ROW
    out = ttbuild.compile(SECTIONS, kernel=kernel, signature=sig, constexprs=cx, until="cubin")
    ours = math_ops(out["ptx"].decode())
    assert "neg.bf16x2" not in ours and ours.get("neg.bf16") and ours.get("add.bf16x2"), ours
    path = tmp_path / "sections.py"
    path.write_text(SECTIONS)
    theirs_ptx = triton_ttgir(path, kernel, sig, cx, stage="ptx")
    assert ours["neg.bf16"] == math_ops(theirs_ptx)["neg.bf16"]
    (tmp_path / "ours.cubin").write_bytes(out["cubin"])
    (tmp_path / "theirs.cubin").write_bytes(assemble(theirs_ptx.encode(), "sm_90a"))
    assert half_sass(tmp_path / "ours.cubin") == half_sass(tmp_path / "theirs.cubin")


def half_sass(cubin) -> dict[str, int]:
    """Count of each packed half-precision SASS instruction (HADD2, HFMA2.MMA, ...) of a cubin."""
    return dict(collections.Counter(re.findall(r"\b(H(?:ADD|MUL|FMA)2(?:\.MMA)?)\b", sass(cubin))))


SUBTRACTED = """
define <2 x bfloat> @f(<2 x bfloat> %a, <2 x bfloat> %b, <2 x bfloat> %c, <2 x bfloat> %d) {
  %1 = fmul contract <2 x bfloat> %a, %b
  %2 = fmul contract <2 x bfloat> %c, <bfloat 0xR3F80, bfloat 0xR4000>
  %3 = fsub contract <2 x bfloat> %1, %2
  %4 = fsub <2 x bfloat> %3, %d
  %5 = fmul contract <2 x bfloat> %d, %d
  %6 = fsub contract <2 x bfloat> %4, %5
  %7 = fadd <2 x bfloat> %6, %5
  %8 = fmul contract <2 x bfloat> %c, %d
  %9 = fadd contract <2 x bfloat> %8, %7
  ret <2 x bfloat> %9
}
"""


def test_split_takes_fma_candidates_once_a_product_is_subtracted():
    """%3 (a product subtracted) and %9 (a product added), with their single-use products, go
    scalar lane by lane, rebuilt as pairs under their names; %4 (no `contract`), %6 (its product
    %5 has a second user) and %7 stay pairs. Without a subtraction of a product, or on fp16,
    nothing changes."""
    text = split_subtractions(SUBTRACTED)
    llvm.parse_assembly(text).verify()
    assert text.count("fmul contract bfloat") == 6 and text.count("fsub contract bfloat") == 2
    assert text.count("fadd contract bfloat") == 2
    for kept in ("%4 = fsub <2 x bfloat> %3, %d", "%6 = fsub contract <2 x bfloat> %4, %5", "%7 = fadd <2 x bfloat> %6, %5"):
        assert kept in text
    assert "%3 = insertelement <2 x bfloat>" in text and "%9 = insertelement <2 x bfloat>" in text
    assert not re.search(r"^\s*%[128] = ", text, re.M)
    adds_only = SUBTRACTED.replace("%3 = fsub contract", "%3 = fadd contract")
    assert split_subtractions(adds_only) == adds_only
    half = SUBTRACTED.replace("bfloat 0xR", "half 0xH").replace("bfloat", "half")
    assert split_subtractions(half) == half
