"""A load takes the widest access among the loads and stores of its shape and order that data flow
connects it to, through reductions and scalars as well as elementwise ops; a store keeps its own
width. Triton 3.6's rule: lib/Dialect/TritonGPU/Transforms/Coalesce.cpp (memAccessesSameOrder over
multiRootGetSlice; a store capped at its own perThread).

Kernels: tests/data/budget_rows.py (ours): an fp32 row scanned and reduced to a scalar that shifts
a bf16 row (the fp32 load widens from 4 to 8 elements per thread, so one layout serves the whole
kernel and the scan runs over half as many chunks), and a bf16 row's total spread over an fp32
row (the store stays at 4)."""

from __future__ import annotations

import re
from pathlib import Path

from oracle import triton_ttgir

import ttbuild

SOURCE = Path(__file__).parents[2] / "data" / "budget_rows.py"
BUDGET = ("spend_budget", "*fp32:16,*bf16:16,*bf16:16,i32:16", {"BLOCK": 4096})
SPREAD = ("spread_total", "*bf16:16,*fp32:16,i32:16", {"BLOCK": 4096})


def _ours(row, num_warps: int = 8) -> str:
    kernel, sig, cx = row
    return ttbuild.compile(SOURCE, kernel=kernel, signature=sig, constexprs=cx, num_warps=num_warps,
                           until="ttgir")["ttgir"].decode()


def _our_widths(text: str) -> list[int]:
    """sizePerThread of each tt.load / tt.store of our (generic-form) TTGIR, in program order."""
    return [int(w) for w in re.findall(r'"tt\.(?:load|store)"\(.*?sizePerThread = \[(\d+)\]', text)]


def _triton_widths(text: str) -> list[int]:
    """The same for Triton's (pretty-printed) TTGIR, whose encodings are aliases."""
    alias = dict(re.findall(r"^#(\w+) = #ttg\.blocked<\{sizePerThread = \[(\d+)\]", text, re.M))
    return [int(alias[a]) for a in re.findall(r"\btt\.(?:load|store) .*#(\w+)>?\s*(?:loc\(.*\))?$", text, re.M)]


def test_the_scanned_row_loads_as_wide_as_the_row_it_shifts():
    g = _ours(BUDGET)
    assert _our_widths(g) == [8, 8, 8]
    assert set(re.findall(r"sizePerThread = \[(\d+)\]", g)) == {"8"}  # one layout, no second one for the scan
    assert g.count('"ttg.convert_layout"') == 0


def test_a_store_only_group_keeps_its_own_width():
    assert _our_widths(_ours(SPREAD)) == [8, 4]


def test_widths_are_tritons():
    for row in (BUDGET, SPREAD):
        assert _our_widths(_ours(row)) == _triton_widths(triton_ttgir(SOURCE, *row, num_warps=8)), row[0]


def test_a_tile_loaded_in_a_loop_keeps_its_width_next_to_a_wider_store_after_it():
    """kernels/matmul_autotune.py at 32x64x32, 2 warps, N and K of any size: B's tile (N % 64 wraps
    its columns, so 1 element per access) is loaded in the K loop and C's tile, of the same shape
    and order, stored 8 wide after it; the loop body is its own slice, so B stays at 1 (Triton
    3.6 builds this row with B at [1, 1] too)."""
    cx = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64,
          "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "EVEN_K": False}
    g = ttbuild.compile(Path(__file__).parents[3] / "kernels" / "matmul_autotune.py", kernel="tuned_matmul_kernel",
                        signature="*fp16:16,*fp16:16,*fp16:16,i32,i32,i32,i32:16,i32:16,i32:16", constexprs=cx,
                        num_warps=2, num_stages=5, until="ttgir")["ttgir"].decode()
    widths = re.findall(r'"(tt\.load|tt\.store)"\(.*?sizePerThread = \[1, (\d+)\]', g)
    assert widths == [("tt.load", "8"), ("tt.load", "1"), ("tt.store", "8")]
