"""The doit task graph: one task per unique (stage, key), one `meta:<variant>` per built variant, and DOIT_CONFIG."""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import fields
from pathlib import Path
from typing import Mapping

from doit.tools import config_changed

import ttbuild
from ttbuild.canonical import canonical_json
from ttbuild.codedigest import module_digest
from ttbuild.options import Options
from ttbuild.stages import DEFAULT, FILE, SOURCE, StageSet, stage_set
from ttbuild.target import Target

from .actions import run_stage, write_meta
from .keys import chain, jit_chain
from .reporter import BuildReporter
from .state import XXHashChecker
from .variants import Variant, load_variants

GROUP_DOCS = {**{s.name: s.doc for s in DEFAULT}, "meta": "artifacts/lib/<variant>.json + .cubin, what the runtime loads"}
TASK_GROUPS = (*DEFAULT.names, "meta")
DEP_FILE = ".doit.db"


class ConfigChanged(config_changed):
    """doit's `config_changed` up-to-date check with its call signature given up front.

    doit calls `inspect.signature` on every up-to-date callable at every status check
    (doit.dependency.Dependency.get_status, to pass `task` and `values`); for an instance that
    means resolving `__call__` each time, 30 % of a no-op rebuild of 3000 variants.
    `inspect.signature` returns an object's `__signature__` as it is (Python's inspect docs)."""

    __signature__ = inspect.Signature([inspect.Parameter("task", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                                       inspect.Parameter("values", inspect.Parameter.POSITIONAL_OR_KEYWORD)])


def doit_config(artifacts_dir: str | Path = "artifacts") -> dict:
    """DOIT_CONFIG for a ttbuild project.

    The dependency DB lives inside artifacts/ (`artifacts/.doit.db`): it describes exactly
    the files there, so deleting artifacts/ resets both together, and a CI cache of
    artifacts/ carries the up-to-date state with it (paths in it are relative).
    """
    Path(artifacts_dir).mkdir(parents=True, exist_ok=True)
    return {
        "backend": "sqlite3",
        "dep_file": os.path.join(str(artifacts_dir), DEP_FILE),
        "continue": True,
        "check_file_uptodate": XXHashChecker,
        "default_tasks": list(TASK_GROUPS),
        "verbosity": 1,
        "reporter": BuildReporter.for_artifacts(artifacts_dir),
    }


def output_paths(artifacts: Path, stage: str, key: str, kernel: str, stages: StageSet = DEFAULT) -> dict[str, str]:
    """role -> path of a stage's outputs: artifacts/<stage>/<key>/<kernel><suffix>, the suffixes
    the stage table declares (CONTRACTS.md). Joined as strings (what str(Path / ...) gives):
    42,000 Path joins were a tenth of a no-op rebuild of 3000 variants."""
    base = _under(artifacts, stage, key, kernel)
    return {role: base + suffix for role, suffix in stages[stage].files.items()}


def _under(artifacts: Path, *parts: str) -> str:
    """str(artifacts / part / ...), joined as strings (a `.` root adds nothing, as with Path)."""
    root = str(artifacts)
    return os.path.join(*parts) if root == "." else os.path.join(root, *parts)


def _title(task) -> str:
    return f"{task.name}  {task.doc}" if task.doc else task.name


def _rel(path: str | Path) -> Path:
    """`path` relative to the working directory when inside it: keeps the doit DB portable."""
    path = Path(path)
    try:
        return Path(os.path.relpath(path)) if path.is_absolute() else path
    except ValueError:  # another drive on Windows
        return path


# A variant's own fields but its options, and its options' fields, listed once (dataclasses.fields
# per variant was a tenth of generating a 3000-variant graph).
# (`params`, the parsed signature, is not metadata: the document's params are the ABI the ttir stage records)
_VARIANT_FIELDS = tuple(f.name for f in fields(Variant) if f.name not in ("options", "params"))
_OPTION_FIELDS = tuple(f.name for f in fields(Options))


def variant_doc(v: Variant) -> dict:
    """The JSON-serialisable fields of a variant that the metadata task needs (a shallow copy:
    `dataclasses.asdict` deep-copies every field and cost a tenth of a 3000-variant no-op)."""
    doc = {name: getattr(v, name) for name in _VARIANT_FIELDS}
    opts = v.options
    doc.update({name: getattr(opts, name) for name in _OPTION_FIELDS})
    doc = {k: (dict(x) if isinstance(x, dict) else list(x) if isinstance(x, list) else x) for k, x in doc.items()}
    # A row's place in variants.toml is no input of its build: moving or deleting rows must not
    # rerun the others' meta tasks (the index only places diagnostics).
    del doc["index"]
    doc["ptxas_options"] = list(v.ptxas_options)
    doc["arch"] = v.arch
    # only autotune / heuristics variants carry these (the others keep their documents)
    if not v.tuning:
        doc.pop("tuning", None)
    if not v.heuristics:
        doc.pop("heuristics", None)
    if not v.disable_mma_v3:  # only variants that set it carry it (the others keep their documents)
        doc.pop("disable_mma_v3", None)
    if not v.disable_tma:
        doc.pop("disable_tma", None)
    # A GPU model reaches the metadata only where the parse read device facts under it (its key holds
    # the model): the runtime then refuses another model (ttbuild.runtime.select.arch_ok).
    if opts.gpu and not v.parse.get("device"):
        doc["gpu"] = ""
    # a project kernel's parse facts are the parse task's inputs, not metadata; its module stays
    doc.pop("parse", None)
    if not v.module:
        doc.pop("module", None)
    if v.targets:
        doc["targets"] = list(v.targets)
    else:  # single-target variants keep the document (and the meta task's up-to-date check) they had
        doc.pop("targets", None)
    return doc


def generate_tasks(kernels_dir: str | Path = "kernels", artifacts_dir: str | Path = "artifacts",
                   stage_package: StageSet | str | None = None, variants: list[Variant] | None = None):
    """Yield doit task dicts for every variant in `kernels_dir`/variants.toml.

    Stage tasks are named `<stage>:<key>` and appear once however many variants share them;
    their doc names the kernel and every variant that uses them. Raises VariantError for a
    bad variant list and ImportError when a stage module or its VERSION is missing.
    stage_package: the `ttbuild.stages.StageSet` (or its package's name; default the compiler's).
    """
    kernels, artifacts = _rel(kernels_dir), _rel(artifacts_dir)
    if variants is None:
        variants = load_variants(kernels)
    stages = stage_set(stage_package)
    versions = stages.versions
    # The source of what each stage runs (ttbuild.codedigest): an edit to the compiler reruns
    # the stages it can affect even when no VERSION was bumped.
    codes = {stage: module_digest(stages.module_name(stage)) for stage in stages.names}

    stage_tasks: dict[str, dict] = {}
    users: dict[str, list[str]] = {}
    meta_tasks = []
    meta_shared = meta_config_parts(versions, codes)
    chains: dict[str, list] = {}
    # every field of a variant but its name and place in the list (repr(replace(v, index=0,
    # name="")) validated each variant again)
    chain_fields = [name for name in _VARIANT_FIELDS if name not in ("index", "name")]
    paths: dict[tuple[str, str, str], dict[str, str]] = {}  # aliases share their chain's paths too

    def add_stage(name, kernel, node, inputs, outs, loc_path):
        stage_tasks[name] = {
            "basename": node.stage, "name": node.key,
            "actions": [(run_stage, [node.stage, stages, inputs, outs, node.options,
                                     loc_path, None])],
            "file_dep": list(inputs.values()),
            "targets": list(outs.values()),
            "uptodate": [ConfigChanged(stage_config(node, versions[node.stage], codes[node.stage]))],
            "clean": True,
            "title": _title,
            "_kernel": kernel,
        }

    def add_chain(v, vt, kernel):
        """The stage tasks of variant `v`'s chain for `vt` (v, or v narrowed to one target);
        (outputs per stage, keys per stage, the loc table's path)."""
        outs_of: dict[str, dict[str, str]] = {}
        keys_of: dict[str, str] = {}
        loc_path = None
        # Variants that differ only in name (aliases) share one chain: computed once.
        opts = vt.options
        same = repr([getattr(vt, f) for f in chain_fields] + [getattr(opts, f) for f in _OPTION_FIELDS])
        nodes = chains.get(same)
        if nodes is None:
            nodes = chains[same] = chain(vt, stages)
        for node in nodes:
            outs = paths.get((node.stage, node.key, v.kernel))
            if outs is None:
                outs = paths[node.stage, node.key, v.kernel] = output_paths(artifacts, node.stage, node.key,
                                                                            v.kernel, stages)
            outs_of[node.stage] = outs
            keys_of[node.stage] = node.key
            if node.stage == "parse":
                loc_path = outs["loc"]
            # the plan's wiring (a debug ttir also reads the loc table: real positions for asserts)
            inputs = {role: str(kernels / v.file) if src == SOURCE else r if src == FILE else outs_of[src][r]
                      for role, (src, r) in node.inputs.items()}
            if node.stage == "parse":  # a project kernel also reads the project modules its module may import
                inputs.update({f"module:{m}": str(kernels / f) for m, f in node.options.get("modules", {}).items()
                               if m != node.options["module"]})
            name = f"{node.stage}:{node.key}"
            users.setdefault(name, []).append(v.name)
            if name not in stage_tasks:
                add_stage(name, kernel, node, inputs, outs, loc_path)
        return outs_of, keys_of, loc_path

    for v in variants:
        kernel = f"{v.kernel} ({v.file})"
        # A multi-target variant builds one chain per target (shared stages dedupe as usual).
        per_target = {}
        for target in v.targets or (v.target,):
            # (descriptors in their pointer form: every image of the variant takes the same parameters)
            per_target[target] = add_chain(
                v, v.with_options(target=target, targets=(), disable_tma=True) if v.targets else v, kernel)
        jit = None
        if v.targets and v.until == "cubin":
            # PTX of the newest target for the driver to JIT on newer GPUs: its portable arch
            # (sm_90, not sm_90a, whose PTX loads on 9.0 only), from the same LLIR unless that
            # may hold wgmma (sm_90a only): then from a chain with every dot on mma.sync.
            outs_of, keys_of, loc_path = per_target[v.target]
            if Target.parse(v.target).capability >= 90 and not v.disable_mma_v3:
                outs_of, keys_of, loc_path = add_chain(
                    v, v.with_options(targets=(), disable_mma_v3=True, disable_tma=True, until="llir"), kernel)
            node = jit_chain(keys_of["llir"], v.target, stages)
            outs = output_paths(artifacts, "ptx", node.key, v.kernel, stages)
            name = f"ptx:{node.key}"
            users.setdefault(name, []).append(v.name)
            if name not in stage_tasks:
                add_stage(name, kernel, node, {role: outs_of[s][r] for role, (s, r) in node.inputs.items()}, outs, loc_path)
            jit = (node.options["arch"], outs["ptx"])
        if v.until == "cubin":
            meta_tasks.append(_meta_task(v, artifacts, per_target, jit, meta_shared, stages))

    for name, task in stage_tasks.items():
        kernel = task.pop("_kernel")
        label = f"{kernel} -> {', '.join(users[name])}"
        task["doc"] = label
        action, args = task["actions"][0]
        args[-1] = label
    for group in TASK_GROUPS:
        yield {"basename": group, "name": None, "doc": GROUP_DOCS[group]}
    yield from stage_tasks.values()
    yield from meta_tasks


@functools.lru_cache(maxsize=64)
def _stage_config_ends(stage: str, version: int, code: str) -> tuple[str, str]:
    return (f'{{"code":{canonical_json(code)},"options":',
            f',"stage":{canonical_json(stage)},"version":{canonical_json(int(version))}}}')


def stage_config(node, version: int, code: str) -> str:
    """canonical_json({"stage", "version", "code", "options"}) of a stage task's up-to-date
    check, the same text, from the options' JSON its key was computed from and the stage's
    constant parts encoded once."""
    oj = getattr(node, "options_json", "") or canonical_json(dict(node.options))
    head, tail = _stage_config_ends(node.stage, version, code)
    return head + oj + tail


def meta_config_parts(versions: Mapping[str, int], codes: Mapping[str, str]) -> dict[str, str]:
    """The canonical JSON of what every meta task's up-to-date config shares (stage versions,
    code digests, ttbuild's version), encoded once per graph: meta_config joins them."""
    return {"code": canonical_json(dict(codes)), "meta_code": canonical_json(module_digest("ttbuild.graph.meta")),
            "ttbuild": canonical_json(ttbuild.__version__), "versions": canonical_json(dict(versions))}


def meta_config(shared: Mapping[str, str], doc: dict) -> str:
    """canonical_json({"code", "meta_code", "ttbuild", "variant": doc, "versions"}), the same
    text, with the shared parts pre-encoded (a no-op rebuild of 3000 variants encoded the same
    digests 3000 times)."""
    return (f'{{"code":{shared["code"]},"meta_code":{shared["meta_code"]},"ttbuild":{shared["ttbuild"]},'
            f'"variant":{canonical_json(doc)},"versions":{shared["versions"]}}}')


def _meta_task(v: Variant, artifacts: Path, per_target: dict, jit, shared: dict, stages: StageSet) -> dict:
    """`meta:<variant>`: lib/<variant>.json and .cubin (the newest target's); a multi-target
    variant also gets lib/<variant>.<arch>.cubin per other target and lib/<variant>.<arch>.ptx."""
    lib = _under(artifacts, "lib")
    json_path, cubin_path = os.path.join(lib, f"{v.name}.json"), os.path.join(lib, f"{v.name}.cubin")
    outs_of = per_target[v.target][0]
    paths = {s.name: outs_of[s.name][s.product] for s in stages}
    paths["abi"] = outs_of["ttir"]["abi"]  # the kernel ABI the ttir stage recorded: the metadata's params
    images = []
    for target in v.targets:
        t_outs = per_target[target][0]
        arch = Target.parse(target).arch
        file = f"{v.name}.cubin" if target == v.target else f"{v.name}.{arch}.cubin"
        images.append({"kind": "cubin", "target": target, "arch": arch, "file": file,
                       "source": t_outs["cubin"]["cubin"], "ttgir": t_outs["ttgir"]["ttgir"]})
    if jit is not None:
        arch, ptx_path = jit
        images.append({"kind": "ptx", "target": v.target, "arch": arch, "file": f"{v.name}.{arch}.ptx",
                       "source": ptx_path, "ttgir": outs_of["ttgir"]["ttgir"]})
    doc = variant_doc(v)
    targets = [json_path, cubin_path] + [os.path.join(lib, i["file"]) for i in images if i["file"] != f"{v.name}.cubin"]
    deps = list(paths.values()) + [p for i in images for p in (i["source"], i["ttgir"])]
    return {
        "basename": "meta", "name": v.name,
        "actions": [(write_meta, [doc, paths, json_path, cubin_path, images])],
        "file_dep": list(dict.fromkeys(deps)),
        "targets": targets,
        # The stage versions and code digests ride along so `ttbuild explain` can name a bumped
        # VERSION or a compiler edit (the stage tasks already rerun for them).
        "uptodate": [ConfigChanged(meta_config(shared, doc))],
        "clean": True,
        "title": _title,
        "doc": f"{v.kernel} ({v.file}) -> lib/{v.name}.json, lib/{v.name}.cubin"
               + (f" (+{len(images) - 1} images)" if images else ""),
    }
