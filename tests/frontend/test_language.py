"""`ttbuild.language` (tl): kernel files import it with no compiler dependencies, stubs raise outside a kernel, names cover what the frontend lowers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ttbuild.language as tl
from ttbuild.frontend import builtin_table as B

REPO = Path(__file__).resolve().parents[2]


def test_kernel_file_imports_without_compiler_dependencies():
    code = ("import sys; sys.path.insert(0, 'kernels'); import axpy; "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'mlir', 'llvmlite', 'doit', 'numpy', 'cuda', 'xxhash', 'rich'}); "
            "print(type(axpy.axpy_kernel).__name__, heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "JITFunction []"


@pytest.mark.parametrize("name", ["load", "store", "program_id", "arange", "dot", "sum", "atomic_add"])
def test_stubs_raise_outside_a_kernel(name):
    with pytest.raises(RuntimeError, match=f"tl.{name} can only be called inside a @jit kernel"):
        getattr(tl, name)(1)


def test_math_stubs_raise():
    with pytest.raises(RuntimeError, match="tl.math.exp"):
        tl.math.exp(1.0)


def test_constexpr_and_dtypes():
    assert tl.constexpr(tl.constexpr(4)).value == 4
    assert tl.float32 == tl.dtype("fp32") and tl.bool == tl.int1 and tl.float16 != tl.bfloat16
    assert {tl.float16: 1}[tl.dtype("fp16")] == 1


def test_every_lowered_builtin_has_a_stub():
    """A kernel using any tl function the compiler lowers must also import cleanly."""
    top = {n for n in B.BUILTINS if "." not in n}
    missing = sorted(n for n in top if not hasattr(tl, n))
    assert not missing, missing
    math = {n.split(".", 1)[1] for n in B.BUILTINS if n.startswith("math.")}
    assert not sorted(n for n in math if not hasattr(tl.math, n))
