"""Types as values (issue 12): `.type` / `.dtype` / `.element_ty`, `tl.pointer_type` and int -> pointer casts, and runtime values passed to a helper's `tl.constexpr` parameter, each as Triton 3.6 lowers them."""

from __future__ import annotations

import re

import numpy as np
import pytest
import ttir_eval
from oracle import assert_triton_compiles

from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

HEADER = "import triton\nimport triton.language as tl\n\n\n"


def lower(src: str, kernel: str, signature: list[str], constexprs: dict | None = None) -> str:
    out = parse.run({"source": (HEADER + src).encode()}, {"kernel": kernel, "file": "t.py"})
    return ttir.run({"json": out["json"]}, {"signature": signature, "constexprs": constexprs or {}})["ttir"].decode()


ELEMENT_TY = """@triton.jit
def k(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    tl.static_assert(Y.dtype.element_ty == Y.type.element_ty)
    tl.static_assert((X + offs).type.element_ty == X.type)
    tl.static_assert((X + offs).dtype.element_ty == X.dtype.element_ty)
    tl.static_assert(x.type.element_ty == X.dtype.element_ty)
    tl.static_assert(x.type.shape == (BLOCK,))
    tl.store(Y + offs, (x * 2).to(Y.dtype.element_ty))
"""


@pytest.mark.parametrize("xt,yt", [("fp32", "fp16"), ("fp16", "bf16"), ("fp32", "fp32")])
def test_element_ty_of_pointer_and_block_types(xt, yt):
    text = lower(ELEMENT_TY, "k", [f"*{xt}", f"*{yt}"], {"BLOCK": 64})
    mlir = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
    stored = re.search(r'"tt.store"\(%\w+, %\w+\).*: \(tensor<64x!tt.ptr<(\w+)>>, tensor<64x(\w+)>\)', text)
    assert stored and stored.groups() == (mlir[yt], mlir[yt]), text


def test_element_ty_of_a_non_pointer_type_is_an_error():
    src = "@triton.jit\ndef k(X, n):\n    tl.store(X, n.type.element_ty)\n"
    with pytest.raises(CompilationError, match="i32 has no attribute|dtype has no attribute"):
        lower(src, "k", ["*i32", "i32"])


POINTER_TABLE = """@triton.jit
def k(table, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for g in range(2):
        p = tl.load(table + g).to(tl.pointer_type(tl.float32))
        tl.static_assert(p.dtype == tl.pointer_type(tl.float32))
        tl.store(out + g * BLOCK + offs, tl.load(p + offs) + g)
"""


def test_pointer_from_a_table_is_int_to_ptr_and_loads_through_it():
    text = lower(POINTER_TABLE, "k", ["*i64", "*fp32"], {"BLOCK": 8})
    assert re.search(r'"tt.int_to_ptr"\(%\w+\) : \(i64\) -> !tt.ptr<f32>', text), text
    assert text.count('"tt.load"') == 2 and '!tt.ptr<i64>' in text


def test_pointer_type_rejects_other_address_spaces():
    src = "@triton.jit\ndef k(t):\n    p = tl.load(t).to(tl.pointer_type(tl.float32, 3))\n    tl.store(p, 1.0)\n"
    with pytest.raises(CompilationError, match="address_space=1"):
        lower(src, "k", ["*i64"])


RUNTIME_INTO_CONSTEXPR = """@triton.jit
def helper(x, K: tl.constexpr, offs: tl.constexpr, STAGE: tl.constexpr):
    if STAGE == 1:
        return x * K + offs
    else:
        return x - offs


@triton.jit
def k(p, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + n
    tl.store(p + tl.arange(0, BLOCK), helper(1.5, n, offs, 1).to(p.dtype.element_ty))
    tl.store(p + BLOCK + tl.arange(0, BLOCK), helper(1.5, n, offs, 2).to(p.dtype.element_ty))
"""


def test_runtime_value_into_a_helpers_constexpr_parameter_stays_runtime():
    """Tutorial 06 passes `offs_m` and `N_CTX` to `_attn_fwd_inner`'s tl.constexpr parameters;
    Triton decides constexpr-ness by the value passed, so both compute at run time."""
    text = lower(RUNTIME_INTO_CONSTEXPR, "k", ["*fp32", "i32"], {"BLOCK": 16})
    bufs = {"p": np.full(32, -7.0, np.float32)}
    n = 5
    ttir_eval.run(text, ["p", n], bufs)
    offs = np.arange(16, dtype=np.float32) + n
    np.testing.assert_array_equal(bufs["p"][:16], 1.5 * n + offs)
    np.testing.assert_array_equal(bufs["p"][16:], 1.5 - offs)


def test_triton_accepts_the_ttir(tmp_path):
    paths = []
    for name, (src, sig, cx) in {
            "element_ty": (ELEMENT_TY, ["*fp32", "*fp16"], {"BLOCK": 64}),
            "table": (POINTER_TABLE, ["*i64", "*fp32"], {"BLOCK": 8}),
            "runtime_constexpr": (RUNTIME_INTO_CONSTEXPR, ["*fp32", "i32"], {"BLOCK": 16})}.items():
        p = tmp_path / f"{name}.ttir"
        p.write_text(lower(src, "k", sig, cx))
        paths.append(p)
    assert_triton_compiles(paths)
