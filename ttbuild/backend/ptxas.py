"""ptxas from the `nvidia-cuda-nvcc` wheel (nvidia/cu13/bin, or cu12's layout): locate it, run it on PTX."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from ttbuild.errors import ToolError


@functools.cache
def find_ptxas() -> Path:
    """Path of the wheel's ptxas; ToolError if the wheel is missing (never falls back to /usr/local).
    `TTBUILD_PTXAS` overrides, for testing another toolkit on purpose."""
    env = os.environ.get("TTBUILD_PTXAS")
    if env:
        return Path(env)
    try:
        import nvidia  # namespace package shared by the CUDA wheels
    except ImportError:
        nvidia = None
    for root in list(getattr(nvidia, "__path__", [])):
        for sub in ("cu13/bin/ptxas", "cuda_nvcc/bin/ptxas", "cu12/bin/ptxas"):
            p = Path(root) / sub
            if p.is_file():
                return p
    raise ToolError("ptxas", "ptxas not found: install the nvidia-cuda-nvcc wheel",
                    "pip install 'nvidia-cuda-nvcc==13.0.*'")


@functools.cache
def ptxas_version() -> str:
    out = subprocess.run([str(find_ptxas()), "--version"], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout else "unknown"


def assemble(ptx: bytes, arch: str = "sm_90a", options: list[str] | tuple[str, ...] = ()) -> bytes:
    """PTX -> cubin (ELF) with `ptxas -arch=<arch> <options> -o out.cubin in.ptx` in a temp dir.

    Raises ToolError with ptxas's stderr and a command line that reproduces the failure (the
    PTX is kept next to it, in a directory the error names).
    """
    exe = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="ttbuild-ptxas-") as tmp:
        src, dst = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_bytes(ptx)
        cmd = [str(exe), f"-arch={arch}", *options, "-o", str(dst), str(src)]
        proc = subprocess.run(cmd, capture_output=True)
        if proc.returncode != 0 or not dst.is_file():
            keep = Path(tempfile.mkdtemp(prefix="ttbuild-ptxas-failed-"))
            (keep / "kernel.ptx").write_bytes(ptx)
            cmd[-1], cmd[-2] = str(keep / "kernel.ptx"), str(keep / "kernel.cubin")
            err = proc.stderr.decode(errors="replace").replace(str(tmp), str(keep))
            raise ToolError("ptxas", err or f"exit status {proc.returncode}", shlex.join(cmd))
        return dst.read_bytes()
