"""Loads a kernel library installed as a Python package (a wheel made by `ttbuild package`): checks every file against the package manifest's sha256, then `ttbuild.runtime.load`s it; stdlib only.

Package layout (docs/CONTRACTS.md, "Kernel wheels"):

    <name>/__init__.py            generated: `library = load_package(__file__)`, kernels as attributes
    <name>/ttbuild_library.json   manifest, schema "ttbuild.library/1": name, version, kernels,
                                  targets, archs, ptx, min_cuda_driver, files {path: sha256 hex}
    <name>/lib/<variant>.json, .cubin (.ptx)   the artifacts/lib files, unchanged
    <name>/lib/ttbuild.index      the library index of those files (ttbuild.runtime.libindex)
    <name>/tuning/<kernel>.json   the tuning tables of autotuned kernels (ttbuild tune), if any
    <name>/launcher/ttbuild_claunch-<digest><EXT_SUFFIX>   the C launcher compiled in (ttbuild.runtime.cext), if any
"""

from __future__ import annotations

import hashlib
import os

from .metadata import MetadataError, read_json

MANIFEST = "ttbuild_library.json"
SCHEMA = "ttbuild.library/1"


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(root: str) -> dict:
    """The manifest of the package folder `root`; MetadataError when missing or not ours."""
    path = os.path.join(root, MANIFEST)
    doc = read_json(path, "the kernel package manifest")
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("files"), dict):
        raise MetadataError(f"{path}: not a {SCHEMA} manifest")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in doc["files"].items()):
        raise MetadataError(f"{path}: 'files' must map paths to sha256 hex strings")
    if not isinstance(doc.get("name", ""), str):
        raise MetadataError(f"{path}: 'name' must be a string")
    return doc


def verify_package(root: str) -> dict:
    """Check every file the manifest lists against its sha256, and that lib/ holds no metadata
    the manifest does not list. Returns the manifest; raises MetadataError naming the file."""
    doc = read_manifest(root)
    name = doc.get("name", os.path.basename(root))
    for rel, digest in sorted(doc["files"].items()):
        path = os.path.join(root, *rel.split("/"))
        if os.path.isabs(rel) or ".." in rel.split("/"):
            raise MetadataError(f"{os.path.join(root, MANIFEST)}: file {rel!r} is outside the package")
        try:
            got = sha256_file(path)
        except OSError as exc:
            raise MetadataError(f"{path}: listed in the {name} package manifest but unreadable: "
                                f"{exc.strerror} (reinstall {name})") from None
        if got != digest:
            raise MetadataError(f"{path}: sha256 {got[:16]}... does not match the {name} package "
                                f"manifest ({digest[:16]}...): the install is corrupt or was modified; "
                                f"reinstall {name}")
    lib = os.path.join(root, "lib")
    try:
        names = os.listdir(lib)
    except OSError as exc:
        raise MetadataError(f"{lib}: the {name} package has no readable lib/ folder ({exc.strerror}); reinstall {name}") from None
    extra = sorted(n for n in names if n.endswith(".json") and f"lib/{n}" not in doc["files"])
    if extra:
        raise MetadataError(f"{lib}: {', '.join(extra)} not part of the {name} package (stale files?)")
    # The runtime reads every tuning/*.json it finds (ttbuild.runtime.tuned): one the manifest
    # does not list would steer launches unchecked.
    tuning = os.path.join(root, "tuning")
    extra = sorted(n for n in (os.listdir(tuning) if os.path.isdir(tuning) else ())
                   if f"tuning/{n}" not in doc["files"] and n != "__pycache__")
    if extra:
        raise MetadataError(f"{tuning}: {', '.join(extra)} not part of the {name} package (added after install?)")
    return doc


def load_package(init_file: str, driver=None):
    """The Library of the package whose `__init__.py` is `init_file`, after verify_package."""
    from . import open_library

    root = os.path.dirname(os.path.abspath(init_file))
    doc = verify_package(root)
    if any(rel.startswith("launcher/") for rel in doc["files"]):
        from . import cext

        cext.add_prebuilt(os.path.join(root, "launcher"))  # the C launcher compiled into the wheel
    lib_dir = os.path.join(root, "lib")
    library = open_library(lib_dir, driver)  # through the wheel's index: a kernel's metadata on first use
    library.manifest = doc
    return library
