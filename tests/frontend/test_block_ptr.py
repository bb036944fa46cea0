"""Block pointers: a copy kernel through tl.make_block_ptr / tl.advance with boundary_check and padding_option, run in the numpy TTIR evaluator against numpy on shapes that are not multiples of the block; diagnostics for misuse; one kernel built through cubin by the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import ttir_eval  # noqa: E402  (tests/frontend is on sys.path)

from ttbuild.errors import CompilationError  # noqa: E402
from ttbuild.locs import locate  # noqa: E402
from ttbuild.stages import parse, ttir  # noqa: E402

BM, BN = 16, 32
COPY = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def bp_copy2(out_ptr, pad_ptr, in_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
        pid = tl.program_id(0)
        src = tl.make_block_ptr(in_ptr, (M, N), (stride_m, 1), (pid * BM, 0), (BM, BN), (1, 0))
        dst = tl.make_block_ptr(out_ptr, (M, N), (stride_m, 1), (pid * BM, 0), (BM, BN), (1, 0))
        pad = tl.make_block_ptr(pad_ptr, (BM * 64, 2 * BN), (2 * BN, 1), (pid * BM, 0), (BM, BN), (1, 0))
        x = tl.load(src, boundary_check=(0, 1), padding_option="zero")
        tl.store(dst, x * 2.0, boundary_check=(0, 1))
        tl.store(pad, x)
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))
        pad = tl.advance(pad, (0, BN))
        y = tl.load(src, boundary_check=(1, 0), padding_option="nan")
        tl.store(dst, y * 2.0, boundary_check=(0, 1))
        tl.store(pad, y)
    ''')


def _ttir(src: str, kernel: str, signature, constexprs) -> str:
    p = parse.run({"source": src.encode()}, {"kernel": kernel, "file": "k.py"})
    return ttir.run({"json": p["json"]}, {"signature": list(signature), "constexprs": constexprs})["ttir"].decode()


_COPY_TTIR = _ttir(COPY, "bp_copy2", ["*fp32", "*fp32", "*fp32", "i32", "i32", "i32"], {"BM": BM, "BN": BN})


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 3 * BM), n=st.integers(1, 2 * BN), seed=st.integers(0, 2**32 - 1))
def test_block_ptr_copy_matches_numpy(m, n, seed):
    """Elements inside (M, N) are copied (x2) and nothing outside is written; the padded block
    holds zeros (padding "zero") in the first BN columns and NaN (padding "nan") in the next."""
    a = np.random.default_rng(seed).standard_normal((m, n)).astype(np.float32)
    grid = -(-m // BM)
    bufs = {"in": a.reshape(-1).copy(), "out": np.full(m * n, -7.0, np.float32),
            "pad": np.full((grid * BM, 2 * BN), -7.0, np.float32).reshape(-1)}
    for pid in range(grid):
        ttir_eval.run(_COPY_TTIR, ["out", "pad", "in", m, n, n], bufs, program_id=pid)
    np.testing.assert_array_equal(bufs["out"].reshape(m, n), a * 2.0)
    pad = bufs["pad"].reshape(grid * BM, 2 * BN)
    np.testing.assert_array_equal(pad[:m, :n], a)
    inside = np.zeros(pad.shape, bool)
    inside[:m, :n] = True
    cols = np.arange(2 * BN)[None, :].repeat(pad.shape[0], 0)
    assert (pad[~inside & (cols < BN)] == 0).all()
    assert np.isnan(pad[~inside & (cols >= BN)]).all()


def _error(body: str, signature=("*fp32", "i32")) -> tuple[CompilationError, list[str]]:
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p, n, B: tl.constexpr):\n"
           + textwrap.indent(textwrap.dedent(body), "    "))
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": list(signature), "constexprs": {"B": 16}})
    return locate(ei.value, out["loc"]), src.splitlines()


MK = "bp = tl.make_block_ptr(p, (n,), (1,), (0,), (B,), (0,))\n"


@pytest.mark.parametrize("body, line, message", [
    (MK + "x = tl.load(bp, mask=n > 0)\n", "x = tl.load", "`mask` cannot be given to tl.load of a block pointer"),
    (MK + "x = tl.load(bp, boundary_check=(1,))\n", "x = tl.load", "boundary_check dimension 1 is out of range"),
    (MK + "x = tl.load(bp, boundary_check=(0,), padding_option='inf')\n", "x = tl.load",
     "padding_option must be 'zero' or 'nan'"),
    ("bp = tl.make_block_ptr(p, (n, n), (1,), (0,), (B,), (0,))\n", "bp = tl.make_block_ptr",
     "must have the same length"),
    ("bp = tl.make_block_ptr(p, (n,), (1,), (0,), (12,), (0,))\n", "bp = tl.make_block_ptr", "powers of two"),
    (MK + "bp = tl.advance(bp, (1, 2))\n", "bp = tl.advance(bp, (1, 2))", "2 offsets for a block pointer of rank 1"),
    (MK + "if n > 0:\n    bp = tl.make_block_ptr(p + 1, (n, n), (n, 1), (0, 0), (B, B), (1, 0))\ntl.store(bp, 1.0)\n",
     "if n > 0", "mismatched type for `bp` between then block (pointer<fp32[16, 16]>) and else block "
                 "(pointer<fp32[16]>)"),
    (MK + "for i in range(n):\n    bp = tl.make_block_ptr(p + 1, (n,), (1,), (0,), (B // 2,), (0,))\n", "for i in",
     "loop-carried variable 'bp' has initial type pointer<fp32[16]> but is re-assigned to pointer<fp32[8]> in the loop"),
    ("x = tl.advance(p, (0,))\n", "x = tl.advance", "tl.advance needs a block pointer"),
])
def test_block_ptr_diagnostics(body, line, message):
    err, lines = _error(body)
    assert message in err.message
    (lineno,) = [i + 1 for i, l in enumerate(lines) if line in l]
    assert err.loc.line == lineno and err.loc.file == "lib/k.py"


def test_block_ptr_kernel_builds_to_cubin_with_the_cli(tmp_path):
    """The loop kernel (block pointer carried through scf.for) goes through every stage."""
    src = Path(__file__).parent / "kernels" / "block_ptr_loop.py"
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "bp.py").write_text(src.read_text())
    (proj / "variants.toml").write_text(
        '[[variant]]\nname = "bp_rowsum"\nfile = "bp.py"\nkernel = "bp_rowsum"\n'
        'signature = "*fp32:16,*fp32:16,i32,i32,i32"\nconstexprs = { BM = 16, BN = 32 }\nnum_warps = 4\n')
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "ttbuild", "build", str(proj), "-o", str(out), "--cache", "off"],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cubins = list(out.rglob("*.cubin"))
    assert cubins and all(c.read_bytes()[:4] == b"\x7fELF" for c in cubins), sorted(out.rglob("*"))


def test_block_ptr_advanced_in_a_runtime_if_leaves_it_as_its_offsets():
    """Issue 12: a block pointer advanced in one branch of a runtime `if` is merged by its i64
    offsets (as a loop carries it); the load after the `if` uses the merged offset."""
    import ttbuild

    src = Path(__file__).parents[1] / "data" / "gpu_kernels" / "misc.py"
    out = ttbuild.compile(src, kernel="block_ptr_if_kernel", signature="*fp32:16,*fp32:16,i32,i32",
                          constexprs={"BLOCK": 256}, until="ptx")
    ttir = out["ttir"].decode()
    assert re.search(r'= "scf\.if"\(%\w+\).*\}\) : \(i1\) -> i64', ttir, re.S), ttir
    assert ttir.count('"scf.yield"') == 2 and ".entry block_ptr_if_kernel" in out["ptx"].decode()


def test_block_ptr_rebound_in_a_runtime_if_leaves_it_as_the_fields_that_differ():
    """Issue 12: a block pointer rebound in a runtime `if` to another one (base, shape and
    offset differ) leaves the `if` as those fields, as Triton's rewrite_tensor_pointer splits a
    `!tt.ptr<tensor>` result of scf.if; the unit stride both share stays a constant (not
    yielded). Run on the GPU by tests/gpu/test_backend_gpu_reduce.py."""
    import ttbuild

    src = Path(__file__).parents[1] / "data" / "gpu_kernels" / "misc.py"
    out = ttbuild.compile(src, kernel="block_ptr_rebind_kernel", signature="*fp32:16,*fp32:16,*fp32:16,i32,i32,i32",
                          constexprs={"BLOCK": 256}, until="ptx")
    ttir = out["ttir"].decode()
    assert re.search(r'= "scf\.if"\(%\w+\).*\}\) : \(i1\) -> \(!tt\.ptr<f32>, i64, i64\)', ttir, re.S), ttir
    assert ".entry block_ptr_rebind_kernel" in out["ptx"].decode()


def _loop_types(ttir: str) -> list[str]:
    """The types an scf.for of generic-form TTIR carries (its results)."""
    m = re.search(r'= "scf\.for".*?\}\) : \([^)]*\) -> \(?([^)\n]*?)\)? loc', ttir, re.S)
    return sorted(t.strip() for t in m.group(1).split(",")) if m else []


def test_block_ptr_loops_carry_only_the_fields_that_change():
    """An advanced block pointer carries only the offsets that move (bp_rowsum: the column
    offset), as Triton's TTIR after rewrite_tensor_pointer and its canonicalizer; one rebound in
    the loop to the next block's carries its base and shape (Triton 3.6 drops such a rebinding
    and loads the first block every iteration; run on the GPU by test_backend_gpu_reduce.py)."""
    import ttbuild

    out = ttbuild.compile(Path(__file__).parent / "kernels" / "block_ptr_loop.py", kernel="bp_rowsum",
                          signature="*fp32,*fp32,i32,i32,i32", constexprs={"BM": 16, "BN": 32}, until="ttir")
    assert _loop_types(out["ttir"].decode()) == ["i64", "tensor<16x32xf32>"]
    src = Path(__file__).parents[1] / "data" / "gpu_kernels" / "misc.py"
    out = ttbuild.compile(src, kernel="block_ptr_loop_rebind_kernel", signature="*fp32:16,*fp32:16,i32",
                          constexprs={"BLOCK": 128}, until="ptx")
    assert _loop_types(out["ttir"].decode()) == ["!tt.ptr<f32>", "i64", "tensor<128xf32>"]
    assert ".entry block_ptr_loop_rebind_kernel" in out["ptx"].decode()


def test_block_ptr_ttir_has_tritons_form():
    """Oracle: Triton 3.6 prints its TTIR after rewrite_tensor_pointer (make_ttir), so neither
    its TTIR nor ours has tt.make_tensor_ptr / tt.advance, and the block pointer loop carries the
    same types in both."""
    from oracle import run_triton

    import ttbuild

    kernel = Path(__file__).parent / "kernels" / "block_ptr_loop.py"
    script = (
        "import importlib.util, sys\n"
        "import triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from triton.compiler import ASTSource\n"
        "spec = importlib.util.spec_from_file_location('k', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "sig = {'out_ptr': '*fp32', 'in_ptr': '*fp32', 'M': 'i32', 'N': 'i32', 'stride_m': 'i32',\n"
        "       'BM': 'constexpr', 'BN': 'constexpr'}\n"
        "k = triton.compile(ASTSource(m.bp_rowsum, sig, constexprs={'BM': 16, 'BN': 32}),\n"
        "                   target=GPUTarget('cuda', 90, 32))\n"
        "print(k.asm['ttir'])\n")
    theirs = run_triton(script, kernel)
    ours = ttbuild.compile(kernel, kernel="bp_rowsum", signature="*fp32,*fp32,i32,i32,i32",
                           constexprs={"BM": 16, "BN": 32}, until="ttir")["ttir"].decode()
    for text in (theirs, ours):
        assert "make_tensor_ptr" not in text and "tt.advance" not in text
    m = re.search(r"scf\.for .* -> \(([^)]*)\)", theirs)
    assert sorted(t.strip() for t in m.group(1).split(",")) == _loop_types(ours)
