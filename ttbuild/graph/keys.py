"""Stage options per variant and chained stage keys: key = xxh3_64(parent key, stage, VERSION, options JSON)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import xxhash

from ttbuild import tma
from ttbuild.canonical import canonical_json
from ttbuild.options import Options
from ttbuild.signature import SigEntry
from ttbuild.stages import STAGES
from ttbuild.target import Target

from .variants import Variant

# Input and output roles of each stage (docs/CONTRACTS.md, "Stage modules").
INPUT_ROLE = {"parse": "source", "ttir": "json", "ttgir": "ttir", "llir": "ttgir",
              "ptx": "llir", "cubin": "ptx"}
# The parent output each stage reads: (parent stage, parent role).
PARENT_ROLE = {"ttir": ("parse", "json"), "ttgir": ("ttir", "ttir"), "llir": ("ttgir", "ttgir"),
               "ptx": ("llir", "llir"), "cubin": ("ptx", "ptx")}
OUTPUT_ROLES = {"parse": ("json", "loc"), "ttir": ("ttir",), "ttgir": ("ttgir",),
                "llir": ("llir",), "ptx": ("ptx",), "cubin": ("cubin",)}


def extra_inputs(stage: str, options: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Inputs a stage reads beyond its parent's output, as role -> (stage, role): a debug ttir
    also reads the parse `loc` table, to write real file:line positions into its locations (the
    assert messages name them). Only then: a non-debug ttir must not rerun on a blank-line edit."""
    if stage == "ttir" and options.get("debug"):
        return {"loc": ("parse", "loc")}
    return {}


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


def stage_options(variant: Variant) -> dict[str, dict[str, Any]]:
    """The options each stage of `variant` runs with (CONTRACTS.md table), JSON-serialisable."""
    opts = stage_options_of(variant.kernel, variant.file, variant.params, variant.constexprs, variant.options)
    if variant.parse:  # a project kernel: what its parse reads beyond its own file (ttbuild.graph.project)
        opts["parse"].update(parse_project_options(variant.parse, variant.target))
    return opts


def _key_json(options: dict, options_json: str) -> str:
    """The options JSON a stage key hashes: all options, except a project kernel's environment
    values, which are inputs like the source's bytes: a changed value reruns the parse in the
    same output directory (the task's up-to-date config and the cache's action key hold the
    values), so an unchanged output still stops the rest (early cutoff)."""
    if "env" not in options:
        return options_json
    return canonical_json({k: v for k, v in options.items() if k != "env"})


def parse_project_options(facts: dict, target: str) -> dict:
    """The parse options of a project kernel: its module, the project modules it may import
    (name -> file), the environment variables they read (with this build's values) and the
    target when a device fact is read. Kernels outside a project keep the options they had."""
    out = {"module": facts["module"], "modules": facts["modules"], "env": facts["env"]}
    if facts.get("device"):
        out["target"] = target
    return out


def stage_options_of(kernel: str, file: str, params: Sequence[SigEntry], constexprs: Mapping[str, Any],
                     options: Options) -> dict[str, dict[str, Any]]:
    """Stage name -> that stage's options, from a kernel's name, its `file` (as locations name
    it), its signature entries, constexpr values and compile options. The build (through
    `stage_options`) and the in-memory driver (`ttbuild.compiler`) both take their options here.
    """
    target = options.target_info
    return {
        "parse": {"kernel": kernel, "file": file},
        # `debug` keys ttir only when on, so non-debug variants keep their keys and cached outputs;
        # `tma` where the target loads descriptors through TMA (ttbuild.tma).
        "ttir": {"signature": [str(p) for p in params], "constexprs": dict(constexprs),
                 **({"debug": True} if options.debug else {}),
                 **({"tma": True} if tma.enabled(target.capability, options.disable_tma) else {})},
        # `disable_mma_v3` keys ttgir only when on, so other variants keep their keys.
        "ttgir": {"num_warps": options.num_warps, "num_ctas": options.num_ctas,
                  "num_stages": options.num_stages, "target": options.target,
                  **({"disable_mma_v3": True} if options.disable_mma_v3 else {})},
        "llir": {"target": options.target, "enable_fp_fusion": options.enable_fp_fusion,
                 "debug": options.debug},
        "ptx": {"arch": target.arch, "ptx_version": target.ptx_version},
        "cubin": {"arch": target.arch, "ptxas_options": list(options.ptxas_options)},
    }


def jit_ptx_options(target: str) -> dict[str, Any]:
    """ptx options of the PTX a multi-target variant ships for newer GPUs: the target's portable
    arch (`sm_90`, never the arch-specific `sm_90a`, whose PTX the driver JITs for 9.0 only:
    PTX ISA, "Target directives: .target")."""
    t = Target.parse(target)
    return {"arch": f"sm_{t.capability}", "ptx_version": t.ptx_version}


def stage_versions(package: str = "ttbuild.stages") -> dict[str, int]:
    """`VERSION` of every stage module in `package`. Importing a stage module is cheap by
    contract (heavy imports live inside `run`); a missing module or VERSION raises ImportError."""
    versions = {}
    for stage in STAGES:
        mod = importlib.import_module(f"{package}.{stage}")
        version = getattr(mod, "VERSION", None)
        if not isinstance(version, int):
            raise ImportError(f"{package}.{stage} has no integer VERSION")
        versions[stage] = version
    return versions


@dataclass(frozen=True)
class StageNode:
    """One stage of one variant: its key, options, and the key of the stage it reads."""

    stage: str
    key: str
    parent_key: str
    options: dict
    options_json: str = ""  # canonical_json(options), computed once for the key and the task


def chain(variant: Variant, versions: Mapping[str, int]) -> list[StageNode]:
    """The stages `variant` builds (parse .. its `until`), keys chained from parse."""
    opts = stage_options(variant)
    nodes, parent = [], ""
    for stage in variant.stages:
        oj = canonical_json(dict(opts[stage]))
        key = stage_key(parent, stage, versions[stage], opts[stage], _key_json(opts[stage], oj))
        nodes.append(StageNode(stage, key, parent, opts[stage], oj))
        parent = key
    return nodes
