"""The external tools and their versions, one home: ptxas (path, version), libdevice, LLVM (llvmlite) and MLIR.

The cubin stage runs the ptxas `ptxas_path()` names and the cache key records `ptxas_version()`
of that same path, so a key always names the ptxas that ran (docs/CONTRACTS.md, "## Cache").
ptxas and libdevice come from the `nvidia-cuda-nvcc` wheel, never from a system CUDA:
`nvidia/cu13/...` (CUDA 13 wheels), `nvidia/cuda_nvcc/...` or `nvidia/cu12/...` (CUDA 12
wheels). Importing this module is cheap: llvmlite and the MLIR metadata are read on first call.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

from ttbuild.errors import ToolError

# Environment variable naming another ptxas on purpose (testing another toolkit).
PTXAS_ENV = "TTBUILD_PTXAS"
# Wheel layouts under the `nvidia` namespace package, newest first.
_WHEEL_DIRS = ("cu13", "cuda_nvcc", "cu12")
_INSTALL_HINT = "pip install 'nvidia-cuda-nvcc==13.0.*'"


def _nvidia_roots() -> list[str]:
    try:
        import nvidia  # namespace package shared by the CUDA wheels
    except ImportError:
        return []
    return list(getattr(nvidia, "__path__", []))


@functools.cache
def _wheel_file(rel: str) -> Path | None:
    for root in _nvidia_roots():
        for sub in _WHEEL_DIRS:
            cand = Path(root) / sub / rel
            if cand.is_file():
                return cand
    return None


def ptxas_path() -> Path:
    """The ptxas the build runs: `$TTBUILD_PTXAS` when set, else the wheel's `bin/ptxas`.

    Read on every call (the variable may change between builds in one process; the wheel
    lookup is cached). Raises ToolError when no wheel provides one.
    """
    env = os.environ.get(PTXAS_ENV)
    if env:
        return Path(env)
    found = _wheel_file("bin/ptxas")
    if found is None:
        raise ToolError("ptxas", "ptxas not found: install the nvidia-cuda-nvcc wheel (looked under "
                        f"{_nvidia_roots() or 'no nvidia package'} for {'|'.join(_WHEEL_DIRS)}/bin/ptxas)",
                        _INSTALL_HINT)
    return found


@functools.cache
def _ptxas_version_at(exe: str) -> str:
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError("ptxas", str(exc), f"{exe} --version") from exc
    release = re.search(r"\bV\d+\.\d+\.\d+\b", proc.stdout)
    build = re.search(r"^Build (\S+)", proc.stdout, re.M)
    if proc.returncode != 0 or not release:
        raise ToolError("ptxas", proc.stderr or proc.stdout, f"{exe} --version")
    return release.group(0) + (f" ({build.group(1)})" if build else "")


def ptxas_version(path: str | os.PathLike | None = None) -> str:
    """Build id of the ptxas at `path` (default `ptxas_path()`) from `ptxas --version`, e.g.
    `V13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)`; probed once per path and process.

    Raises ToolError when ptxas cannot be found or run, or prints no version.
    """
    return _ptxas_version_at(str(path if path is not None else ptxas_path()))


ptxas_version.cache_clear = _ptxas_version_at.cache_clear  # type: ignore[attr-defined]


def libdevice_path() -> Path:
    """libdevice.10.bc of the nvidia-cuda-nvcc wheel (`nvvm/libdevice/`); ToolError if missing."""
    found = _wheel_file("nvvm/libdevice/libdevice.10.bc")
    if found is None:
        raise ToolError("libdevice", "libdevice.10.bc not found: install the nvidia-cuda-nvcc wheel",
                        _INSTALL_HINT)
    return found


@functools.cache
def llvm_version() -> str:
    """LLVM version inside llvmlite plus llvmlite's own, e.g. `22.1.0/llvmlite-0.50.0`.

    Imports `llvmlite.binding` (about 0.3 s, loads libLLVM), hence only on first call.
    """
    import llvmlite
    import llvmlite.binding as llvm

    return ".".join(map(str, llvm.llvm_version_info)) + f"/llvmlite-{llvmlite.__version__}"


@functools.cache
def mlir_version() -> str:
    """Version of the installed MLIR Python bindings distribution (read from package metadata)."""
    from importlib import metadata

    for dist in ("xtc-mlir-python-bindings", "mlir-python-bindings", "mlir"):
        try:
            return f"{dist}-{metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"
