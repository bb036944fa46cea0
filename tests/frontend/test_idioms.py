"""Kernel-body idioms (tests/frontend/kernels/idioms.py): each builds, and Triton 3.6 makes the same kernel from its source and from our TTIR (op counts of its TTGIR)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from oracle import COMPARE_OPS, row_jobs, run_triton

import ttbuild
from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

KERNELS = Path(__file__).resolve().parent / "kernels"
FILE = KERNELS / "idioms.py"

# (case, kernel, signature of the non-constexpr parameters, constexprs; a None argument is a constexpr None)
CASES = [
    ("rms_0d", "rms_scale_kernel", "*fp32:16,*fp32:16,i32,fp32", {"N": 128, "EPS": 1e-6}),
    ("bias_res", "bias_act_kernel", "*fp32:16,*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK": 128}),
    ("bias_none_res_none", "bias_act_kernel", "*fp32:16,*fp32:16,i32", {"BLOCK": 128, "bias_ptr": None, "res_ptr": None}),
    ("bias_res_none", "bias_act_kernel", "*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK": 128, "res_ptr": None}),
    ("annotated", "annotated_kernel", "*fp32:16,*fp16:16,i32", {"BLOCK": 128}),
    ("reduce_twice", "decode_scores_kernel", "*fp32:16,*fp32:16,*fp32:16", {"L": 32, "D": 64}),
    ("0d_expand", "center_kernel", "*fp32:16,*fp32:16,i32", {"N": 256}),
    ("0d_ops", "zero_d_ops_kernel", "*fp32:16,*fp32:16,*i32,i32", {"N": 128}),
    ("range_kw_dtype_default", "tile_sum_kernel", "*fp16:16,*fp32:16", {"TILES": 4, "N": 128}),
    ("dtype_value_f32", "masked_peak_kernel", "*fp32:16,*fp32:16,i32", {"N": 128}),
    ("dtype_value_i64", "masked_peak_kernel", "*i64:16,*i64:16,i32", {"N": 128}),
    ("range_step_kw", "strided_sum_kernel", "*fp32:16,*fp32:16,i32", {"BLOCK": 128}),
    ("core_names", "core_names_kernel", "*fp32:16,*fp32:16", {"N": 64}),
    ("int_dtype_f32", "sign_flip_kernel", "*fp32:16,*fp32:16", {"N": 128}),
    ("int_dtype_f16", "sign_flip_kernel", "*fp16:16,*fp16:16", {"N": 128}),
    ("compare_numbers", "compare_numbers_kernel", "*fp16:16,*i16:16,*fp16:16", {"N": 128}),
]


def _ttir(kernel: str, sig: str, constexprs: dict) -> str:
    p = parse.run({"source": FILE.read_bytes()}, {"kernel": kernel, "file": "idioms.py"})
    return ttir.run({"json": p["json"]}, {"signature": sig.split(","), "constexprs": constexprs})["ttir"].decode()


def test_a_0d_full_mixes_with_the_0d_sum_as_a_scalar():
    text = _ttir("rms_scale_kernel", CASES[0][2], CASES[0][3])
    assert "tensor<f32>" not in text and "tensor<i32>" not in text
    assert '"tt.reduce"' in text and '"math.rsqrt"' in text


def test_a_0d_value_expands_to_a_block_of_one():
    text = _ttir("center_kernel", CASES[6][2], CASES[6][3])
    assert text.count("-> tensor<1xf32>") == 2 and "tensor<f32>" not in text


def test_get_int_dtype_is_tl_core_s():
    text = _ttir("sign_flip_kernel", "*fp16:16,*fp16:16", {"N": 128})
    assert text.count("tensor<128xf16>) -> tensor<128xi16>") == 1 and '"arith.shrui"' in text
    src = FILE.read_text().replace("tl.core.get_int_dtype(bitwidth", "tl.get_int_dtype(bitwidth")
    p = parse.run({"source": src.encode()}, {"kernel": "sign_flip_kernel", "file": "idioms.py"})
    with pytest.raises(CompilationError, match=r"tl.get_int_dtype; Triton 3.6 defines it as tl.core.get_int_dtype"):
        ttir.run({"json": p["json"]}, {"signature": ["*fp32", "*fp32"], "constexprs": {"N": 128}})
    src = FILE.read_text().replace("bitwidth=x.dtype.primitive_bitwidth, signed", "bitwidth=12, signed")
    p = parse.run({"source": src.encode()}, {"kernel": "sign_flip_kernel", "file": "idioms.py"})
    with pytest.raises(CompilationError, match="Unsupported bitwidth 12 and signedness True"):
        ttir.run({"json": p["json"]}, {"signature": ["*fp32", "*fp32"], "constexprs": {"N": 128}})


def test_a_comparison_with_a_number_promotes_as_a_tensor():
    text = _ttir("compare_numbers_kernel", "*fp16:16,*i16:16,*fp16:16", {"N": 128})
    assert '"arith.extf"' in text and "dense<5.000000e-01> : tensor<128xf32>" in text
    assert '"arith.extsi"' in text and "dense<0> : tensor<128xi32>" in text
    assert "dense<1.000000e+00> : tensor<128xf16>" in text  # an int number against fp16 stays fp16


@pytest.mark.parametrize("case", CASES[1:4], ids=lambda c: c[0])
def test_none_pointer_arguments_are_constexpr_none(case):
    _, kernel, sig, cx = case
    text = _ttir(kernel, sig, cx)
    loads = text.count('"tt.load"')
    assert loads == 1 + ("bias_ptr" not in cx) + ("res_ptr" not in cx)
    assert ('"arith.maxnumf"' in text) == ("res_ptr" in cx)  # `if res_ptr is None:` taken only then
    assert len(re.search(r"function_type = \(([^)]*)\)", text).group(1).split(", ")) == len(sig.split(","))


def test_is_compares_identity_as_triton():
    src = FILE.read_text() + '''

@triton.jit
def same_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = x
    tl.static_assert(x is y)
    tl.static_assert(x is not None)
    tl.static_assert(x_ptr is not y_ptr)
    tl.static_assert(BLOCK is not None)
    tl.store(y_ptr + offs, y)
'''
    p = parse.run({"source": src.encode()}, {"kernel": "same_kernel", "file": "idioms.py"})
    ttir.run({"json": p["json"]}, {"signature": ["*fp32", "*fp32"], "constexprs": {"BLOCK": 32}})


def test_annotated_locals_evaluate_their_annotation():
    text = _ttir("annotated_kernel", CASES[4][2], CASES[4][3])
    assert '"arith.truncf"' in text and "tensor<128xf16>" in text


def test_an_annotation_without_a_value_binds_none():
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p):\n    x: tl.tensor\n"
           "    tl.static_assert(x is None)\n    tl.store(p, 1)\n")
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "a.py"})
    ttir.run({"json": p["json"]}, {"signature": ["*i32"], "constexprs": {}})


@pytest.mark.parametrize("body,message", [
    ("    B: tl.constexpr = 4\n    B: tl.constexpr = 8\n", "B is already defined. constexpr cannot be reassigned."),
    ("    x: tl.dtyp = 1\n", "unknown function or attribute tl.dtyp; did you mean tl.dtype?"),
])
def test_annotation_errors(body, message):
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p):\n" + body
           + "    tl.store(p, 1)\n")
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "a.py"})
    with pytest.raises(CompilationError) as e:
        ttir.run({"json": p["json"]}, {"signature": ["*i32"], "constexprs": {}})
    assert e.value.message == message


def test_a_dtype_default_is_a_constexpr_in_the_metadata():
    """The ttir stage records a dtype default as the metadata carries a dtype ({"dtype": name},
    ttbuild.cxvalue)."""
    p = parse.run({"source": FILE.read_bytes()}, {"kernel": "tile_sum_kernel", "file": "idioms.py"})
    out = ttir.run({"json": p["json"]}, {"signature": ["*fp16:16", "*fp32:16"], "constexprs": {"TILES": 4, "N": 128}})
    params = json.loads(out["abi"])["params"]
    assert {q["name"]: q.get("value") for q in params if q["kind"] == "constexpr"} == {
        "TILES": 4, "N": 128, "acc_dtype": {"dtype": "fp32"}, "FLAT": True}
    text = out["ttir"].decode()
    assert "tt.flatten" not in text and '"scf.for"' in text  # the builtin range ignored `flatten=`


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_idiom_builds_to_ptx(case):
    _, kernel, sig, cx = case
    out = ttbuild.compile(FILE, kernel=kernel, signature=sig, constexprs=cx, until="ptx")
    assert b".entry " + kernel.encode() in out["ptx"]


def test_triton_builds_the_same_ttir(tmp_path):
    jobs = row_jobs(CASES, _ttir, tmp_path)
    out = json.loads(run_triton(COMPARE_OPS, str(FILE), json.dumps(jobs)).splitlines()[-1])
    differ = {case: (theirs, ours) for case, (theirs, ours) in out.items() if theirs != ours}
    assert len(out) == len(CASES) and not differ, json.dumps(differ, indent=1)
