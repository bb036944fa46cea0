"""Chained stage keys per variant: key = xxh3_64(parent key, stage, VERSION, options JSON), along the stage table's plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import xxhash

from ttbuild.canonical import canonical_json
from ttbuild.stages import DEFAULT, Request, StageSet
from ttbuild.target import Target

from .variants import Variant


def xxh3_hex(data: str | bytes) -> str:
    """xxh3_64 of `data` (str is UTF-8 encoded) as 16 lowercase hex digits."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return xxhash.xxh3_64_hexdigest(data)


def stage_key(parent: str, stage: str, version: int, options: Mapping[str, Any], options_json: str | None = None) -> str:
    """A stage's key in the build graph (its output directory, `artifacts/<stage>/<key>/`; not
    the cache's action key, `ttbuild.cache.action_key`): xxh3_64 over `parent \\0 stage \\0 VERSION \\0 canonical-JSON(options)`.

    `parent` is the parent stage's key ("" for parse). Two variants with equal options up to
    a stage share that stage's key, hence its task and output directory.
    """
    if options_json is None:
        options_json = canonical_json(dict(options))
    return xxh3_hex(f"{parent}\0{stage}\0{int(version)}\0{options_json}")


def request(variant: Variant) -> Request:
    """What the stage table derives `variant`'s per-stage options from."""
    return Request(variant.kernel, variant.file, variant.params, variant.constexprs, variant.options)


def stage_options(variant: Variant, stages: StageSet = DEFAULT) -> dict[str, dict[str, Any]]:
    """The options each stage of `variant` runs with (`ttbuild.stages` derives them), JSON-serialisable."""
    opts = stages.options(request(variant))
    if variant.parse:  # a project kernel: what its parse reads beyond its own file (ttbuild.graph.project)
        opts["parse"].update(parse_project_options(variant.parse, variant.target, variant.options.gpu))
    return opts


def _key_json(options: dict, options_json: str) -> str:
    """The options JSON a stage key hashes: all options, except a project kernel's environment
    values, which are inputs like the source's bytes: a changed value reruns the parse in the
    same output directory (the task's up-to-date config and the cache's action key hold the
    values), so an unchanged output still stops the rest (early cutoff)."""
    if "env" not in options:
        return options_json
    return canonical_json({k: v for k, v in options.items() if k != "env"})


def parse_project_options(facts: dict, target: str, gpu: str = "") -> dict:
    """The parse options of a project kernel: its module, the project modules it may import
    (name -> file), the environment variables they read (with this build's values) and the
    target (and the GPU model, when the row names one) when a device fact is read. Kernels
    outside a project keep the options they had."""
    out = {"module": facts["module"], "modules": facts["modules"], "env": facts["env"]}
    if facts.get("device"):
        out["target"] = target
        if gpu:
            out["gpu"] = gpu
    return out


def jit_ptx_options(target: str) -> dict[str, Any]:
    """ptx options of the PTX a multi-target variant ships for newer GPUs: the target's portable
    arch (`sm_90`, never the arch-specific `sm_90a`, whose PTX the driver JITs for 9.0 only:
    PTX ISA, "Target directives: .target")."""
    t = Target.parse(target)
    return {"arch": f"sm_{t.capability}", "ptx_version": t.ptx_version}


@dataclass(frozen=True)
class StageNode:
    """One stage of one variant: its key, options, the key of the stage it reads, and its
    inputs as role -> (producer stage, role) (`ttbuild.stages.Step.inputs`)."""

    stage: str
    key: str
    parent_key: str
    options: dict
    options_json: str = ""  # canonical_json(options), computed once for the key and the task
    inputs: Mapping[str, tuple[str, str]] | None = None


def chain(variant: Variant, stages: StageSet = DEFAULT, versions: Mapping[str, int] | None = None,
          extra: Mapping[str, Mapping[str, tuple[str, str]]] | None = None) -> list[StageNode]:
    """The stages `variant` builds (parse .. its `until`, `stages.plan`), keys chained from parse
    with the stage modules' VERSIONs (`versions` given: those). extra: input files the graph
    found for a stage that takes them (`plan`'s `extra`, as (ttbuild.stages.FILE, path))."""
    opts = stage_options(variant, stages)
    versions = stages.versions if versions is None else versions
    nodes, parent = [], ""
    for step in stages.plan(variant.until, None, opts, extra):
        stage = step.stage.name
        oj = canonical_json(dict(opts[stage]))
        key = stage_key(parent, stage, versions[stage], opts[stage], _key_json(opts[stage], oj))
        nodes.append(StageNode(stage, key, parent, opts[stage], oj, step.inputs))
        parent = key
    return nodes


def jit_chain(llir_key: str, target: str, stages: StageSet = DEFAULT) -> StageNode:
    """The ptx node of a multi-target variant's JIT PTX: `stages.plan` from llir to ptx, keyed
    after the llir it reads, with `jit_ptx_options(target)`."""
    (step,) = stages.plan("ptx", "llir")
    opts = jit_ptx_options(target)
    oj = canonical_json(opts)
    key = stage_key(llir_key, "ptx", stages.versions["ptx"], opts, oj)
    return StageNode("ptx", key, llir_key, opts, oj, {role: ("llir", r) for role, (_, r) in step.inputs.items()})
