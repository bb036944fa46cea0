"""Test helpers for hand-written TTGIR: lower it to PTX through the llir and ptx stages, and have ptxas (sm_90a) accept the result."""

from __future__ import annotations

import subprocess

import pytest

from ttbuild.stages import llir, ptx


def ttgir_to_ptx(text: str) -> str:
    """PTX of a TTGIR module (text) with the stages' default options."""
    out = {"ttgir": text.encode()}
    out["llir"] = llir.run(out, {})["llir"]
    return ptx.run(out, {})["ptx"].decode()


def assert_ptxas_accepts(ptx_text: str, tmp_path) -> None:
    """ptxas for sm_90a accepts the PTX (skips where the wheel provides none)."""
    from ttbuild.errors import ToolError
    from ttbuild.toolchain import ptxas_path

    try:
        exe = ptxas_path()
    except ToolError:
        pytest.skip("no ptxas")
    src = tmp_path / "k.ptx"
    src.write_text(ptx_text)
    proc = subprocess.run([str(exe), "-arch=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def ptxas_verbose(ptx: bytes, tmp_path) -> str:
    """ptxas -v's report (stderr) for sm_90a: registers, stack frame, spill stores/loads, C75xx warnings."""
    from ttbuild.toolchain import ptxas_path

    src = tmp_path / "k.ptx"
    src.write_bytes(ptx)
    proc = subprocess.run([str(ptxas_path()), "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True, check=True)
    return proc.stderr
