"""Loads a kernel library installed from a wheel of `ttbuild package`: checks each file against its distribution's RECORD (importlib.metadata), then loads it; stdlib only.

Package layout (docs/CONTRACTS.md, "Kernel wheels"):

    <name>/__init__.py            generated: `library = load_package(__file__)`, kernels as attributes
    <name>/ttbuild_library.json   manifest, schema "ttbuild.library/2": name, version, kernels,
                                  targets, archs, ptx, min_cuda_driver (build: the build's state)
    <name>/lib/<variant>.json, .cubin (.ptx)   the artifacts/lib files, unchanged
    <name>/lib/ttbuild.index      the library index of those files (ttbuild.runtime.libindex)
    <name>/tuning/<kernel>.json   the tuning tables of autotuned kernels (ttbuild tune), if any
    <name>/launcher/ttbuild_claunch-<digest><EXT_SUFFIX>   the C launcher compiled in (ttbuild.runtime.cext), if any
    <name>_<version>.dist-info/RECORD   every file's sha256 (the wheel's; pip keeps it on install)

The hashes are the wheel's own RECORD (packaging.python.org, "Recording installed projects"),
read through importlib.metadata, not a second list: a manifest of schema "ttbuild.library/1"
(older wheels) listed them again in "files", which is no longer read.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os

from .metadata import MetadataError, read_json

MANIFEST = "ttbuild_library.json"
SCHEMA = "ttbuild.library/2"
SCHEMAS = ("ttbuild.library/1", SCHEMA)  # /1 also listed each file's sha256 under "files"
# The package's folders whose every file must be one the RECORD hashes: the runtime reads each
# JSON, cubin and tuning table it finds there, and cext loads the launcher module it finds.
CHECKED = ("lib", "tuning", "launcher")
WEAK = ("md5", "sha1")  # hashes a RECORD must not use (the binary distribution format spec)


def sha256_file(path: str) -> str:
    """The sha256 hex digest of the file at `path` (read in 1 MiB chunks). Raises OSError."""
    return _digest(path, "sha256").hexdigest()


def _digest(path: str, algorithm: str):
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h


def read_manifest(root: str) -> dict:
    """The manifest of the package folder `root`; MetadataError when missing or not ours."""
    path = os.path.join(root, MANIFEST)
    doc = read_json(path, "the kernel package manifest")
    if not isinstance(doc, dict) or doc.get("schema") not in SCHEMAS:
        raise MetadataError(f"{path}: not a {SCHEMA} manifest")
    if "files" in doc and not (isinstance(doc["files"], dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in doc["files"].items())):
        raise MetadataError(f"{path}: 'files' must map paths to sha256 hex strings")
    if not isinstance(doc.get("name", ""), str) or not isinstance(doc.get("version", ""), str):
        raise MetadataError(f"{path}: 'name' and 'version' must be strings")
    return doc


def recorded_files(root: str, name: str, version: str | None = None) -> dict:
    """{path inside the package folder `root` ('/'-separated): importlib.metadata.PackagePath}
    of the files the RECORD of the distribution installed beside `root` lists with a hash (the
    compiled .pyc files an installer adds are listed without one). Raises MetadataError when no
    distribution there records the package."""
    site, top = os.path.split(os.path.abspath(root))
    found = []
    for dist in importlib.metadata.distributions(name=name, path=[site]):  # the dist-info named after it only
        files = dist.files or ()
        mine = {str(f)[len(top) + 1:]: f for f in files if str(f).startswith(top + "/") and f.hash is not None}
        if f"{top}/{MANIFEST}" in {str(f) for f in files}:
            found.append((dist.version != version, mine))
    if not found:
        raise MetadataError(f"{root}: no installed distribution in {site} records the {name} package (its "
                            f"*.dist-info/RECORD holds the files' hashes): install the wheel with pip")
    return min(found, key=lambda f: f[0])[1]  # the one of the manifest's version first


def _check(root: str, name: str, rel: str, entry) -> None:
    """MetadataError unless the file `rel` of `root` has the size and hash its RECORD `entry` gives."""
    path = os.path.join(root, *rel.split("/"))
    mode, value = entry.hash.mode, entry.hash.value
    if mode not in hashlib.algorithms_guaranteed or mode in WEAK:
        raise MetadataError(f"{path}: the {name} package's RECORD gives it a {mode!r} hash, not sha256: reinstall {name}")
    try:
        got = _digest(path, mode).digest()
    except OSError as exc:
        raise MetadataError(f"{path}: listed in the {name} package's RECORD but unreadable: "
                            f"{exc.strerror} (reinstall {name})") from None
    want = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    if got != want:
        raise MetadataError(f"{path}: {mode} {got.hex()[:16]}... does not match the {name} package's RECORD "
                            f"({want.hex()[:16]}...): the install is corrupt or was modified; reinstall {name}")


def verify_package(root: str) -> dict:
    """Check every file of the package folder `root` that its distribution's RECORD lists with a
    hash, and that lib/, tuning/ and launcher/ hold no file the RECORD does not list. Returns
    the manifest with "files" set to the checked paths; raises MetadataError naming the file."""
    doc = read_manifest(root)
    name = doc.get("name") or os.path.basename(root)
    files = recorded_files(root, name, doc.get("version"))
    for rel, entry in sorted(files.items()):
        if rel.startswith("/") or ".." in rel.split("/"):
            raise MetadataError(f"{root}: the {name} package's RECORD lists {rel!r}, outside the package")
        _check(root, name, rel, entry)
    lib = os.path.join(root, "lib")
    if not os.path.isdir(lib):
        raise MetadataError(f"{lib}: the {name} package has no lib/ folder; reinstall {name}")
    for folder in CHECKED:
        extra = sorted(f"{folder}/{n}" for n in (os.listdir(os.path.join(root, folder))
                                                 if os.path.isdir(os.path.join(root, folder)) else ())
                       if n != "__pycache__" and f"{folder}/{n}" not in files)
        if extra:
            raise MetadataError(f"{os.path.join(root, folder)}: {', '.join(extra)} not part of the {name} package "
                                "(its RECORD does not list them: added after install, or stale files?)")
    return {**doc, "files": sorted(files)}


def load_package(init_file: str, driver=None):
    """The Library of the package whose `__init__.py` is `init_file`, after verify_package."""
    from . import open_library

    root = os.path.dirname(os.path.abspath(init_file))
    doc = verify_package(root)
    if any(rel.startswith("launcher/") for rel in doc["files"]):  # RECORD-checked, as every file
        from . import cext

        cext.add_prebuilt(os.path.join(root, "launcher"))  # the C launcher compiled into the wheel
    lib_dir = os.path.join(root, "lib")
    library = open_library(lib_dir, driver)  # through the wheel's index: a kernel's metadata on first use
    library.manifest = doc
    return library
