"""tl.dot_scaled decomposed into an upcast and tt.dot (ttbuild/frontend/dotscaled.py): the TTIR it makes for each format, fast_math dropping the NaN select, Triton's refusals at the line; tests/gpu/test_backend_gpu_reduce.py checks the values on the GPU."""

from __future__ import annotations

import textwrap

import pytest

from ttbuild.errors import CompilationError
from ttbuild.locs import locate
from ttbuild.stages import parse, ttir

HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(a_ptr, b_ptr, s_ptr, c_ptr):\n"
LOADS = ("    r64 = tl.arange(0, 64)\n    r32 = tl.arange(0, 32)\n    r2 = tl.arange(0, 2)\n"
         "    a = tl.load(a_ptr + r64[:, None] * 32 + r32[None, :])\n"
         "    b = tl.load(b_ptr + r64[:, None] * 64 + r64[None, :])\n"
         "    s = tl.load(s_ptr + r64[:, None] * 2 + r2[None, :])\n")


def _ttir(body: str, sig=("*u8:16", "*fp8e4nv:16", "*u8:16", "*fp32:16")) -> str:
    src = HEAD + LOADS + textwrap.indent(textwrap.dedent(body), "    ")
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    return ttir.run({"json": p["json"]}, {"signature": list(sig), "constexprs": {}})["ttir"].decode()


def test_e2m1_times_e4m3_is_a_bf16_dot_of_the_scaled_blocks():
    text = _ttir('c = tl.dot_scaled(a, s, "e2m1", b, s, "e4m3")\n'
                 "tl.store(c_ptr + r64[:, None] * 64 + r64[None, :], c)\n")
    (dot,) = [ln for ln in text.splitlines() if '"tt.dot"' in ln]
    assert "(tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>) -> tensor<64x64xf32>" in dot
    assert '"tt.join"' not in text and '"arith.shrsi"' in text  # each byte repeated, element k its nibble k % 2
    assert "dense<255>" in text         # the NaN select of the scales (one constant after CSE)


def test_fast_math_drops_the_nan_select_and_fp16_computes_in_fp16():
    fast = _ttir('c = tl.dot_scaled(a, s, "e2m1", b, s, "e4m3", fast_math=True)\n'
                 "tl.store(c_ptr + r64[:, None] * 64 + r64[None, :], c)\n")
    assert "255" not in fast
    half = _ttir('c = tl.dot_scaled(b.to(tl.float16), None, "fp16", b, None, "e4m3")\n'
                 "tl.store(c_ptr + r64[:, None] * 64 + r64[None, :], c)\n")
    assert "tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf32>" in half


@pytest.mark.parametrize("body, message", [
    ('c = tl.dot_scaled(a, s, "e3m2", b, s, "e4m3")\n', "NYI: lhs_format e3m2"),
    ('c = tl.dot_scaled(b, s, "e2m1", b, s, "e4m3")\n', "e2m1 format must be packed as uint8"),
    ('c = tl.dot_scaled(a, s, "e4m3", b, s, "e4m3")\n', "Reduction dimension should pack"),
    ('c = tl.dot_scaled(a, s, "e2m1", b, s, "e4m3", lhs_k_pack=False)\n', "Reduction dimension should pack"),
    ('c = tl.dot_scaled(a, s, "e2m1", b[None, :, :], s, "e4m3")\n', "Both inputs must be either 2D or 3D; "
                                                                  "(lhs: [64, 32] vs rhs: [1, 64, 64])"),
    ('c = tl.dot_scaled(b, s, "e4m3", b, s, "e4m3", rhs_k_pack=False)\n', "only mxfp4 inputs can be packed"),
    ('c = tl.dot_scaled(a, a, "e2m1", b, s, "e4m3")\n', "lhs_scale must be a tensor of shape [64, 2]. Got [64, 32]"),
])
def test_refusals_are_tritons_and_located(body, message):
    src = HEAD + LOADS + "    " + body
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": p["json"]}, {"signature": ["*u8:16", "*fp8e4nv:16", "*u8:16", "*fp32:16"], "constexprs": {}})
    err = locate(ei.value, p["loc"])
    assert message in err.message, err.message
    assert err.loc.source_line.strip().startswith("c = tl.dot_scaled")


def test_nvfp4_e4m3_scales_are_one_per_16_and_multiply_as_their_value():
    """An fp8e4nv scale block (NVFP4, tutorial 10's default) is [rows, K/16]: upcast to fp32 and
    multiplied in (no exponent arithmetic, no 255 select); uint8 stays e8m0 per 32."""
    body = ("s4 = tl.load(s_ptr.to(tl.pointer_type(tl.float8e4nv)) + r64[:, None] * 4 + tl.arange(0, 4)[None, :])\n"
            'c = tl.dot_scaled(a, s4, "e2m1", b, s4, "e4m3")\n'
            "tl.store(c_ptr + r64[:, None] * 64 + r64[None, :], c)\n")
    text = _ttir(body)
    assert "tensor<64x4xf8E4M3FN>) -> tensor<64x4xf32>" in text  # the scales' upcast
    assert "255" not in text and "dense<23>" not in text  # no e8m0 NaN select, no exponent shift
    src = HEAD + LOADS + "    " + 'c = tl.dot_scaled(a, s.to(tl.float8e4nv, bitcast=True), "e2m1", b, None, "e4m3")\n'
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": p["json"]}, {"signature": ["*u8:16", "*fp8e4nv:16", "*u8:16", "*fp32:16"], "constexprs": {}})
    assert "lhs_scale must be a tensor of shape [64, 4]. Got [64, 2]" in ei.value.message  # Triton's text
