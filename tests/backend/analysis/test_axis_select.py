"""Axis info of `arith.select` as Triton 3.6's SelectOpAxisInfoVisitor (lib/Analysis/AxisInfo.cpp): a constant
condition (`tl.where(CONSTEXPR == 0, a, b)`) takes the chosen operand's divisibility, so the row it picks is
loaded 16 bytes at a time; before, the select's divisibility was 1 and every element was a 2-byte load.

Kernel: tests/data/row_table_select.py (ours: a rotary table's row picked per batch or shared)."""

from __future__ import annotations

import re
from pathlib import Path

import ttbuild

SOURCE = Path(__file__).parents[2] / "data" / "row_table_select.py"
SIG = "*bf16:16,i32:16,*bf16:16,i32:16,i32:16"


def _loads(per_batch: int) -> list[str]:
    ptx = ttbuild.compile(SOURCE, kernel="scale_by_table_row", signature=SIG, constexprs={"PER_BATCH": per_batch, "D": 1024},
                          num_warps=4, until="ptx")["ptx"].decode()
    return re.findall(r"ld\.global[.a-z0-9:_]*", ptx)


def test_a_constant_condition_keeps_the_chosen_offsets_alignment():
    # 1024 bf16 over 128 threads: 8 a thread, one 16-byte load each for the row and for x
    assert _loads(0) == ["ld.global.v4.b32", "ld.global.v4.b32"]


def test_the_other_branch_is_aligned_too():
    assert _loads(1) == ["ld.global.v4.b32", "ld.global.v4.b32"]
