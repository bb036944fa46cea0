"""benchmarks/bench_variant_ab.py reads its `--arg` specs, checks them against the variant's runtime parameters and summarizes alternated rounds as the docstring says."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

from ttbuild.runtime.metadata import Param

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ab():
    spec = importlib.util.spec_from_file_location("bench_variant_ab", REPO / "benchmarks" / "bench_variant_ab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tensor_specs_take_dtype_shape_and_fill(ab):
    assert ab.parse_spec("bf16[8192,4096]") == ("tensor", "bf16", (8192, 4096), "randn")
    assert ab.parse_spec("bf16[8192, 4096]:rand") == ("tensor", "bf16", (8192, 4096), "rand")
    assert ab.parse_spec("i32[16]") == ("tensor", "i32", (16,), "zeros")  # integers default to zeros
    assert ab.parse_spec("fp32[]:ones") == ("tensor", "fp32", (), "ones")


def test_scalar_specs(ab):
    assert ab.parse_spec("4096") == ("value", 4096)
    assert ab.parse_spec("1e-6") == ("value", 1e-6)
    assert ab.parse_spec("True") == ("value", True)
    assert ab.parse_spec("none") == ("value", None)


@pytest.mark.parametrize("text, words", [
    ("bf17[4]", "unknown dtype 'bf17'"),
    ("bf16[4]:noise", "unknown fill 'noise'"),
    ("x4", "cannot read 'x4'"),
])
def test_bad_specs_say_what_is_wrong(ab, text, words):
    with pytest.raises(ab.SpecError, match=words.replace("[", r"\[")):
        ab.parse_spec(text)


def test_arg_list_names_the_bad_item(ab):
    assert ab.parse_args_list(["n=7", "x=fp16[8]"]) == {"n": ("value", 7), "x": ("tensor", "fp16", (8,), "randn")}
    with pytest.raises(ab.SpecError, match="--arg x: unknown dtype"):
        ab.parse_args_list(["x=half[8]"])
    with pytest.raises(ab.SpecError, match="expected NAME=SPEC"):
        ab.parse_args_list(["4096"])
    with pytest.raises(ab.SpecError, match="--arg n: given twice"):
        ab.parse_args_list(["n=1", "n=2"])


def _variant(*params):
    return types.SimpleNamespace(variant="k_0", params=params)


def test_runtime_names_skip_constexprs_and_fold_descriptors(ab):
    v = _variant(Param("x_ptr", "pointer", "fp32", 16), Param("n", "scalar", "i32"),
                 Param("BLOCK", "constexpr", value=1024))
    assert ab.runtime_names(v) == ["x_ptr", "n"]
    ab.check_specs(["x_ptr", "n"], {"x_ptr": None, "n": None})
    with pytest.raises(ab.SpecError, match=r"no --arg for n; no parameter named m \(runtime parameters: x_ptr, n\)"):
        ab.check_specs(["x_ptr", "n"], {"x_ptr": None, "m": None})
    desc = _variant(Param("d.tensormap", "scalar", "u64", origin="d", part="tensormap"),
                    Param("d", "pointer", "fp16", 16, origin="d", part="base"),
                    Param("d.shape0", "scalar", "i32", origin="d", part="shape"), Param("n", "scalar", "i32"))
    assert ab.runtime_names(desc) == ["d", "n"]  # one name per descriptor: a tensor given for it
    with pytest.raises(ab.SpecError, match=r"tensor-descriptor parameters \(d\) are not supported against triton:"):
        ab.runtime_names(desc, descriptors=False)


def test_summary_is_the_median_of_rounds_and_a_over_b(ab):
    s = ab.summarize({"A": [10.0, 12.0, 11.0], "B": [9.0, 10.0, 11.5]})
    assert s["A"] == {"us": 11.0, "low": 10.0, "high": 12.0}
    assert s["B"]["us"] == 10.0
    assert s["x_A"] == pytest.approx(1.1)


def test_bad_grid_exits_2_before_touching_cuda(ab, capsys):
    assert ab.main(["a", "b", "v", "--grid", "0"]) == 2
    assert "--grid '0': one to three positive integers" in capsys.readouterr().err
    assert ab.main(["a", "b", "v", "--grid", "8", "--arg", "x"]) == 2
    assert "expected NAME=SPEC" in capsys.readouterr().err


def test_triton_side_gets_every_constexpr_and_the_launch_options(ab):
    v = types.SimpleNamespace(num_warps=8, num_stages=3, params=(
        Param("x_ptr", "pointer", "bf16", 16), Param("W_row_stride", "constexpr", value=1),
        Param("BLOCK_SIZE", "constexpr", value=4096), Param("W_ptr", "constexpr", value=None)))
    assert ab.triton_constexprs(v) == {"W_row_stride": 1, "BLOCK_SIZE": 4096, "W_ptr": None,
                                      "num_warps": 8, "num_stages": 3}
    # a parameter named num_warps is Triton's to bind (sparsemax's form): its value is the row's
    v2 = types.SimpleNamespace(num_warps=8, num_stages=3, params=(Param("num_warps", "constexpr", value=4),))
    assert ab.triton_constexprs(v2) == {"num_warps": 4, "num_stages": 3}
    # a dtype constexpr goes as a live dtype (ttbuild.cxvalue.to_live: Triton's once it is imported)
    from ttbuild.cxvalue import dtype_of

    v3 = types.SimpleNamespace(num_warps=4, num_stages=3, params=(Param("X_dtype", "constexpr", value={"dtype": "bf16"}),))
    assert dtype_of(ab.triton_constexprs(v3)["X_dtype"]) == "bf16"


def test_triton_kernel_unwraps_decorators_and_names_a_missing_kernel(ab, tmp_path):
    src = tmp_path / "fake_kernels.py"
    src.write_text("class JITFunction:\n    pass\n\n\nclass Autotuner:\n    def __init__(self, fn):\n        self.fn = fn\n\n\n"
                   "inner = JITFunction()\nkernel = Autotuner(Autotuner(inner))\nplain = 3\n")
    fn = ab.triton_kernel(str(src), "kernel")
    assert type(fn).__name__ == "JITFunction"
    with pytest.raises(ab.SpecError, match=r"has no @triton.jit kernel 'missing'"):
        ab.triton_kernel(str(src), "missing")
    with pytest.raises(ab.SpecError, match=r"has no @triton.jit kernel 'plain'"):
        ab.triton_kernel(str(src), "plain")
