"""`ttbuild package`: artifacts/lib as a wheel that needs only the runtime (`import mykernels`); stdlib and `packaging`, so it runs in a runtime-only install.

The wheel follows the binary distribution format (packaging.python.org, "Binary distribution
format"; PEP 427): `<name>/` (generated `__init__.py`, `ttbuild_library.json`, `lib/`, and
`tuning/` when `ttbuild tune` wrote tables) and
`<name>-<version>.dist-info/` with METADATA (core metadata 2.1), WHEEL and RECORD (sha256 in
urlsafe base64 without padding, size; the installed package checks its files against it,
ttbuild.runtime.package). Entries are sorted with fixed timestamps, so one library gives the
same wheel bytes on any machine. Names, versions and tags go through `packaging` (utils,
version, tags).

Tags: `py3-none-any` for the library alone: cubins and PTX are loaded by the CUDA driver,
whatever the host OS or CPU, and Python wheel tags cannot name GPU architectures or driver
versions; those are in the manifest, in METADATA's Summary and Keywords, and checked by the
runtime at load and launch. `--platform manylinux2014_x86_64` (or any platform tag) narrows
where pip installs it. `ttbuild package` also compiles the C launch path into the wheel where it
has a C compiler (`launcher/`, ttbuild.runtime.cext; `--no-launcher` leaves it out): the wheel
is then for this interpreter and platform (`cp311-cp311-manylinux_2_36_x86_64`, from
`packaging.tags`), and only that file differs between machines.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import sys
import zipfile

from packaging import tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ttbuild.errors import TTBuildError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLATFORM = re.compile(r"[a-z0-9_]+\Z")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class PackageError(TTBuildError, ValueError):
    """A library that cannot be packaged: bad name or version, no lib/, bad metadata."""


def package_table(kernels_dir: str) -> dict:
    """The `[package]` table of `<kernels_dir>/variants.toml` ({} when absent or no such file)."""
    path = os.path.join(kernels_dir, "variants.toml")
    if not os.path.isfile(path):
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised only on 3.10
        import tomli as tomllib
    with open(path, "rb") as f:
        try:
            table = tomllib.load(f).get("package", {})
        except (tomllib.TOMLDecodeError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
            raise PackageError(f"{path}: invalid TOML: {exc}") from None
    if not isinstance(table, dict):
        raise PackageError(f"{path}: [package] must be a table (name = ..., version = ...)")
    return table


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def library_files(lib_dir: str) -> tuple[list, dict[str, bytes]]:
    """(variants, {file name in lib/: bytes}) of every metadata JSON and the images it names, and
    the library index (ttbuild.runtime.libindex) of those files."""
    from ttbuild.runtime.libindex import INDEX, index_bytes, variant_row
    from ttbuild.runtime.metadata import MetadataError, read_library

    try:
        variants = read_library(lib_dir)
    except MetadataError as exc:
        raise PackageError(str(exc)) from None
    if not variants:
        raise PackageError(f"{lib_dir}: no kernel metadata (*.json) to package (build first: `doit`)")
    files: dict[str, bytes] = {}
    for v in variants:
        paths = [v.json_path, v.cubin_path, *(img.path for img in v.images)]
        for path in paths:
            with open(path, "rb") as f:
                files[os.path.basename(path)] = f.read()
    # the library index of exactly these files: an installed package reads a kernel's metadata on its first use
    rows = [(v.file, v.kernel, variant_row(os.path.basename(v.json_path),
                                           hashlib.sha256(files[os.path.basename(v.json_path)]).hexdigest(), v))
            for v in variants]
    files[INDEX] = index_bytes(rows)
    return variants, files


def tuning_files(lib_dir: str) -> dict[str, bytes]:
    """{file name: bytes} of the tuning tables beside lib/ (`ttbuild tune`'s artifacts/tuning/*.json):
    they ship with the library, so an installed package launches its tuned configs."""
    folder = os.path.join(os.path.dirname(os.path.abspath(lib_dir)), "tuning")
    if not os.path.isdir(folder):
        return {}
    out = {}
    for n in sorted(os.listdir(folder)):
        if n.endswith(".json"):
            with open(os.path.join(folder, n), "rb") as f:
                out[n] = f.read()
    return out


def manifest(name: str, version: str, variants, build: dict | None = None) -> dict:
    """The package manifest (schema ttbuild.library/2, ttbuild.runtime.package): what the library
    holds and needs; `build`: the variant list's state (ttbuild.buildrecord.state) when the
    library was packaged. The files' hashes are the wheel's RECORD."""
    from ttbuild.runtime.package import SCHEMA

    kernels: dict[str, list[str]] = {}
    for v in variants:
        kernels.setdefault(v.kernel, []).append(v.variant)
    images = [img for v in variants for img in v.images]
    archs = sorted({img.arch for img in images if img.kind == "cubin"} or {v.arch for v in variants})
    ptx = sorted({img.arch for img in images if img.kind == "ptx"})
    drivers = [v.min_cuda_driver for v in variants]
    return {
        "schema": SCHEMA, "name": name, "version": version,
        "kernels": {k: sorted(vs) for k, vs in sorted(kernels.items())},
        "targets": sorted({t for v in variants for t in (v.targets or (v.target,))}, key=lambda t: int(t.split(":")[1])),
        "archs": archs, "ptx": ptx, "min_cuda_driver": max(drivers),
        **({"build": build} if build is not None else {}),
    }


INIT = '''"""{name} {version}: a ttbuild kernel library ({kernels}).

Built for {archs}; needs a CUDA driver >= {driver}. Launch like Triton:
`{name}.{first}[grid](...)`. Every file is checked against its sha256 at import.
"""

from ttbuild.runtime.package import load_package as _load_package

__version__ = {version!r}
library = _load_package(__file__)
kernels = library.kernels


def __getattr__(name):
    return getattr(library, name)


def __dir__():
    return sorted(set(globals()) | set(kernels))
'''


def launcher_tag(platform: str = "any") -> str:
    """The wheel tag of a wheel holding a C extension built by this interpreter on this machine:
    `cp311-cp311-manylinux_2_36_x86_64` (packaging.tags: this interpreter's tag, on Linux the
    manylinux tag of the host's glibc, which the module was linked against); `platform`, when
    not "any", replaces the platform part."""
    found = list(tags.sys_tags())
    best = next((t for t in found if t.platform.startswith("manylinux")), found[0])
    return f"{best.interpreter}-{best.abi}-{best.platform if platform == 'any' else platform}"


def _launcher_files(name: str) -> dict[str, bytes]:
    """{path in the wheel: bytes} of the C launcher compiled for this interpreter
    (ttbuild.runtime.cext.build_prebuilt), under `<name>/launcher/`. Raises CLauncherError."""
    import tempfile

    from ttbuild.runtime.cext import build_prebuilt

    with tempfile.TemporaryDirectory(prefix="ttbuild-launcher-") as tmp:
        path = build_prebuilt(tmp)
        return {f"launcher/{path.name}": path.read_bytes()}


def build_wheel(lib_dir: str, name: str, version: str, out_dir: str, platform: str = "any",
                build: dict | None = None, launcher: bool = False) -> str:
    """Write `<out_dir>/<name>-<version>-py3-none-<platform>.whl` from `lib_dir`; returns its path.
    `build` (ttbuild.buildrecord.state) goes into the manifest. `launcher`: also compile the C launch path (ttbuild.runtime.cext) into the wheel, which then
    is a platform wheel for this interpreter (launcher_tag): a serving machine without a C
    compiler gets the C path. Raises PackageError for a bad name/version/platform or an
    unusable library; CLauncherError when the launcher cannot be compiled."""
    from ttbuild import __version__ as ttbuild_version
    from ttbuild.target import cuda_version_text

    if not isinstance(name, str) or not _NAME.match(name):
        raise PackageError(f"package name {name!r} must be a Python identifier (letters, digits, '_')")
    try:
        version = str(Version(version))  # normalized, as wheel file names and METADATA want it
    except (InvalidVersion, TypeError):
        raise PackageError(f"version {version!r} is not a PEP 440 version like 1.0 or 2.1.3rc1") from None
    if not _PLATFORM.match(platform):
        raise PackageError(f"platform tag {platform!r} must look like any, linux_x86_64 or manylinux2014_x86_64")
    variants, files = library_files(lib_dir)
    tuning = tuning_files(lib_dir)
    doc = manifest(name, version, variants, build)
    native = _launcher_files(name) if launcher else {}
    tag = launcher_tag(platform) if native else f"py3-none-{platform}"
    driver = cuda_version_text(doc["min_cuda_driver"])
    served = ", ".join(doc["archs"]) + (f"; PTX {', '.join(doc['ptx'])} for newer GPUs" if doc["ptx"] else "")
    kernels = ", ".join(doc["kernels"])
    init = INIT.format(name=name, version=version, kernels=kernels, archs=served, driver=driver,
                       first=next((k for k in doc["kernels"] if not k.startswith("_")), next(iter(doc["kernels"]))))
    # the distribution name as file names spell it (binary distribution format, "Escaping and Unicode")
    dist = canonicalize_name(name).replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    metadata = "".join([
        "Metadata-Version: 2.1\n", f"Name: {name}\n", f"Version: {version}\n",
        f"Summary: ttbuild kernel library: {kernels} ({served}; CUDA driver >= {driver})\n",
        f"Keywords: cuda,ttbuild,{','.join(doc['archs'] + [f'ptx-{a}' for a in doc['ptx']])},cuda-driver-{driver}\n",
        "Requires-Python: >=3.10\n", "Requires-Dist: ttbuild\n",
    ])
    wheel = "".join(["Wheel-Version: 1.0\n", f"Generator: ttbuild {ttbuild_version}\n",
                     f"Root-Is-Purelib: {'false' if native else 'true'}\n", f"Tag: {tag}\n"])
    entries = {f"{name}/__init__.py": init.encode(),
               f"{name}/ttbuild_library.json": (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()}
    entries.update({f"{name}/lib/{n}": data for n, data in files.items()})
    entries.update({f"{name}/tuning/{n}": data for n, data in tuning.items()})
    entries.update({f"{name}/{rel}": data for rel, data in native.items()})
    entries[f"{dist_info}/METADATA"] = metadata.encode()
    entries[f"{dist_info}/WHEEL"] = wheel.encode()
    entries[f"{dist_info}/top_level.txt"] = f"{name}\n".encode()
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in sorted(entries.items()))
    entries[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{dist}-{version}-{tag}.whl")
    parse_wheel_filename(os.path.basename(path))  # InvalidWheelFilename: a tag or name we spelled wrong
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        # RECORD last, as the spec recommends; everything else sorted.
        for arc in sorted(entries, key=lambda p: (p.endswith("/RECORD"), p)):
            info = zipfile.ZipInfo(arc, date_time=ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, entries[arc])
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)
    return path


def checked_build(artifacts: str, kernels: str, allow_partial: bool) -> dict:
    """The variant list's state for the manifest (ttbuild.buildrecord.state), after checking that
    `<artifacts>/lib` is the complete build of the current list. Raises PackageError naming each
    problem unless `allow_partial`, which prints them as warnings and records them instead."""
    from ttbuild.buildrecord import library_problems, state

    lib = os.path.join(artifacts, "lib")
    names = [n[:-5] for n in os.listdir(lib) if n.endswith(".json")] if os.path.isdir(lib) else []
    problems = library_problems(artifacts, kernels, names)
    if problems and not allow_partial:
        raise PackageError(f"{lib} is not the complete build of {os.path.join(kernels, 'variants.toml')}:\n  "
                           + "\n  ".join(problems) + "\n(build again, or pass --allow-partial to ship it as it is)")
    for line in problems:
        print(f"ttbuild package: warning: {line}", file=sys.stderr)
    return state(artifacts, kernels, problems)


def main(argv: list[str] | None = None) -> int:
    """`ttbuild package [--name N] [--version V] [-d DIST] [-o ARTIFACTS] [-k KERNELS] [--platform P] [--allow-partial] [--no-launcher]`."""
    ap = argparse.ArgumentParser(prog="ttbuild package",
                                 description="Turn artifacts/lib into a wheel that needs only the ttbuild runtime.")
    ap.add_argument("--name", help="import and distribution name (default: [package] name in variants.toml)")
    ap.add_argument("--version", help="version (default: [package] version in variants.toml)")
    # -o names the artifacts folder here too, as in every ttbuild command; the wheel's folder is
    # -d/--dist (--out, its old long name, still works)
    ap.add_argument("-d", "--dist", "--out", dest="out", default="dist", metavar="DIR",
                    help="where the wheel goes (default: dist)")
    ap.add_argument("-o", "--artifacts", default="artifacts", metavar="DIR",
                    help="build output holding lib/ (default: artifacts)")
    ap.add_argument("-k", "--kernels", default="kernels", metavar="DIR", help="directory of variants.toml")
    ap.add_argument("--platform", default=None, help="wheel platform tag (default: any)")
    ap.add_argument("--allow-partial", action="store_true",
                    help="package lib/ even when it is not the complete build of the current variant list "
                         "(a failed, stopped, sharded or stale build); the wheel's manifest says so")
    ap.add_argument("--no-launcher", action="store_true",
                    help="leave the compiled C launcher out: a py3-none wheel (default: built in where a C "
                         "compiler and Python's headers are here, making a wheel for this Python and platform)")
    args = ap.parse_args(argv)
    try:
        table = package_table(args.kernels)
        name = args.name or table.get("name")
        version = args.version or table.get("version")
        if not name or not version:
            raise PackageError("give --name and --version, or a [package] table in "
                               f"{os.path.join(args.kernels, 'variants.toml')} (name = \"mykernels\", version = \"1.0\")")
        platform = args.platform or table.get("platform", "any")
        if not os.path.isdir(os.path.join(args.artifacts, "lib")):
            raise PackageError(f"no library in {os.path.join(args.artifacts, 'lib')}: build it first (ttbuild build); "
                               "-o names the artifacts folder, the wheel goes to -d/--dist")
        build = checked_build(args.artifacts, args.kernels, args.allow_partial)
        path = _package(args, name, str(version), platform, build)
    except PackageError as exc:
        print(f"ttbuild package: error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


def _package(args, name: str, version: str, platform: str, build: dict) -> str:
    """build_wheel with the C launcher built in, unless --no-launcher or it cannot be compiled
    here (then a py3-none wheel, and one line on stderr saying why)."""
    from ttbuild.runtime.cext import CLauncherError

    lib = os.path.join(args.artifacts, "lib")
    if not args.no_launcher:
        try:
            path = build_wheel(lib, name, version, args.out, platform, build, launcher=True)
            print(f"ttbuild package: the C launcher is built in ({launcher_tag(platform)}; "
                  "--no-launcher for a pure-Python wheel)", file=sys.stderr)
            return path
        except CLauncherError as exc:
            print(f"ttbuild package: warning: a pure-Python wheel, without the C launcher ({exc})", file=sys.stderr)
    return build_wheel(lib, name, version, args.out, platform, build)
