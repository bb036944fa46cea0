"""16-bit float math on tensors stays scalar in the PTX, as in Triton 3.6's (oracle): no `.bf16x2`/`.f16x2` arithmetic."""

from __future__ import annotations

import collections
import json
import re

import pytest
from oracle import run_triton

import ttbuild
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
