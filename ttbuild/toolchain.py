"""The external tools and their identities, one home: ptxas (path, version, digest), libdevice (path, digest), LLVM (llvmlite) and MLIR.

ptxas and libdevice are located by `cuda-pathfinder` (installed with cuda-bindings; it looks in
the NVIDIA wheels first: `nvidia-cuda-nvcc` for ptxas, `nvidia-nvvm` for libdevice, then a Conda
prefix and CUDA_HOME), ptxas overridable by $TTBUILD_PTXAS. The cubin stage runs the ptxas
`ptxas_path()` names and the cache key records `ptxas_id()` of that same path: its version text
and the sha256 of its file, so a wrapper that answers `--version` like the real one but compiles
otherwise gets another key (docs/CONTRACTS.md, "## Cache"). The llir stage links the libdevice
`libdevice_path()` names, keyed by `libdevice_id()`. Importing this module is cheap: llvmlite,
pathfinder and the MLIR metadata are read on first call.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from pathlib import Path

from ttbuild.errors import ToolError

# Environment variable naming another ptxas on purpose (testing another toolkit).
PTXAS_ENV = "TTBUILD_PTXAS"
_INSTALL_HINT = "pip install 'nvidia-cuda-nvcc==13.0.*'"
_NVVM_HINT = "pip install nvidia-nvvm"


@functools.cache
def _found_ptxas() -> str | None:
    from cuda.pathfinder import find_nvidia_binary_utility

    return find_nvidia_binary_utility("ptxas")


def ptxas_path() -> Path:
    """The ptxas the build runs: `$TTBUILD_PTXAS` when set, else the one cuda-pathfinder finds
    (the nvidia-cuda-nvcc wheel's `bin/ptxas` first).

    Read on every call (the variable may change between builds in one process; the lookup is
    cached). Raises ToolError when none is found.
    """
    env = os.environ.get(PTXAS_ENV)
    if env:
        return Path(env)
    found = _found_ptxas()
    if found is None:
        raise ToolError("ptxas", "ptxas not found: install the nvidia-cuda-nvcc wheel (cuda-pathfinder looked in "
                        "the NVIDIA wheels, $CONDA_PREFIX and $CUDA_HOME)", _INSTALL_HINT)
    return Path(found)


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


@functools.cache
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    """sha256 of the file at `path` (the stat values key the memo: a replaced file is read again)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    """sha256 hex of the file `path` names (links followed), once per process while it is unchanged.
    Raises ToolError naming the file when it cannot be read."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        return _file_digest(real, st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise ToolError(Path(path).name, f"cannot read {path}: {exc.strerror}", f"ls -l {path}") from None


def ptxas_id(path: str | os.PathLike | None = None) -> str:
    """What keys the ptxas at `path` (default `ptxas_path()`): `<version> sha256:<digest of the
    file>`. The version alone named a wrapper that prints the real `--version` but passes other
    flags (-O0) as the real ptxas. Raises ToolError as `ptxas_version`."""
    exe = path if path is not None else ptxas_path()
    return f"{ptxas_version(exe)} sha256:{file_digest(exe)}"


@functools.cache
def _found_libdevice() -> str | None:
    from cuda.pathfinder import BitcodeLibNotFoundError, locate_bitcode_lib

    try:
        return locate_bitcode_lib("device").abs_path
    except BitcodeLibNotFoundError:
        return None


def libdevice_path() -> Path:
    """libdevice.10.bc as cuda-pathfinder locates it (the nvidia-nvvm wheel's `nvvm/libdevice/`
    first); ToolError if missing."""
    found = _found_libdevice()
    if found is None:
        raise ToolError("libdevice", "libdevice.10.bc not found: install the nvidia-nvvm wheel", _NVVM_HINT)
    return Path(found)


def libdevice_id() -> str:
    """What keys the libdevice the stages read (the ttir stage's function table, the llir
    stage's link): `sha256:<digest of libdevice.10.bc>`, or "absent" where none is installed
    (the ttir stage then knows no libdevice name; a kernel that calls one fails)."""
    found = _found_libdevice()
    return f"sha256:{file_digest(found)}" if found is not None else "absent"


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
