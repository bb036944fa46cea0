"""The compile-time benchmarks (benchmarks/bench_compile.py, bench_ptx_llvm.py) compile each library row with the options the build gives it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ttbuild.graph.variants import load_variants
from ttbuild.options import Options

REPO = Path(__file__).resolve().parent.parent


def _bench_compile():
    spec = importlib.util.spec_from_file_location("bench_compile", REPO / "benchmarks" / "bench_compile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rows_compile_with_the_build_options():
    bc = _bench_compile()
    rows = bc.library_rows()
    built = {v.name: v.options for v in load_variants(REPO / "kernels")}
    checked = 0
    for name, row in rows.items():
        if name not in built:  # the benchmark's own extra rows
            continue
        assert Options(**bc.row_options(row)) == built[name], name
        checked += 1
    assert checked >= 90
    # The rows that used to lose their option (they compiled on wgmma).
    assert [n for n, r in rows.items() if bc.row_options(r).get("disable_mma_v3")] == [
        n for n, o in built.items() if o.disable_mma_v3]
