"""A vector (a range, a mask, a small loaded row) needed in two layouts of a kernel without dots is made again in
each, not converted through shared memory: Triton 3.6's backward rematerialization, whose rule for loads is
lib/Dialect/TritonGPU/Transforms/Utility.cpp `isExpensiveLoadOrStore` (fewer elements than threads: cheap).

Kernel: tests/data/two_tile_gain.py (ours): a row of 64 gains scales a 32x64 and an 8x64 tile, whose layouts
differ at 4 warps (as a rotary kernel's query and key heads)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from oracle import run_triton

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


TRITON_COUNTS = r"""
import json, sys, importlib.util
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("k", sys.argv[1]); mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
kernel, sig, cx = json.loads(sys.argv[2])
fn = getattr(mod, kernel)
types = dict(zip([n for n in fn.arg_names if n not in cx], [s.split(":")[0] for s in sig.split(",")]))
types.update({n: "constexpr" for n in cx})
attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(sig.split(",")))}
text = triton.compile(ASTSource(fn, types, constexprs=cx, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                      options={"num_warps": 4}).asm["ttgir"]
print(json.dumps([text.count("ttg.convert_layout"), text.count("tt.load ")]))
"""


def test_triton_loads_and_converts_the_same():
    theirs = json.loads(run_triton(TRITON_COUNTS, SOURCE, json.dumps(list(ROW))).splitlines()[-1])
    g = _ours("ttgir")
    assert [g.count('"ttg.convert_layout"'), len(re.findall(r'"tt\.load"', g))] == theirs
