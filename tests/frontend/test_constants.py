"""Float constants: our hex bit patterns for every float dtype equal MLIR's own APFloat conversion (round to nearest even), inf/nan included."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ttbuild.frontend.irtext import float_bits
from ttbuild.frontend.types import DTYPES

MLIR_TYPES = {"fp8e4nv": "f8E4M3FN", "fp8e5": "f8E5M2", "fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64"}
LIMITS = {"fp8e4nv": 448.0, "fp8e5": 57344.0, "fp16": 65504.0, "bf16": 3.3e38, "fp32": 3.4e38, "fp64": 1.7e308}


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(MLIR_TYPES)), st.floats(allow_nan=False, allow_infinity=False))
def test_bits_match_mlir_apfloat(name, value):
    from mlir import ir

    if abs(value) > LIMITS[name]:  # out of range: ours rounds to inf (NaN for e4m3fn, which has no inf)
        value = math.copysign(LIMITS[name], value)
    with ir.Context(), ir.Location.unknown():
        ours = ir.Attribute.parse(f"{float_bits(value, DTYPES[name])} : {MLIR_TYPES[name]}")
        theirs = ir.FloatAttr.get(ir.Type.parse(MLIR_TYPES[name]), value)
        assert str(ours) == str(theirs), (name, value)


def test_specials():
    assert float_bits(float("inf"), DTYPES["fp32"]) == "0x7F800000"
    assert float_bits(float("-inf"), DTYPES["fp16"]) == "0xFC00"
    assert float_bits(1e6, DTYPES["fp16"]) == "0x7C00"  # past the format: inf, as a C cast
    assert float_bits(1e9, DTYPES["fp8e4nv"]) == "0x7F"  # e4m3fn has no inf: NaN
    assert float_bits(-1e9, DTYPES["fp8e5"]) == "0xFC"
    assert float_bits(float("nan"), DTYPES["bf16"]) == "0x7FC0"
    # rounded once, from the double (through fp16 / fp32 a value just past a tie became the tie,
    # which then rounded to even, down): 72.03125 -> 80 in e5m2, 1 + 2**-8 + 2**-30 -> 1 + 2**-7
    assert float_bits(72.03125, DTYPES["fp8e5"]) == "0x55"
    assert float_bits(1 + 2 ** -8 + 2 ** -30, DTYPES["bf16"]) == "0x3F81"
