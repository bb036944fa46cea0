"""The kernel ABI the ttir stage records (`abi` output, ttbuild.frontend.abi): one entry per kernel parameter the TTIR's function takes, in order, with its origin; constexprs with the value they were built with."""

from __future__ import annotations

import json
import re

import pytest

import ttbuild
from ttbuild.errors import CompilationError

SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def abi_kernel(x_ptr, stride, n, bias, desc, BLOCK: tl.constexpr, HALF: tl.constexpr = BLOCK // 2,
               ACC: tl.constexpr = tl.float16, NOTHING: tl.constexpr = None):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n)
    if bias is not None:
        x += tl.load(bias + offs, mask=offs < n)
    tile = desc.load([0, 0])
    desc.store([16, 0], tile)
    tl.store(x_ptr + offs * stride, x, mask=offs < n)
'''
SIGNATURE = "*fp32:16,i32:16,tensordesc<fp16[16, 32]>"
# `stride` specialised to 1 (Triton's == 1), `bias` a None argument, BLOCK a tl.constexpr
CONSTEXPRS = {"stride": 1, "bias": None, "BLOCK": 64}


def _abi(tmp_path, target="cuda:80", signature=SIGNATURE, constexprs=CONSTEXPRS):
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    out = ttbuild.compile(path, kernel="abi_kernel", signature=signature, constexprs=constexprs, target=target,
                          until="ttir")
    return json.loads(out["abi"]), out["ttir"].decode()


def _function_type(ttir: str) -> list[str]:
    """The argument types of the TTIR kernel's function_type."""
    args = re.search(r"function_type = \((.*?)\) -> \(\)", ttir).group(1)
    return re.findall(r"!tt\.ptr<\w+>|!tt\.tensordesc<tensor<[^>]*>>|i\d+|f\d+", args)


def _desc_entries(tensormap: bool) -> list[dict]:
    lead = [{"name": "desc.tensormap", "kind": "scalar", "dtype": "u64", "divisibility": 1, "origin": "desc",
             "part": "tensormap"}] if tensormap else []
    return lead + [
        {"name": "desc", "kind": "pointer", "dtype": "fp16", "divisibility": 16, "origin": "desc", "part": "base"},
        {"name": "desc.shape0", "kind": "scalar", "dtype": "i32", "divisibility": 1, "origin": "desc", "part": "shape"},
        {"name": "desc.shape1", "kind": "scalar", "dtype": "i32", "divisibility": 1, "origin": "desc", "part": "shape"},
        {"name": "desc.stride0", "kind": "scalar", "dtype": "i64", "divisibility": 1, "origin": "desc",
         "part": "stride"},
    ]


def _expected(tensormap: bool) -> list[dict]:
    return [
        {"name": "x_ptr", "kind": "pointer", "dtype": "fp32", "divisibility": 16, "origin": "x_ptr"},
        {"name": "stride", "kind": "constexpr", "value": 1, "origin": "stride", "specialized": True},
        {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 16, "origin": "n"},
        {"name": "bias", "kind": "constexpr", "value": None, "origin": "bias", "specialized": True},
        *_desc_entries(tensormap),
        {"name": "BLOCK", "kind": "constexpr", "value": 64, "origin": "BLOCK"},
        # defaults as the compiler evaluates them (a computed one, a dtype, None)
        {"name": "HALF", "kind": "constexpr", "value": 32, "origin": "HALF"},
        {"name": "ACC", "kind": "constexpr", "value": {"dtype": "fp16"}, "origin": "ACC"},
        {"name": "NOTHING", "kind": "constexpr", "value": None, "origin": "NOTHING"},
    ]


def test_the_ttir_stage_records_the_parameters_it_emitted(tmp_path):
    abi, ttir = _abi(tmp_path)
    assert abi["params"] == _expected(tensormap=False)
    assert abi["descriptors"] == [{"name": "desc", "dtype": "fp16", "block_shape": [16, 32], "tensormap": False}]
    # the TTIR's kernel takes exactly the pointer and scalar entries, in order, with their types
    assert _function_type(ttir) == ["!tt.ptr<f32>", "i32", "!tt.ptr<f16>", "i32", "i32", "i64"]
    assert len(_function_type(ttir)) == sum(p["kind"] != "constexpr" for p in abi["params"])


def test_a_tma_descriptor_takes_its_map_address_first(tmp_path):
    abi, ttir = _abi(tmp_path, target="cuda:90")
    assert abi["params"] == _expected(tensormap=True)
    assert abi["descriptors"][0]["tensormap"] is True
    # the IR takes the descriptor where the cubin takes its CUtensorMap's address
    assert _function_type(ttir)[2:4] == ["!tt.tensordesc<tensor<16x32xf16>>", "!tt.ptr<f16>"]


def test_a_variant_value_is_recorded_as_the_variant_gives_it(tmp_path):
    abi, _ = _abi(tmp_path, constexprs=dict(CONSTEXPRS, HALF=8, ACC={"dtype": "fp32"}))
    values = {p["name"]: p["value"] for p in abi["params"] if p["kind"] == "constexpr"}
    assert values["HALF"] == 8 and values["ACC"] == {"dtype": "fp32"}


@pytest.mark.parametrize("signature, constexprs, why", [
    ("*fp32:16,i32:16", CONSTEXPRS, "signature has 2 entries but abi_kernel has 3 non-constexpr parameters"),
    (SIGNATURE, {"stride": 1, "bias": None}, "constexpr parameter 'BLOCK' has no value"),
    (SIGNATURE, dict(CONSTEXPRS, NOPE=1), "constexprs name no parameter of abi_kernel: NOPE"),
])
def test_a_signature_or_constexprs_that_do_not_fit_are_the_ttir_stages_error(tmp_path, signature, constexprs, why):
    with pytest.raises(CompilationError, match=re.escape(why)):
        _abi(tmp_path, signature=signature, constexprs=constexprs)
