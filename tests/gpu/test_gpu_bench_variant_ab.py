"""benchmarks/bench_variant_ab.py on the GPU: one kernels/ variant from the same library on both sides (a control) times both and writes its JSON line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.gpu


def test_control_run_times_both_sides(lib, tmp_path, capsys):
    if "add_kernel_fp32" not in {n for g in lib.kernel_groups() for n in g.names}:
        pytest.skip("no add_kernel_fp32 in the library")
    spec = importlib.util.spec_from_file_location("bench_variant_ab", REPO / "benchmarks" / "bench_variant_ab.py")
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    out = tmp_path / "ab.jsonl"
    n = 1 << 22
    d = str(lib.lib_dir)  # the lib/ folder: the benchmark takes it as well as its parent
    rc = ab.main([d, d, "add_kernel_fp32", "--grid", str(n // 1024), "--rounds", "2", "--calls", "5",
                  "--arg", f"x_ptr=fp32[{n}]", "--arg", f"y_ptr=fp32[{n}]", "--arg", f"output_ptr=fp32[{n}]",
                  "--arg", f"n_elements={n}", "--json", str(out)])
    assert rc == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    assert len(row["rounds"]["A"]) == len(row["rounds"]["B"]) == 2
    assert row["A"]["us"] > 0 and row["B"]["us"] > 0
    assert row["x_A"] == pytest.approx(row["A"]["us"] / row["B"]["us"])
    assert "x A = " in capsys.readouterr().out
    # a runtime parameter left out is named, and nothing launches
    assert ab.main([d, d, "add_kernel_fp32", "--grid", "4", "--arg", "x_ptr=fp32[8]"]) == 2
    assert "no --arg for y_ptr, output_ptr, n_elements" in capsys.readouterr().err


def test_served_against_tritons_build_of_the_same_source(lib, tmp_path, capsys):
    """Side B as `triton:kernels/vector_add.py`: Triton's JIT of the source the variant was built
    from, with the row's constexprs and num_warps, timed the same way."""
    pytest.importorskip("triton")
    if "add_kernel_fp32" not in {n for g in lib.kernel_groups() for n in g.names}:
        pytest.skip("no add_kernel_fp32 in the library")
    spec = importlib.util.spec_from_file_location("bench_variant_ab", REPO / "benchmarks" / "bench_variant_ab.py")
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    out = tmp_path / "ab.jsonl"
    n = 1 << 22
    rc = ab.main([str(lib.lib_dir), f"triton:{REPO / 'kernels' / 'vector_add.py'}", "add_kernel_fp32",
                  "--grid", str(n // 1024), "--rounds", "2", "--calls", "5",
                  "--arg", f"x_ptr=fp32[{n}]", "--arg", f"y_ptr=fp32[{n}]", "--arg", f"output_ptr=fp32[{n}]",
                  "--arg", f"n_elements={n}", "--json", str(out)])
    assert rc == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    assert len(row["rounds"]["B"]) == 2 and row["B"]["us"] > 0 and row["A"]["us"] > 0
