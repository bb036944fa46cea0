"""Issue 12: Triton's libdevice namespace (triton.language.extra.libdevice / tl.extra.cuda.libdevice): every function of the libdevice bitcode, by dtype, as tt.extern_elementwise, through to PTX; Triton accepts our TTIR."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import ttbuild
from ttbuild.errors import CompilationError
from ttbuild.frontend import libdevice

KERNEL = Path(__file__).parent / "kernels" / "libdevice_calls.py"
SIG = "*fp32:16,*fp64:16,*i32:16,*i64:16,*i32:16"


def test_the_table_holds_libdevice_by_dtype():
    t = libdevice.table()
    assert len(t) > 250  # Triton exposes about 300 functions
    assert t["asin"][("fp32",)] == ("__nv_asinf", "fp32") and t["asin"][("fp64",)] == ("__nv_asin", "fp64")
    assert t["clz"][("int32",)] == ("__nv_clz", "int32") and t["clz"][("int64",)] == ("__nv_clzll", "int32")
    assert t["isnan"][("fp32",)] == ("__nv_isnanf", "int32") and t["isnan"][("fp64",)][0] == "__nv_isnand"
    assert t["pow"][("fp32", "fp32")] == ("__nv_powf", "fp32")
    assert "frexp" not in t  # pointer out-parameters: not elementwise


def test_libdevice_calls_build_through_ptx():
    out = ttbuild.compile(KERNEL, signature=SIG, constexprs={"BLOCK": 128}, until="ptx")
    ttir = out["ttir"].decode()
    symbols = re.findall(r'symbol = "(__nv_\w+)"', ttir)
    assert sorted(set(symbols)) == ["__nv_asin", "__nv_asinf", "__nv_cbrt", "__nv_clz", "__nv_clzll",
                                    "__nv_erfinvf", "__nv_isnanf", "__nv_powf"]
    assert '"tt.extern_elementwise"' in out["ttgir"].decode()
    ptx = out["ptx"].decode()
    assert "__nv_" not in ptx and ".entry libdevice_calls" in ptx  # linked and inlined


@pytest.mark.parametrize("call,message", [
    ("libdevice.asin(x.to(tl.float16))", "libdevice.asin takes (fp32); (fp64), got (fp16)"),
    ("libdevice.no_such_fn(x)", "unknown function or attribute tl.extra.libdevice.no_such_fn"),
])
def test_libdevice_errors_name_what_it_takes(call, message):
    src = "import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n\n" \
          "@triton.jit\ndef k(X, BLOCK: tl.constexpr):\n" + textwrap.indent(
              f"offs = tl.arange(0, BLOCK)\nx = tl.load(X + offs)\ntl.store(X + offs, {call})\n", "    ")
    with pytest.raises(CompilationError) as ei:
        ttbuild.compile(src, kernel="k", signature="*fp32:16", constexprs={"BLOCK": 128}, until="ttir")
    assert message in str(ei.value)


def test_triton_accepts_our_libdevice_ttir(tmp_path):
    from oracle import assert_triton_compiles

    out = ttbuild.compile(KERNEL, signature=SIG, constexprs={"BLOCK": 128}, until="ttir")
    path = tmp_path / "libdevice_calls.ttir"
    path.write_bytes(out["ttir"])
    assert_triton_compiles([path])
