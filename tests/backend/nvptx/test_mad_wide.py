"""A program's row address (`pointer + program_id * stride`) reaches PTX as one `mad.wide.s32`, as in
Triton 3.6's PTX (its make_ptx passes `nvptx-mad-wide-opt` to codegen), so ptxas computes it on the
uniform datapath (UIMAD / ULEA) as for Triton's.

Kernel: tests/data/row_address.py (ours)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from oracle import triton_ttgir
from ptx_util import sass

import ttbuild
from ttbuild.backend.nvptx.ptxas import assemble

SOURCE = Path(__file__).parents[2] / "data" / "row_address.py"
MAD_S32 = re.compile(r"^\s*mad\.wide\.s32\s", re.M)


@pytest.mark.parametrize("sig", ["*bf16:16,i32:16,*bf16:16,i32:16,i32", "*fp32,i32,*fp32,i32,i32"])
def test_row_addresses_are_mad_wide_as_tritons(sig, tmp_path):
    """Both rows' addresses are `mad.wide.s32` (codegen without the flag gave `mul.wide.s32` then
    `add.s64`, and ptxas IMAD.WIDE on vector registers: 2-3 % of a one-wave softmax's time on an
    H200), as many as in Triton's PTX, and the SASS computes them with UIMAD as Triton's does."""
    cx = {"BLOCK": 1024}
    out = ttbuild.compile(SOURCE, kernel="scale_rows", signature=sig, constexprs=cx, num_warps=4, until="cubin")
    ours = out["ptx"].decode()
    assert len(MAD_S32.findall(ours)) == 2, ours
    theirs = triton_ttgir(SOURCE, "scale_rows", sig, cx, stage="ptx")
    assert len(MAD_S32.findall(ours)) == len(MAD_S32.findall(theirs))
    (tmp_path / "ours.cubin").write_bytes(out["cubin"])
    (tmp_path / "theirs.cubin").write_bytes(assemble(theirs.encode(), "sm_90a"))
    assert "UIMAD" in sass(tmp_path / "ours.cubin") and "UIMAD" in sass(tmp_path / "theirs.cubin")
