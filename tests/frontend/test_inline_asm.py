"""Issue 12: tl.inline_asm_elementwise as tt.elementwise_inline_asm (Triton's attributes; Triton accepts our TTIR), the PDL calls tl.extra.cuda.gdc_wait / gdc_launch_dependents through PTX, and what is not supported yet said so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ttbuild
from ttbuild.errors import CompilationError

KERNELS = Path(__file__).parents[1] / "data" / "gpu_kernels" / "misc.py"
SIG = "*fp32:16,*i32:16,*fp32:16,i32"


def test_inline_asm_and_pdl_through_ptx():
    out = ttbuild.compile(KERNELS, kernel="inline_asm_kernel", signature=SIG, constexprs={"BLOCK": 256},
                          num_warps=4, until="ptx")
    ttir = out["ttir"].decode()
    assert ttir.count('"tt.elementwise_inline_asm"') == 4
    assert 'asm_string = "griddepcontrol.wait; // dummy $0", constraints = "=r", packed_element = 1 : i32, ' \
           'pure = false' in ttir
    ptx = out["ptx"].decode()
    assert len(re.findall(r"^\s*griddepcontrol\.wait;", ptx, re.M)) == 1
    assert len(re.findall(r"^\s*griddepcontrol\.launch_dependents;", ptx, re.M)) == 1
    assert len(re.findall(r"^\s*fma\.rn\.f32 ", ptx, re.M)) == 2  # 256 elements over 128 threads


def test_triton_accepts_our_inline_asm_ttir(tmp_path):
    from oracle import assert_triton_compiles

    out = ttbuild.compile(KERNELS, kernel="inline_asm_kernel", signature=SIG, constexprs={"BLOCK": 256},
                          until="ttir")
    path = tmp_path / "inline_asm.ttir"
    path.write_bytes(out["ttir"])
    assert_triton_compiles([path])


def test_packed_inline_asm_puts_four_bytes_in_a_register():
    """pack = 4 on int8, as Triton packs it: one asm per four consecutive elements of a thread,
    their bytes in one 32-bit register in and out."""
    out = ttbuild.compile(KERNELS, kernel="inline_asm_packed_kernel", signature="*i8:16,*i8:16,i32",
                          constexprs={"BLOCK": 1024}, num_warps=4, until="ptx")
    ptx = out["ptx"].decode()
    adds = re.findall(r"^\s*add\.u32 %r\d+, %r\d+, 0x01010101;", ptx, re.M)
    assert len(adds) == 2  # 8 int8 elements per thread over 128 threads: two packs of four


def test_a_pack_that_does_not_divide_a_threads_elements_is_refused_by_name():
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(X, BLOCK: tl.constexpr):\n"
           "    x = tl.load(X + tl.arange(0, BLOCK))\n"
           "    y = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x], dtype=tl.int32, is_pure=True, pack=3)\n"
           "    tl.store(X + tl.arange(0, BLOCK), y)\n")
    with pytest.raises(CompilationError, match=r"packed_element = 3 on 1 elements per thread"):
        ttbuild.compile(src, kernel="k", signature="*i32:16", constexprs={"BLOCK": 128}, until="ptx", file="k.py")
