"""Triton's type promotion (`ttbuild.frontend.types`): hypothesis properties of the documented rules, the TTIR they produce, and Triton itself as oracle."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import run_triton, triton_python

from ttbuild.frontend import types as T
from ttbuild.stages import parse, ttir

NAMES = ["int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "fp8e4nv", "fp8e5", "fp16", "bf16", "fp32", "fp64"]
DT = st.sampled_from([T.DTYPES[n] for n in NAMES])
NUMERIC = st.sampled_from([T.DTYPES[n] for n in NAMES if not n.startswith("fp8")])


def ct(a, sa, b, sb, div=False):
    try:
        return T.computation_type(a, sa, b, sb, div)
    except TypeError:
        return "TypeError"


@given(DT, st.booleans(), DT, st.booleans(), st.booleans())
def test_commutative(a, sa, b, sb, div):
    assert ct(a, sa, b, sb, div) == ct(b, sb, a, sa, div)


@given(NUMERIC, NUMERIC, st.booleans())
def test_python_number_of_no_higher_kind_takes_the_tensor_dtype(tensor, number, div):
    """Triton: "if the scalar is of a lower or equal kind (bool < int < fp), it doesn't
    participate in the promotion"; / and % on 16-bit floats still compute in fp32."""
    if number.kind() > tensor.kind():
        return
    want = T.fp32 if div and tensor in (T.fp16, T.bf16) else tensor
    assert ct(tensor, False, number, True, div) == want


@given(NUMERIC, NUMERIC)
def test_float_beats_int_and_wider_float_wins(a, b):
    r = ct(a, False, b, False)
    if a.is_float() or b.is_float():
        assert r.is_float()
        widest = max((x.bits for x in (a, b) if x.is_float()))
        assert r.bits >= widest
        if {a, b} == {T.fp16, T.bf16}:
            assert r == T.fp16  # Triton's rule 3 (half) comes before rule 4 (bf16)
    else:
        assert r.is_int() and r.bits == max(a.bits, b.bits)


@given(st.sampled_from([T.DTYPES[n] for n in NAMES if "int" in n and n != "int1"]),
       st.sampled_from([T.DTYPES[n] for n in NAMES if "int" in n and n != "int1"]))
def test_integer_usual_arithmetic_conversions(a, b):
    r = T.integer_promote(a, b)
    if a.is_unsigned() == b.is_unsigned():
        assert r.bits == max(a.bits, b.bits) and r.is_unsigned() == a.is_unsigned()
    else:
        u, s = (a, b) if a.is_unsigned() else (b, a)
        assert r == (u if u.bits >= s.bits else s)
        if a.is_unsigned() != b.is_unsigned():
            assert ct(a, False, b, False, div=True) == "TypeError"


@given(st.integers(-2**64, 2**64))
def test_python_int_dtype(v):
    if -2**31 <= v < 2**31:
        assert T.dtype_of_python(v) == T.int32
    elif 2**31 <= v < 2**32:
        assert T.dtype_of_python(v) == T.uint32
    elif -2**63 <= v < 2**63:
        assert T.dtype_of_python(v) == T.int64
    elif 0 < v < 2**64:
        assert T.dtype_of_python(v) == T.uint64
    else:
        with pytest.raises(TypeError):
            T.dtype_of_python(v)


@given(st.floats(allow_nan=True))
def test_python_float_dtype(v):
    import struct
    fits = v != v or v in (0.0, float("inf"), float("-inf")) or 2**-126 <= abs(v) <= struct.unpack(">f", b"\x7f\x7f\xff\xff")[0]
    assert T.dtype_of_python(v) == (T.fp32 if fits else T.fp64)


SIG = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
       "uint32": "u32", "uint64": "u64", "fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "fp64": "fp64"}
KERNEL = b"""
import triton
import triton.language as tl

@triton.jit
def k(a_ptr, b_ptr, out_ptr):
    offs = tl.arange(0, 64)
    tl.store(out_ptr + offs, tl.load(a_ptr + offs) OP tl.load(b_ptr + offs))
"""


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(SIG)), st.sampled_from(sorted(SIG)), st.sampled_from(["+", "*", "-"]))
def test_ttir_computes_in_the_promoted_dtype(a, b, op):
    """The arith op in the TTIR has operands of computation_type(a, b): the rule is what the IR does."""
    want = ct(T.DTYPES[a], False, T.DTYPES[b], False)
    p = parse.run({"source": KERNEL.replace(b"OP", op.encode())}, {"kernel": "k", "file": "k.py"})
    text = ttir.run({"json": p["json"]}, {"signature": [f"*{SIG[a]}", f"*{SIG[b]}", "*fp32"], "constexprs": {}})["ttir"].decode()
    name = {"+": "add", "*": "mul", "-": "sub"}[op] + ("f" if want.is_float() else "i")
    line = next(l for l in text.splitlines() if f'"arith.{name}"' in l)
    assert line.split("->")[-1].strip().startswith(f"tensor<64x{want.mlir}>"), line


ORACLE = """
import json, sys
import triton.language as tl
from triton.language.semantic import TritonSemantic
sem = TritonSemantic.__new__(TritonSemantic)
names = json.loads(sys.argv[1])
out = {}
for a in names:
    for b in names:
        for sa in (False, True):
            for sb in (False, True):
                for div in (False, True):
                    try:
                        r = sem.computation_type_impl(tl.dtype(a), sa, tl.dtype(b), sb, div).name
                    except TypeError:
                        r = "TypeError"
                    out[f"{a},{int(sa)},{b},{int(sb)},{int(div)}"] = r
print(json.dumps(out))
"""


def test_whole_table_matches_triton():
    """Every (dtype, is-number) pair and div flag against Triton's own computation_type_impl.
    Runs where triton is importable or TTBUILD_TRITON_PYTHON names a Python that has it."""
    triton_python()  # skip before generating the cases when no Triton can be found
    theirs = json.loads(run_triton(ORACLE, json.dumps(NAMES), timeout=300))
    mismatches = []
    for key, want in theirs.items():
        a, sa, b, sb, div = key.split(",")
        got = ct(T.DTYPES[a], sa == "1", T.DTYPES[b], sb == "1", div == "1")
        got = got if isinstance(got, str) else got.name
        if got != want:
            mismatches.append((key, got, want))
    assert len(theirs) == len(NAMES) ** 2 * 8 and not mismatches, mismatches[:20]
