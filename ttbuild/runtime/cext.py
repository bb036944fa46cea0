"""The C launch path's module (claunch.c): a prebuilt copy shipped in a kernel wheel, else compiled once per machine and Python with the system C compiler and cached; None where neither can be had.

Prebuilt first: `ttbuild package` compiles claunch.c into the kernel wheel where it runs with a
C compiler (a platform wheel: `<name>/launcher/ttbuild_claunch-<sha256 of claunch.c>.<EXT_SUFFIX>`,
hash-checked with the rest at import), and `load_package` registers that folder
(`add_prebuilt`), so a serving machine with no compiler, no Python headers and a read-only home
still gets the C path. A prebuilt module is used only when its name carries the digest of this
runtime's claunch.c and this interpreter's extension suffix (the module's API and the Python ABI
it was compiled against). Otherwise, as Triton builds its launcher (a C file compiled with the
host's `cc` against Python's headers, cached in the user's cache directory), the module lands in
`<cache>/launcher/` (the build cache's directory, ttbuild.cachedir) under a name that hashes the
C source, the Python version and the platform, written to a temporary name and renamed, so
concurrent processes never load a half-written file. Where none of this works, or
`TTBUILD_C_LAUNCHER=0`, `load()` returns None and launches take the generated Python path
(ttbuild.runtime.fastpath): correct, about 1.5 us slower per launch (README); `status()` says which
path a process has and why.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

from ..cachedir import default_local_dir
from ..errors import TTBuildError

SOURCE = Path(__file__).with_name("claunch.c")
MODULE = "ttbuild_claunch"

_lock = threading.Lock()
_state: dict = {}
_prebuilt_dirs: list[Path] = []  # folders that may hold a prebuilt module (add_prebuilt), searched in order


def status() -> str:
    """One line: which launch path `load()` gave and, when it is the Python one, why."""
    return _state.get("status", "not tried yet")


class CLauncherError(TTBuildError):
    """The C launch path could not be compiled or loaded (the message says why and how)."""


def load():
    """The compiled module (its FastLaunch type), or None when this process cannot have it
    (`TTBUILD_C_LAUNCHER=0`, no C compiler, no Python headers). Built once per process at most;
    never raises: a failure is recorded for `status()`."""
    if os.environ.get("TTBUILD_C_LAUNCHER", "1").lower() in ("0", "off", "no", "false"):
        _state["status"] = "python (TTBUILD_C_LAUNCHER=0)"
        return None
    with _lock:
        if "module" not in _state:
            try:
                _state["module"] = _prebuilt()
                if _state["module"] is not None:
                    _state["status"] = f"c (prebuilt: {_state['module'].__file__})"
                else:
                    _state["module"] = compile_module()
                    _state["status"] = f"c ({_state['module'].__file__})"
            except CLauncherError as exc:
                _state["module"] = None
                _state["status"] = f"python ({exc})"
        return _state["module"]


def prebuilt_name(source: Path = SOURCE) -> str:
    """The file name of a prebuilt module of `source` for this interpreter:
    `ttbuild_claunch-<first 16 hex of the source's sha256><EXT_SUFFIX>`."""
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]
    return f"{MODULE}-{digest}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"


def add_prebuilt(folder) -> None:
    """Make `folder` (a kernel wheel's `launcher/`) a place `load()` looks for a prebuilt module,
    before compiling. A process that found no C path yet tries again at its next `load()`."""
    folder = Path(folder)
    with _lock:
        if folder not in _prebuilt_dirs:
            _prebuilt_dirs.append(folder)
        if _state.get("module", False) is None:
            _state.clear()


def _prebuilt():
    """The first prebuilt module of this claunch.c and interpreter in the registered folders,
    imported; None when there is none. Raises CLauncherError when one is there but fails to load."""
    name = prebuilt_name()
    for folder in list(_prebuilt_dirs):
        path = folder / name
        if path.is_file():
            return _import(path, MODULE)
    return None


def build_prebuilt(out_dir, source: Path = SOURCE) -> Path:
    """Compile `source` to `<out_dir>/<prebuilt_name()>` for `ttbuild package` and return its
    path. Raises CLauncherError (no compiler, no headers, a failed compile)."""
    out_dir = Path(out_dir)
    target = out_dir / prebuilt_name(source)
    try:
        _compile(Path(source), target)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CLauncherError(f"the C launcher could not be built: {exc}") from exc
    return target


def compile_module(cache_dir: Path | None = None, source: Path = SOURCE, name: str = MODULE):
    """Compile claunch.c (unless `cache_dir`, default `<cache>/launcher`, holds this source's
    build for this Python) and import it. Raises CLauncherError naming the compiler command and
    its stderr, or the missing header or compiler. `source` and `name` build another
    single-file module the same way (the tests' C tensor stand-in, an older claunch.c that a
    benchmark compares with: its module name stays ttbuild_claunch)."""
    try:
        path = _built(cache_dir, Path(source), name)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CLauncherError(f"the C launcher could not be built or loaded: {exc}") from exc
    return _import(path, name)


def _import(path: Path, name: str):
    """Import the extension module `name` from the file `path`; CLauncherError if it fails."""
    try:
        spec = importlib.util.spec_from_file_location(
            name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path)))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (OSError, ImportError) as exc:
        raise CLauncherError(f"the C launcher could not be loaded from {path}: {exc}") from exc
    return module


def _built(cache_dir, source_path: Path, name: str) -> Path:
    source = source_path.read_bytes()
    tag = hashlib.sha256(source + sys.version.encode() + sysconfig.get_platform().encode()).hexdigest()[:20]
    out_dir = Path(cache_dir) if cache_dir is not None else default_local_dir() / "launcher"
    target = out_dir / f"{name}-{tag}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if not target.exists():
        _compile(source_path, target, name)
    return target


def _compile(source_path: Path, target: Path, name: str = MODULE) -> None:
    """Compile the single C file `source_path` into the extension module file `target`
    (written under a temporary name in its folder, then renamed). Raises CLauncherError."""
    out_dir = target.parent
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise CLauncherError(f"no Python.h in {include}: install the Python development headers "
                             "for the C launch path")
    cc = shlex.split(os.environ.get("CC", "")) or [shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")]
    if cc[0] is None:
        raise CLauncherError("no C compiler (cc, gcc or clang) on PATH: set CC for the C launch path")
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".so", dir=out_dir)
    os.close(fd)
    cmd = [*cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(source_path), "-o", tmp]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise CLauncherError(f"compiling the C launcher failed ({' '.join(cmd)}):\n"
                                 f"{done.stderr.strip()[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
