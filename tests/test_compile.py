"""The in-memory driver `ttbuild.compile`: the build's bytes from source, from a .ttir/.ttgir, `until=`, located errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ttbuild
from ttbuild.errors import CompilationError
from ttbuild.graph.keys import xxh3_hex

REPO_KERNELS = Path(__file__).resolve().parent.parent / "kernels"
ADD = dict(kernel="add_kernel", signature="*fp32:16,*fp32:16,*fp32:16,i32", constexprs={"BLOCK_SIZE": 1024})
HASHED = {"parse": "json", "ttir": "ttir", "ttgir": "ttgir", "llir": "llir", "ptx": "ptx", "cubin": "cubin"}


@pytest.fixture(scope="module")
def add_w8():
    """vector_add's add_kernel at 8 warps, source to cubin (the `add_kernel_fp32_w8` variant)."""
    return ttbuild.compile(REPO_KERNELS / "vector_add.py", num_warps=8, **ADD)


def test_source_to_cubin_gives_the_bytes_the_build_writes(add_w8, built_project_factory):
    assert set(add_w8) == {"json", "loc", "ttir", "abi", "ttgir", "llir", "ptx", "cubin"}
    assert add_w8["cubin"][:4] == b"\x7fELF"
    # The build's metadata records the hash of every stage's output: the driver's must match.
    proj = built_project_factory("real")
    meta = json.loads((proj.artifacts / "lib" / "add_kernel_fp32_w8.json").read_text())
    assert {stage: xxh3_hex(add_w8[role]) for stage, role in HASHED.items()} == meta["hashes"]
    assert json.loads(add_w8["abi"])["params"] == meta["params"]  # the kernel ABI the ttir stage recorded


def test_until_stops_early_and_options_reach_their_stage(add_w8):
    out = ttbuild.compile(REPO_KERNELS / "vector_add.py", until="ttgir", **ADD)
    assert set(out) == {"json", "loc", "ttir", "abi", "ttgir"}
    assert out["ttir"] == add_w8["ttir"]  # num_warps keys ttgir, not ttir
    assert b'"ttg.num-warps" = 4 : i32' in out["ttgir"] and b'"ttg.num-warps" = 8 : i32' in add_w8["ttgir"]
    # the kernel name is found when the file has one @jit function
    assert ttbuild.compile(REPO_KERNELS / "vector_add.py", until="parse",
                           signature=ADD["signature"])["json"] == add_w8["json"]


def test_start_from_a_ttgir_file_or_ttir_bytes(add_w8, tmp_path):
    path = tmp_path / "add_kernel.ttgir"
    path.write_bytes(add_w8["ttgir"])
    out = ttbuild.compile(path)
    assert set(out) == {"llir", "ptx", "cubin"}
    assert out == {k: add_w8[k] for k in out}
    from_ttir = ttbuild.compile(add_w8["ttir"], start="ttir", until="ptx", num_warps=8)
    assert from_ttir == {k: add_w8[k] for k in ("ttgir", "llir", "ptx")}


def test_bad_kernel_raises_compilation_error_at_file_line(tmp_path):
    src = (REPO_KERNELS / "vector_add.py").read_text()
    bad = src.replace("total = lhs + rhs", "total = tl.frobnicate(lhs + rhs)")
    line = bad.splitlines().index("    total = tl.frobnicate(lhs + rhs)") + 1
    path = tmp_path / "bad_add.py"
    path.write_text(bad)
    with pytest.raises(CompilationError) as info:
        ttbuild.compile(path, **ADD)
    err = info.value
    assert err.loc is not None and (err.loc.file, err.loc.line) == ("bad_add.py", line), err.render()
    assert re.search(rf"bad_add\.py:{line}:\d+: error: ", str(err))
    assert "tl.frobnicate" in err.loc.source_line


def test_ttgir_without_num_warps_is_an_error(add_w8):
    text = re.sub(rb'"ttg\.num-warps" = \d+ : i32, ', b"", add_w8["ttgir"])
    assert b"num-warps" not in text
    with pytest.raises(CompilationError, match="ttg.num-warps"):
        ttbuild.compile(text, start="ttgir", until="llir")


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="signature="):
        ttbuild.compile(REPO_KERNELS / "vector_add.py", kernel="add_kernel")
    with pytest.raises(CompilationError, match="unknown dtype 'fp33'"):
        ttbuild.compile(REPO_KERNELS / "vector_add.py", kernel="add_kernel", signature="*fp33")
    with pytest.raises(ValueError, match="num_warps: must be a power of two"):
        ttbuild.compile(REPO_KERNELS / "vector_add.py", num_warps=3, **ADD)
    with pytest.raises(ValueError, match="until must be one of"):
        ttbuild.compile(REPO_KERNELS / "vector_add.py", until="sass", **ADD)
    with pytest.raises(FileNotFoundError, match="no_such_kernel.py"):
        ttbuild.compile("no_such_kernel.py", **ADD)


def test_import_ttbuild_stays_cheap():
    code = ("import sys, ttbuild; assert callable(ttbuild.jit); "
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('mlir', 'llvmlite', 'doit', 'xxhash', 'rich') or m.startswith('ttbuild.compiler'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
