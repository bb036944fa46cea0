"""A program's row address (`pointer + program_id * stride`) reaches PTX as one `mad.wide.s32`, as in
Triton 3.6's PTX (its make_ptx passes `nvptx-mad-wide-opt` to codegen; ours fuses only warp-uniform
operands, ttbuild.backend.nvptx.mad_wide), so ptxas computes it on the uniform datapath (UIMAD /
ULEA) as for Triton's.

Kernel: tests/data/row_address.py (ours)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from oracle import triton_ttgir
from ptx_util import sass

import ttbuild
from ttbuild.backend.nvptx.mad_wide import fuse, uniform_registers
from ttbuild.backend.nvptx.ptxas import assemble

SOURCE = Path(__file__).parents[2] / "data" / "row_address.py"
MAD_S32 = re.compile(r"^\s*mad\.wide\.s32\s", re.M)


@pytest.mark.parametrize("sig", ["*bf16:16,i32:16,*bf16:16,i32:16,i32", "*fp32,i32,*fp32,i32,i32"])
def test_row_addresses_are_mad_wide_as_tritons(sig, tmp_path):
    """Both rows' addresses are `mad.wide.s32` (LLVM's codegen gives `mul.wide.s32` then `add.s64`,
    and ptxas IMAD.WIDE on vector registers: 2-3 % of a one-wave softmax's time on an H200), as
    many as in Triton's PTX, and the SASS computes them with UIMAD as Triton's does."""
    cx = {"BLOCK": 1024}
    out = ttbuild.compile(SOURCE, kernel="scale_rows", signature=sig, constexprs=cx, num_warps=4, until="cubin")
    ours = out["ptx"].decode()
    assert len(MAD_S32.findall(ours)) == 2, ours
    theirs = triton_ttgir(SOURCE, "scale_rows", sig, cx, stage="ptx")
    assert len(MAD_S32.findall(ours)) == len(MAD_S32.findall(theirs))
    (tmp_path / "ours.cubin").write_bytes(out["cubin"])
    (tmp_path / "theirs.cubin").write_bytes(assemble(theirs.encode(), "sm_90a"))
    assert "UIMAD" in sass(tmp_path / "ours.cubin") and "UIMAD" in sass(tmp_path / "theirs.cubin")


PTX = """
	ld.param.b64 	%rd1, [k_param_0];
	ld.param.b32 	%r1, [k_param_1];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %tid.x;
	mul.lo.s32 	%r4, %r1, %r2;
	mul.wide.s32 	%rd2, %r4, 2;
	add.s64 	%rd3, %rd1, %rd2;
	mul.wide.u32 	%rd4, %r3, 2;
	add.s64 	%rd5, %rd3, %rd4;
	mul.wide.s32 	%rd6, %r4, 4;
	add.s64 	%rd7, %rd6, %rd1;
	add.s64 	%rd8, %rd6, %rd3;
	@%p1 mul.wide.s32 	%rd9, %r4, 8;
	add.s64 	%rd10, %rd1, %rd9;
	mul.wide.s32 	%rd11, %r4, 2;
	add.s64 	%rd12, %rd5, %rd11;
"""


def test_fuse_takes_uniform_products_and_bases_only():
    """The program's row address (%rd3: parameter base, `%ctaid.x * stride`) becomes one
    `mad.wide.s32` in the add's place; the thread's offset (%tid.x), a product used twice, a
    predicated product and a non-uniform base (%rd5) stay as they were."""
    out = fuse(PTX)
    assert "mad.wide.s32 \t%rd3, %r4, 2, %rd1;" in out and "%rd2," not in out
    assert out.count("mad.wide") == 1
    for kept in ("mul.wide.u32 \t%rd4, %r3, 2;", "add.s64 \t%rd7, %rd6, %rd1;", "@%p1 mul.wide.s32", "add.s64 \t%rd12, %rd5, %rd11;"):
        assert kept in out
    assert uniform_registers(PTX.split("\n")) >= {"%rd1", "%r1", "%r2", "%r4", "%rd3"}
    assert not {"%r3", "%rd4", "%rd5"} & uniform_registers(PTX.split("\n"))
