"""benchmarks/bench_variant_ab.py on the GPU: one kernels/ variant timed from the same library on both sides (a control) and against Triton's JIT of its source, each writing its JSON line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
N = 1 << 22  # add_kernel_fp32's elements: 4096 programs of 1024
ADD_ARGS = ["--grid", str(N // 1024), "--rounds", "2", "--calls", "5", "--arg", f"x_ptr=fp32[{N}]",
            "--arg", f"y_ptr=fp32[{N}]", "--arg", f"output_ptr=fp32[{N}]", "--arg", f"n_elements={N}"]

pytestmark = pytest.mark.gpu


@pytest.fixture
def ab(lib):
    """The benchmark as a module, when the library has add_kernel_fp32."""
    if "add_kernel_fp32" not in {n for g in lib.kernel_groups() for n in g.names}:
        pytest.skip("no add_kernel_fp32 in the library")
    spec = importlib.util.spec_from_file_location("bench_variant_ab", REPO / "benchmarks" / "bench_variant_ab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_control_run_times_both_sides(ab, lib, tmp_path, capsys):
    out = tmp_path / "ab.jsonl"
    d = str(lib.lib_dir)  # the lib/ folder: the benchmark takes it as well as its parent
    assert ab.main([d, d, "add_kernel_fp32", *ADD_ARGS, "--json", str(out)]) == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    assert len(row["rounds"]["A"]) == len(row["rounds"]["B"]) == 2
    assert row["A"]["us"] > 0 and row["B"]["us"] > 0
    assert row["x_A"] == pytest.approx(row["A"]["us"] / row["B"]["us"])
    assert "x A = " in capsys.readouterr().out
    # a runtime parameter left out is named, and nothing launches
    assert ab.main([d, d, "add_kernel_fp32", "--grid", "4", "--arg", "x_ptr=fp32[8]"]) == 2
    assert "no --arg for y_ptr, output_ptr, n_elements" in capsys.readouterr().err


def test_served_against_tritons_build_of_the_same_source(ab, lib, tmp_path, capsys):
    """Side B as `triton:kernels/vector_add.py`: Triton's JIT of the source the variant was built
    from, with the row's constexprs and num_warps, timed the same way."""
    pytest.importorskip("triton")
    out = tmp_path / "ab.jsonl"
    source = f"triton:{REPO / 'kernels' / 'vector_add.py'}"
    assert ab.main([str(lib.lib_dir), source, "add_kernel_fp32", *ADD_ARGS, "--json", str(out)]) == 0, \
        capsys.readouterr().err
    row = json.loads(out.read_text())
    assert len(row["rounds"]["B"]) == 2 and row["B"]["us"] > 0 and row["A"]["us"] > 0
    assert "x Triton = " in capsys.readouterr().out


def test_a_descriptor_parameter_takes_a_tensor(ab, lib, tmp_path, capsys):
    """A host-descriptor matmul timed against itself: each `tensordesc` parameter is given a tensor
    (one --arg per descriptor), which the runtime makes a descriptor of the row's block shape."""
    name = "matmul_hostdesc_fp16_128x128x64_w4_s4"
    if name not in {n for g in lib.kernel_groups() for n in g.names}:
        pytest.skip(f"no {name} in the library")
    out = tmp_path / "ab.jsonl"
    d = str(lib.lib_dir)
    args = ["--grid", "16", "--rounds", "2", "--calls", "3", "--arg", "a_desc=fp16[512,512]",
            "--arg", "b_desc=fp16[512,512]", "--arg", "c_desc=fp16[512,512]", "--arg", "M=512", "--arg", "N=512",
            "--arg", "K=512"]
    assert ab.main([d, d, name, *args, "--json", str(out)]) == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    assert row["A"]["us"] > 0 and row["B"]["us"] > 0
