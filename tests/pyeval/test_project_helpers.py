"""Compile-time helpers of a project module that take tl dtypes (`@tl.constexpr def`, `@triton.constexpr_function`) and torch's finfo constants: ours and Triton 3.6's kernels agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ttbuild.errors import CompilationError
from ttbuild.frontend.canon import canonicalize
from ttbuild.pyeval.modules import Project
from ttbuild.stages import ttir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import COMPARE_OPS, row_jobs, run_triton

MODULE = '''
import torch
import triton
import triton.language as tl

LOWEST = tl.constexpr(torch.finfo(torch.float32).min)
TINY_HALF = tl.constexpr(torch.finfo(torch.float16).tiny)


@tl.constexpr
def accum_type(dtype):
    if dtype.is_bf16() or dtype.is_fp16():
        return tl.float32
    if dtype.is_int():
        return tl.int64
    return dtype


@triton.constexpr_function
def lanes(dtype):
    return 128 if dtype.primitive_bitwidth <= 16 else 64


@triton.jit
def peak_sum_kernel(x_ptr, out_ptr, n):
    acc_t: tl.constexpr = accum_type(x_ptr.type.element_ty)
    N: tl.constexpr = lanes(x_ptr.dtype.element_ty)
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0).to(acc_t)
    tl.store(out_ptr, tl.sum(x, 0))
    tl.store(out_ptr + 1, tl.max(tl.where(offs < n, x.to(tl.float32), LOWEST), 0) + TINY_HALF)
'''

# The oracle's Python has no torch: finfo's two constants from their IEEE 754 bit patterns.
TORCH_STUB = '''
import struct
float16, float32 = "float16", "float32"


class finfo:
    def __init__(self, dtype):
        self.max = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0] if dtype == float32 else 65504.0
        self.min = -self.max
        self.tiny = struct.unpack("<e", struct.pack("<H", 0x0400))[0] if dtype == float16 else None
'''

CASES = [("fp16", "peak_sum_kernel", "*fp16:16,*fp32:16,i32", {}),
         ("i32", "peak_sum_kernel", "*i32:16,*fp32:16,i32", {}),
         ("fp32", "peak_sum_kernel", "*fp32:16,*fp32:16,i32", {})]


def _ttir(kernel: str, sig: str, constexprs: dict) -> str:
    proj = Project({"helpers": ("helpers.py", MODULE.encode())}, capability=90)
    desc, _ = canonicalize(MODULE.encode(), kernel, "helpers.py", proj, "helpers")
    return ttir.run({"json": json.dumps(desc).encode()}, {"signature": sig.split(","), "constexprs": constexprs})[
        "ttir"].decode()


@pytest.mark.parametrize("case, widen, lanes", [(CASES[0], '"arith.extf"', 128), (CASES[1], '"arith.extsi"', 64),
                                                 (CASES[2], None, 64)], ids=lambda c: c[0] if isinstance(c, tuple) else "")
def test_the_helpers_run_on_the_pointer_dtype(case, widen, lanes):
    text = _ttir(*case[1:])
    assert f"tensor<{lanes}x" in text and (widen is None or widen in text)
    assert "-3.40282347E+38" in text  # torch.finfo(torch.float32).min


def test_a_helper_that_calls_a_runtime_function_is_refused_with_its_name():
    bad = MODULE.replace("return 128 if", "return torch.cuda.device_count() if")
    proj = Project({"helpers": ("helpers.py", bad.encode())}, capability=90)
    desc, _ = canonicalize(bad.encode(), "peak_sum_kernel", "helpers.py", proj, "helpers")
    with pytest.raises(CompilationError, match=r"lanes\(\.\.\.\) at compile time"):
        ttir.run({"json": json.dumps(desc).encode()}, {"signature": CASES[0][2].split(","), "constexprs": {}})


def test_triton_builds_the_same_kernels(tmp_path):
    (tmp_path / "stubs").mkdir()
    (tmp_path / "stubs" / "torch.py").write_text(TORCH_STUB)
    (tmp_path / "helpers.py").write_text(MODULE)
    jobs = row_jobs(CASES, _ttir, tmp_path)
    script = f"import sys\nsys.path.insert(0, {str(tmp_path / 'stubs')!r})\n" + COMPARE_OPS
    out = json.loads(run_triton(script, str(tmp_path / "helpers.py"), json.dumps(jobs)).splitlines()[-1])
    differ = {case: (theirs, ours) for case, (theirs, ours) in out.items() if theirs != ours}
    assert len(out) == len(CASES) and not differ, json.dumps(differ, indent=1)
