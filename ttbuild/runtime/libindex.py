"""The library index `lib/ttbuild.index` (schema "ttbuild.index/1"): which metadata files hold each kernel's variants, so `load` reads a kernel's JSON only when that kernel is first used; stdlib only.

The build writes it when it ends, under the artifacts lock, after it pruned lib/
(ttbuild.graph.reporter), and removes it as a build starts, so a build that never finished
leaves no index; `ttbuild package` writes one into the wheel. `write_index(lib_dir)` makes one
for a library made otherwise. The runtime uses it only when it lists exactly the `*.json` files
of lib/, and reads a kernel's files only on its first use, each checked against the sha256 the
index holds (a JSON edited after the index was written is a MetadataError asking for a rebuild).
A library without a usable index loads every JSON up front, as before (ttbuild.runtime.load).

    {"schema": "ttbuild.index/1",
     "kernels": [{"file": "ops/add.py", "kernel": "add_kernel",
                  "variants": [["add_kernel_1a2b.json", "add_kernel_1a2b", "<sha256 of the JSON>",
                                "cuda:90", [["cubin", "cuda:90", "sm_90a"], ...]], ...]}, ...]}

A variant row is [metadata file, variant name, sha256 hex of the file, target, images as
[kind, target, arch]] and, for a variant built for a GPU model, [model, sm_count]: what `load` and `serve` need before a launch (kernel names, the files
they come from, whether the GPU is covered; docs/CONTRACTS.md "Library index").
"""

from __future__ import annotations

import hashlib
import json
import os

from .metadata import Image, MetadataError, Variant, best_image, parse_variant

INDEX = "ttbuild.index"  # not "*.json": older runtimes and the JSON listings of lib/ never take it for a variant
SCHEMA = "ttbuild.index/1"


def variant_row(json_name: str, digest: str, v: Variant) -> list:
    """The index row of variant `v`, read from `json_name` whose bytes have sha256 `digest`; a variant built for
    a GPU model has a sixth item, [model, sm_count]."""
    row = [json_name, v.variant, digest, v.target, [[i.kind, i.target, i.arch] for i in v.images]]
    return row + [[v.gpu["model"], v.gpu["sm_count"]]] if v.gpu else row


def index_bytes(rows: list) -> bytes:
    """The index file for `rows` of (file, kernel, variant_row), grouped by kernel in file-name
    order: the same library gives the same bytes on any machine."""
    kernels: dict = {}
    for file, kernel, row in sorted(rows, key=lambda r: r[2][0]):
        kernels.setdefault((file, kernel), []).append(row)
    doc = {"schema": SCHEMA, "kernels": [{"file": f, "kernel": k, "variants": vs} for (f, k), vs in kernels.items()]}
    return (json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n").encode()


def previous_rows(lib_dir: str) -> dict:
    """{metadata file: (file, kernel, row)} of the index in `lib_dir` ({} when there is none or
    it is not ours): what an index rebuilt for unchanged files can reuse."""
    doc = _read(lib_dir)
    if doc is None:
        return {}
    return {row[0]: (k["file"], k["kernel"], row) for k in doc["kernels"] for row in k["variants"]}


def build_index(lib_dir: str, previous: dict | None = None) -> bytes:
    """The index of `lib_dir` as it is now: each `*.json` is hashed, and parsed (parse_variant)
    only when `previous` (previous_rows) has no row for those bytes. Raises MetadataError for a
    file the runtime could not load."""
    rows = []
    for name in sorted(n for n in os.listdir(lib_dir) if n.endswith(".json")):
        path = os.path.join(lib_dir, name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise MetadataError(f"{path}: cannot read metadata: {exc.strerror or exc}") from None
        digest = hashlib.sha256(data).hexdigest()
        old = (previous or {}).get(name)
        if old is not None and old[2][2] == digest:
            rows.append(old)
            continue
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise MetadataError(f"{path}: cannot read JSON: {exc}") from None
        v = parse_variant(doc, path)
        rows.append((v.file, v.kernel, variant_row(name, digest, v)))
    return index_bytes(rows)


def write_index(lib_dir: str, previous: dict | None = None) -> str | None:
    """Write `<lib_dir>/ttbuild.index` (atomically) for the library as it is now; returns its
    path. When a metadata file would not load, write none (and remove an old one): `load` then
    reads every file and names the bad one. Returns None then, or when `lib_dir` is missing."""
    from ..fileio import replace_file

    if not os.path.isdir(lib_dir):
        return None
    path = os.path.join(lib_dir, INDEX)
    try:
        data = build_index(lib_dir, previous)
    except MetadataError:
        remove_index(lib_dir)
        return None
    replace_file(path, data)
    return path


def remove_index(lib_dir: str) -> None:
    """Remove the index of `lib_dir`, if any (a build starting: lib/ is about to change)."""
    try:
        os.unlink(os.path.join(lib_dir, INDEX))
    except FileNotFoundError:
        pass


def _read(lib_dir: str) -> dict | None:
    try:
        with open(os.path.join(lib_dir, INDEX), "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(doc, dict) and doc.get("schema") == SCHEMA and isinstance(doc.get("kernels"), list)):
        return None
    for k in doc["kernels"]:
        if not (isinstance(k, dict) and isinstance(k.get("file"), str) and isinstance(k.get("kernel"), str)
                and isinstance(k.get("variants"), list) and all(_row_ok(r) for r in k["variants"])):
            return None
    return doc


def _row_ok(row) -> bool:
    if not isinstance(row, list):
        return False
    model_ok = len(row) == 5 or (len(row) == 6 and isinstance(row[5], list) and len(row[5]) == 2
                                 and isinstance(row[5][0], str) and type(row[5][1]) is int)
    return (model_ok and all(isinstance(x, str) for x in row[:4])
            and os.path.basename(row[0]) == row[0] and row[0].endswith(".json") and isinstance(row[4], list)
            and all(isinstance(i, list) and len(i) == 3 and all(isinstance(x, str) for x in i) for i in row[4]))


class KernelGroup:
    """The variants of one kernel (source file, name): given as Variants, or named by index rows
    and read from lib/ on the first `load()`. `order` keys put variants of several groups back
    in library order (metadata file names)."""

    def __init__(self, file: str, kernel: str, *, variants=None, rows=None, lib_dir: str = "", order=None):
        self.file, self.kernel = file, kernel
        self._variants = list(variants) if variants is not None else None
        self._rows = list(rows or ())
        self.lib_dir = lib_dir
        if variants is not None:
            self.names = tuple(v.variant for v in variants)
            self.order = tuple(order if order is not None else range(len(self.names)))
        else:
            self.names = tuple(r[1] for r in self._rows)
            self.order = tuple(r[0] for r in self._rows)

    @property
    def loaded(self) -> bool:
        """Whether the variants' metadata has been read."""
        return self._variants is not None

    def load(self) -> list[Variant]:
        """The group's Variants, read and validated on the first call. Raises MetadataError for a
        bad file or one whose bytes are not those the index was written for."""
        if self._variants is None:
            self._variants = [self._parse(row) for row in self._rows]
        return self._variants

    def _parse(self, row) -> Variant:
        path = os.path.join(self.lib_dir, row[0])
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise MetadataError(f"{path}: cannot read metadata: {exc.strerror or exc}") from None
        if hashlib.sha256(data).hexdigest() != row[2]:
            raise MetadataError(f"{path}: changed since {os.path.join(self.lib_dir, INDEX)} was written: rebuild the "
                                f"library (ttbuild build), or remove {INDEX} to load every file as it is")
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise MetadataError(f"{path}: cannot read JSON: {exc}") from None
        return parse_variant(doc, path)

    def images(self) -> list[Image]:
        """Every image of the group's variants (path left empty when read from the index): what
        runs where, without reading the metadata."""
        if self._variants is not None:
            return [i for v in self._variants for i in v.images]
        return [Image(kind, target, arch, "") for r in self._rows for kind, target, arch in r[4]]

    def runs_on(self, capability) -> bool:
        """Whether a variant of the group runs on `capability` (an image for it, and the SM count of the GPU model
        a variant was built for, when the driver's Capability carries one: Variant.model_ok)."""
        if self._variants is not None:
            return any(v.runs_on(capability) for v in self._variants)
        sms = getattr(capability, "sm_count", None)
        return any(best_image([Image(k, t, a, "") for k, t, a in r[4]], capability) is not None
                   and (sms is None or len(r) < 6 or r[5][1] == sms) for r in self._rows)

    def models(self) -> set[str]:
        """The GPU models the group's variants were built for (none: only compute capabilities)."""
        if self._variants is not None:
            return {v.gpu["model"] for v in self._variants if v.gpu}
        return {r[5][0] for r in self._rows if len(r) > 5}

    def targets(self) -> set[str]:
        """The variants' (primary) targets, "cuda:90"."""
        if self._variants is not None:
            return {v.target for v in self._variants}
        return {r[3] for r in self._rows}


def groups_of(variants) -> dict:
    """{(file, kernel): KernelGroup} of loaded Variants, in library order."""
    by: dict = {}
    for i, v in enumerate(variants):
        by.setdefault((v.file, v.kernel), []).append((i, v))
    return {key: KernelGroup(key[0], key[1], variants=[v for _, v in items], order=[i for i, _ in items])
            for key, items in by.items()}


def read_index(lib_dir: str) -> dict | None:
    """{(file, kernel): KernelGroup} from `<lib_dir>/ttbuild.index`, or None when there is none,
    it is not ours, or it does not list exactly the `*.json` files of lib_dir (a library changed
    by hand, or copied in part): the caller then reads every file."""
    doc = _read(lib_dir)
    if doc is None:
        return None
    try:
        names = {n for n in os.listdir(lib_dir) if n.endswith(".json")}
    except OSError:
        return None
    listed = [r[0] for k in doc["kernels"] for r in k["variants"]]
    if len(listed) != len(names) or set(listed) != names:
        return None
    groups: dict = {}
    for k in doc["kernels"]:
        key = (k["file"], k["kernel"])
        if key in groups:  # one kernel written as two entries: not what write_index makes
            return None
        groups[key] = KernelGroup(k["file"], k["kernel"], rows=k["variants"], lib_dir=lib_dir)
    return groups


def main(argv: list[str] | None = None) -> int:
    """`python -m ttbuild.runtime.libindex ARTIFACTS_OR_LIB...`: (re)write the index of libraries
    built before it existed or copied in part. Exit status 2 when a library has a metadata file
    the runtime could not load (named on stderr; no index is written for it)."""
    import sys

    status = 0
    for arg in (sys.argv[1:] if argv is None else argv):
        lib = os.path.join(arg, "lib") if os.path.isdir(os.path.join(arg, "lib")) else arg
        try:
            data = build_index(lib, previous_rows(lib))
        except (MetadataError, OSError) as exc:
            print(f"ttbuild index: error: {exc}", file=sys.stderr)
            status = 2
            continue
        from ..fileio import replace_file

        replace_file(os.path.join(lib, INDEX), data)
        print(os.path.join(lib, INDEX))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
