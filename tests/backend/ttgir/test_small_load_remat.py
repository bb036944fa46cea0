"""A vector (a range, a mask, a small loaded row) needed in two layouts of a kernel without dots is made again in
each, not converted through shared memory: Triton 3.6's backward rematerialization, whose rule for loads is
lib/Dialect/TritonGPU/Transforms/Utility.cpp `isExpensiveLoadOrStore` (fewer elements than threads: cheap).

Kernel: tests/data/two_tile_gain.py (ours): a row of 64 gains scales a 32x64 and an 8x64 tile, whose layouts
differ at 4 warps (as a rotary kernel's query and key heads)."""

from __future__ import annotations

import re
from pathlib import Path

from oracle import triton_ttgir

import ttbuild

SOURCE = Path(__file__).parents[2] / "data" / "two_tile_gain.py"
ROW = ("gain_two_tiles", "*bf16:16,*bf16:16,*bf16:16", {"ROWS_A": 32, "ROWS_B": 8, "D": 64})


def _ours(until: str) -> str:
    kernel, sig, cx = ROW
    return ttbuild.compile(SOURCE, kernel=kernel, signature=sig, constexprs=cx, num_warps=4, until=until)[until].decode()


def test_the_gain_row_is_loaded_per_layout_not_converted():
    g = _ours("ttgir")
    assert g.count('"ttg.convert_layout"') == 0
    assert g.count('"tt.load"') == 4  # the row twice (one per tile layout), and the two tiles
    assert "ttg.shared = 0 : i32" in g


def test_a_load_as_big_as_the_cta_is_still_converted():
    """128 gains for 128 threads: not fewer elements than threads, so converted (Triton's rule)."""
    kernel, sig, _ = ROW
    g = ttbuild.compile(SOURCE, kernel=kernel, signature=sig, constexprs={"ROWS_A": 16, "ROWS_B": 4, "D": 128},
                        num_warps=1, until="ttgir")["ttgir"].decode()
    assert g.count('"tt.load"') == 3 and g.count('"ttg.convert_layout"') >= 1




def test_triton_loads_and_converts_the_same():
    text = triton_ttgir(SOURCE, *ROW)
    theirs = [text.count("ttg.convert_layout"), text.count("tt.load ")]
    g = _ours("ttgir")
    assert [g.count('"ttg.convert_layout"'), len(re.findall(r'"tt\.load"', g))] == theirs
