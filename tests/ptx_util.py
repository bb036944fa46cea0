"""Test helpers for hand-written TTGIR: lower it to PTX through the llir and ptx stages, and have ptxas (sm_90a) accept the result."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

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


def sass(cubin: Path) -> str:
    """The SASS of a cubin file, disassembled with nvdisasm from Triton's wheel (ours ships none):
    skips without it."""
    from oracle import triton_python

    found = sorted((Path(triton_python()).parents[1] / "lib").glob("python3*/site-packages/triton/backends/nvidia/bin/nvdisasm"))
    if not found:
        pytest.skip("no nvdisasm (it comes with triton's wheel)")
    return subprocess.run([str(found[0]), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout


def sass_loops(cubin: Path) -> list[str]:
    """The SASS of each loop of a cubin (label .. backward branch), as `sass` disassembles it."""
    lines = sass(cubin).splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", line))}
    out = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA[^`]*`\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i:
            out.append("\n".join(lines[labels[m.group(1)]:i + 1]))
    return out
