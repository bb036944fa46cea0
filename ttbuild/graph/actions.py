"""doit actions: run one stage on its input files (through the content-addressed cache), or write a variant's lib/ files.

Every action reads its inputs, computes all outputs in memory (from the cache when the same
action ran before, anywhere the cache is shared), then writes them atomically;
a stage that raises CompilationError / ToolError yields doit's TaskFailed with the rendered
diagnostic, writes nothing, and removes that task's stale outputs (make's .DELETE_ON_ERROR),
so nothing downstream can consume a result that no longer matches its source.
"""

from __future__ import annotations

import inspect
import json
import os
import time
import warnings
from pathlib import Path
from typing import Mapping

from doit.exceptions import TaskFailed

from ttbuild import collector
from ttbuild.errors import CompilationError, CompilerWarning, ToolError
from ttbuild.fileio import atomic_write
from ttbuild.locs import render_error


def run_stage(stage: str, package, inputs: Mapping[str, str], outputs: Mapping[str, str],
              options: dict, loc_path: str | None, label: str):
    """doit python-action for one (stage, key) task.

    inputs: role -> path to read; outputs: role -> path to write; options: the stage's JSON
    options; loc_path: the parse `loc` table used to resolve node ids in diagnostics (read
    only on failure, so it is not a file_dep: a blank-line edit must not rerun later stages);
    label: "kernel (variants)" for messages. package: the `ttbuild.stages.StageSet`.

    The stage runs through `ttbuild.compiler.run_stage`, the one the in-memory driver
    (`ttbuild.compile`) uses, with the process's cache (`ttbuild.cache.default_cache`): the
    action key covers the stage, its VERSION, input contents, options and tool versions
    (docs/CONTRACTS.md, "## Cache"); a stage package other than ttbuild.stages (test doubles)
    is part of the key too, so its outputs never answer for the real compiler's. Returns doit
    task values on success, `{"cached": bool, "seconds": float}` (the reporter's summary reads
    them), or TaskFailed.

    A cache miss computes under the per-stage time and memory limits of the environment
    (`ttbuild.limits`: TTBUILD_STAGE_TIMEOUT, TTBUILD_STAGE_MEMORY) in the stage runner, so a
    runaway or crashing stage fails alone, as a compilation error of its variant.
    """
    from ttbuild.cache import default_cache
    from ttbuild.compiler import run_stage as compile_stage
    from ttbuild.limits import StageLimits

    collector.resume()  # work starts: the graph is checked, what a stage leaves is collected
    start = time.perf_counter()
    try:
        limits = StageLimits.from_env()
    except ValueError as exc:
        return TaskFailed(f"{stage} not run for {label}: {exc}")
    try:
        data = {role: Path(path).read_bytes() for role, path in inputs.items()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CompilerWarning)
            result, cached = compile_stage(stage, data, options, package=package, cache=default_cache(),
                                           limits=limits)
    except (CompilationError, ToolError) as exc:
        _remove(outputs.values())
        return TaskFailed(f"{stage} failed for {label}:\n{render_error(exc, loc_path)}")
    except BaseException:
        _remove(outputs.values())
        raise
    try:
        for role, path in outputs.items():
            atomic_write(path, bytes(result[role]))
    except OSError as exc:  # a full disk, a read-only folder: the environment, said as such
        _remove(outputs.values())
        return TaskFailed(f"{stage} could not write its output for {label}: {os_error_text(exc)}")
    values = {"cached": cached, "seconds": round(time.perf_counter() - start, 6)}
    found = [w.message for w in caught if isinstance(w.message, CompilerWarning)]
    for w in caught:  # recording swallowed every other warning: hand those back
        if not isinstance(w.message, CompilerWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if found:  # the reporter prints them (a worker's own output is not shown)
        from ttbuild.locs import locate_warning

        table = Path(loc_path).read_bytes() if loc_path and Path(loc_path).is_file() else None
        values["warnings"] = [f"{locate_warning(w, table).render()}  ({label})" for w in found]
    return values


def write_meta(variant_doc: dict, paths: Mapping[str, str], json_path: str, cubin_path: str,
               images: list | None = None):
    """doit python-action for `meta:<variant>`: writes lib/<variant>.cubin (and a multi-target
    variant's other images: `images` of {kind, target, arch, file, source, ttgir}), then
    lib/<variant>.json.

    paths: stage -> the output file whose hash the metadata records (parse: its `json`), and
    "abi" -> the ttir stage's record of the kernel ABI.
    The images go first so a reader that finds the JSON always finds its files.
    """
    from .meta import MetaError, build_metadata, image_entry

    collector.resume()
    lib = os.path.dirname(json_path)
    extra = [os.path.join(lib, i["file"]) for i in images or () if i["file"] != os.path.basename(cubin_path)]
    try:
        blobs = {stage: Path(p).read_bytes() for stage, p in paths.items()}
        data = {i["file"]: Path(i["source"]).read_bytes() for i in images or ()}
        entries = [image_entry(i, data[i["file"]], Path(i["ttgir"]).read_bytes()) for i in images or ()]
        doc = build_metadata(variant_doc, blobs, cubin_name=os.path.basename(cubin_path), images=entries)
    except MetaError as exc:
        _remove([json_path, cubin_path, *extra])
        return TaskFailed(f"meta failed for variant {variant_doc['name']}:\n{exc}")
    # lib/ images are stage outputs' bytes: hard links to those files (atomic_write checks the
    # bytes), one name more instead of one more file. Both are the build's own and only ever
    # replaced, never written in place. Cache blobs are never linked: damage to the cache must
    # not reach artifacts built from it earlier.
    sources = {i["file"]: i["source"] for i in images or ()}
    try:
        for path in extra:
            atomic_write(path, data[os.path.basename(path)], same_as=sources[os.path.basename(path)])
        atomic_write(cubin_path, blobs["cubin"], same_as=paths["cubin"])
        atomic_write(json_path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        _remove([json_path, cubin_path, *extra])
        return TaskFailed(f"meta could not write variant {variant_doc['name']} to lib/: {os_error_text(exc)}")
    return None


def os_error_text(exc: OSError) -> str:
    """`No space left on device (ENOSPC): artifacts/ttir/...`: an OSError's text with its errno
    name and file, for a message that says what the environment refused."""
    import errno

    name = errno.errorcode.get(exc.errno or 0)
    return f"{exc.strerror or exc}" + (f" ({name})" if name else "") + (f": {exc.filename}" if exc.filename else "")


def _remove(paths) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# doit calls inspect.signature on an action's callable each time it runs it (to pass `targets`,
# `task`, ... to those that ask): a tenth of a fresh checkout's 5000 cache-hit actions went to
# re-deriving these two from their code. inspect.signature returns `__signature__` as it is.
for _action in (run_stage, write_meta):
    _action.__signature__ = inspect.signature(_action)
del _action
