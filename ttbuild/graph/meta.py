"""The runtime's metadata JSON (schema "ttbuild.kernel/1", docs/CONTRACTS.md) built from stage outputs, no MLIR import."""

from __future__ import annotations

import hashlib
import json

import ttbuild
from ttbuild.errors import TTBuildError
from ttbuild.irattrs import module_attrs
from ttbuild.signature import SigEntry
from ttbuild.stages import STAGES
from ttbuild.target import Target, min_cuda_driver
from ttbuild.tma import MODULE_ATTR, decode_attr

from .keys import xxh3_hex

SCHEMA = "ttbuild.kernel/1"
# TTGIR module attributes of the per-program global scratch (Triton's global_scratch): bytes per
# program and the alignment the kernel assumes of its base
SCRATCH_SIZE_ATTR = "ttg.global_scratch_memory_size"
SCRATCH_ALIGN_ATTR = "ttg.global_scratch_memory_alignment"



class MetaError(TTBuildError):
    """The stage outputs disagree with the variant (parameter count, missing constexpr value)."""


def _is_constexpr_annotation(node) -> bool:
    if not isinstance(node, dict):
        return isinstance(node, str) and node.split(".")[-1] == "constexpr"
    kind = node.get("_t")
    if kind == "Attribute":
        return node.get("attr") == "constexpr"
    if kind == "Name":
        return node.get("id") == "constexpr"
    if kind == "Constant":
        return str(node.get("value", "")).split(".")[-1] == "constexpr"
    return False


def _constant(node):
    if isinstance(node, dict) and node.get("_t") == "Constant":
        return node.get("value")
    if isinstance(node, dict) and node.get("_t") == "UnaryOp" and node.get("op", {}).get("_t") == "USub":
        inner = _constant(node.get("operand"))
        return -inner if isinstance(inner, (int, float)) else None
    return node if isinstance(node, (int, float, bool, str)) else None


def build_params(variant: dict, parse_doc: dict, tma: list | None = None) -> list[dict]:
    """Every Python parameter of the kernel in order, as `pointer` / `scalar` / `constexpr`.

    A parameter named in the variant's constexprs is a constexpr with that value; one
    annotated `tl.constexpr` but not named takes its default; every other parameter takes
    the next signature entry (the signature lists non-constexpr parameters in order). A
    tensordesc parameter is its expanded parameters: `<name>` (the base pointer),
    `<name>.shape<i>`, `<name>.stride<i>`; `tma` (tma_entries(): per tensordesc parameter in
    order, None or {"swizzle", "box"}) puts a u64 scalar `<name>.tensormap` (the device address
    of its CUtensorMap, ttbuild.tma) in front of those of a parameter that loads through TMA.
    Raises MetaError when the counts disagree or a constexpr has no value.
    """
    fn = parse_doc.get("functions", {}).get(variant["kernel"])
    if not isinstance(fn, dict):
        raise MetaError(f"parse output has no function {variant['kernel']!r}")
    sig = list(variant["params"])
    if tma and len(tma) != sum(1 for e in sig if e[0] == "tensordesc"):
        raise MetaError(f"{len(tma)} TMA entries for the tensordesc parameters of {variant['signature']!r}")
    constexprs = variant["constexprs"]
    params, used, desc = [], 0, 0
    for p in fn.get("params", []):
        name = p.get("name")
        if name in constexprs:
            params.append({"name": name, "kind": "constexpr", "value": constexprs[name]})
        elif _is_constexpr_annotation(p.get("annotation")):
            value = _constant(p.get("default"))
            if value is None and not p.get("has_default"):
                raise MetaError(f"constexpr parameter {name!r} of {variant['kernel']} has no value: "
                                f"add it to the variant's constexprs")
            params.append({"name": name, "kind": "constexpr", "value": value})
        else:
            if used >= len(sig):
                raise MetaError(f"signature {variant['signature']!r} has {len(sig)} entries but "
                                f"{variant['kernel']} has more non-constexpr parameters (first extra: {name!r})")
            kind, dtype, div, *block = sig[used]
            used += 1
            if kind == "tensordesc":  # its expanded parameters, as the ttir stage emitted them
                entry = SigEntry(kind, dtype, div, tuple(block[0]))
                if tma and tma[desc] is not None:  # loads through TMA: its CUtensorMap's address first
                    params.append({"name": f"{name}.tensormap", "kind": "scalar", "dtype": "u64", "divisibility": 1})
                desc += 1
                params += [{"name": n, "kind": e.kind, "dtype": e.dtype, "divisibility": e.divisibility}
                           for n, e in zip(entry.expanded_names(name), entry.expanded())]
                continue
            params.append({"name": name, "kind": kind, "dtype": dtype, "divisibility": div})
    if used != len(sig):
        raise MetaError(f"signature {variant['signature']!r} has {len(sig)} entries but "
                        f"{variant['kernel']} has {used} non-constexpr parameters")
    unknown = sorted(set(constexprs) - {p.get("name") for p in fn.get("params", [])})
    if unknown:
        raise MetaError(f"constexprs {unknown} are not parameters of {variant['kernel']}")
    return params


def image_entry(image: dict, data: bytes, ttgir: bytes) -> dict:
    """One `images` entry of a multi-target variant's metadata: kind ("cubin" or "ptx"), target,
    arch, file (beside the JSON), shared (bytes, from that target's TTGIR), xxh3 of the file and
    its sha256 (what the runtime, which has no xxhash, checks at load)."""
    shared = module_attrs(ttgir).get("ttg.shared")
    entry = {"kind": image["kind"], "target": image["target"], "arch": image["arch"], "file": image["file"],
             "shared": shared if isinstance(shared, int) else 0, "xxh3": xxh3_hex(data),
             "sha256": hashlib.sha256(data).hexdigest()}
    if image["kind"] == "ptx":
        entry["ptx_version"] = Target.parse(image["target"]).ptx_version
    return entry


def _descriptors(variant: dict, parse_doc: dict, tma: list | None = None) -> list[dict]:
    """The metadata's `descriptors` entry of each tensordesc parameter, in order: {"name",
    "dtype", "block_shape"}, plus "tma": {"swizzle", "box"} where `tma` (tma_entries()) says
    the parameter loads through TMA."""
    fn = parse_doc.get("functions", {}).get(variant["kernel"], {})
    names = [p.get("name") for p in fn.get("params", []) if p.get("name") not in variant["constexprs"]
             and not _is_constexpr_annotation(p.get("annotation"))]
    descs = [(n, p) for n, p in zip(names, variant["params"]) if p[0] == "tensordesc"]
    return [{"name": n, "dtype": p[1], "block_shape": list(p[3]),
             **({"tma": {"swizzle": tma[i]["swizzle"], "box": list(tma[i]["box"])}}
                if tma and tma[i] is not None else {})}
            for i, (n, p) in enumerate(descs)]


def tma_entries(variant: dict, ttgir: bytes | str) -> list:
    """The TTGIR stage's TMA choice (ttbuild.tma.MODULE_ATTR): per tensordesc parameter of the
    signature in order, None (pointer form) or {"swizzle": bytes, "box": [rows, cols]}; [] when
    the module has no such attribute (every descriptor in pointer form, as before TMA). Raises
    MetaError for an attribute that is malformed or does not fit the signature's descriptors."""
    value = module_attrs(ttgir).get(MODULE_ATTR)
    where = f"TTGIR module attribute {MODULE_ATTR} of {variant.get('name', variant['kernel'])}"
    try:
        entries = decode_attr(value)
    except ValueError as exc:
        raise MetaError(f"{where}: {exc}") from None
    if not entries:
        return []
    blocks = [p[3] for p in variant["params"] if p[0] == "tensordesc"]
    if len(entries) != len(blocks):
        raise MetaError(f"{where} has {len(entries)} entries for {len(blocks)} tensordesc parameters: {value!r}")
    for e, block in zip(entries, blocks):
        if e is None:
            continue
        box, swizzle = e["box"], e["swizzle"]
        if swizzle not in (0, 32, 64, 128) or len(box) != len(block) or not all(
                isinstance(d, int) and 0 < d <= b for d, b in zip(box, block)):
            raise MetaError(f"{where}: entry {e} is not a swizzle of 0/32/64/128 bytes and a box within "
                            f"the block {list(block)}")
    return entries


def global_scratch(variant: dict, ttgir: bytes | str) -> dict | None:
    """The metadata's "global_scratch" record, {"size": bytes per program, "align": bytes}, from
    the TTGIR module attributes SCRATCH_SIZE_ATTR / SCRATCH_ALIGN_ATTR (alignment 1 when only
    the size is given); None when the size is absent or 0 (the kernel takes no scratch pointer).
    Raises MetaError for a negative size or an alignment that is not a power of two."""
    attrs = module_attrs(ttgir)
    size, align = attrs.get(SCRATCH_SIZE_ATTR), attrs.get(SCRATCH_ALIGN_ATTR, 1)
    if size is None or size == 0:
        return None
    where = f"TTGIR module attributes of {variant.get('name', variant['kernel'])}"
    if not isinstance(size, int) or size < 0:
        raise MetaError(f"{where}: {SCRATCH_SIZE_ATTR} must be a non-negative integer, got {size!r}")
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        raise MetaError(f"{where}: {SCRATCH_ALIGN_ATTR} must be a power of two, got {align!r}")
    return {"size": size, "align": align}


def build_metadata(variant: dict, blobs: dict[str, bytes], cubin_name: str, images: list[dict] | None = None) -> dict:
    """The `lib/<variant>.json` document for `variant` (a dict of Variant fields plus `arch`
    and `params` as [kind, dtype, divisibility]) from its stage outputs `blobs` (stage ->
    bytes; parse = its `json` output). `num_warps`, `num_ctas`, `shared` come from the TTGIR
    module attributes, falling back to the variant when an attribute is absent (shared: 0).
    `images` (multi-target variants): image_entry() of every cubin and the JIT PTX. A
    descriptor parameter that the TTGIR stage chose to load through TMA (tma_entries()) has a
    `<name>.tensormap` parameter and a "tma" record in `descriptors`; without that choice the
    document is as it was before TMA. A kernel with global scratch (global_scratch()) has a
    "global_scratch" record: its cubin takes one more parameter after those `params` lists, the
    u64 address of the buffer the runtime provides (no entry of `params`: no user argument)."""
    try:
        parse_doc = json.loads(blobs["parse"])
    except ValueError as exc:
        raise MetaError(f"parse output is not JSON: {exc}") from None
    # TTGIR module attributes through the one stdlib reader: metadata writing imports no MLIR.
    attrs = {k: v for k, v in module_attrs(blobs["ttgir"]).items() if isinstance(v, int)}
    num_warps = attrs.get("ttg.num-warps")
    num_ctas = attrs.get("ttg.num-ctas")
    shared = attrs.get("ttg.shared")
    target = Target.parse(variant["target"])
    tma = tma_entries(variant, blobs["ttgir"])
    scratch = global_scratch(variant, blobs["ttgir"])
    return {
        "schema": SCHEMA,
        "variant": variant["name"],
        "kernel": variant["kernel"],
        # The kernel's source file (relative to the kernels folder): with the name, its identity
        # at run time, where two files may define kernels of the same name.
        "file": variant["file"],
        "entry": variant["kernel"],
        "cubin": cubin_name,
        "params": build_params(variant, parse_doc, tma),
        "signature": variant["signature"],
        "constexprs": dict(variant["constexprs"]),
        # tensordesc<...> parameters: the runtime expands a host descriptor into base, shape, strides
        # (behind the address of the CUtensorMap it encodes where the entry has "tma")
        **({"descriptors": descs} if (descs := _descriptors(variant, parse_doc, tma)) else {}),
        "num_warps": num_warps if num_warps is not None else variant["num_warps"],
        "num_ctas": num_ctas if num_ctas is not None else variant["num_ctas"],
        "num_stages": variant["num_stages"],
        "shared": shared if shared is not None else 0,
        # bytes per program of the global memory the runtime passes after the parameters
        **({"global_scratch": scratch} if scratch else {}),
        "target": variant["target"],
        "arch": variant["arch"],
        "hashes": {stage: xxh3_hex(blobs[stage]) for stage in STAGES},
        # the runtime (stdlib only) refuses a cubin that is not the one this document describes
        "cubin_sha256": hashlib.sha256(blobs["cubin"]).hexdigest(),
        "ttbuild_version": ttbuild.__version__,
        # What the driver must support: the PTX ISA version emitted, and the CUDA release that
        # introduced it (ptxas of that release built the cubins), cuDriverGetVersion's encoding.
        "ptx_version": target.ptx_version,
        "min_cuda_driver": min_cuda_driver(target.ptx_version),
        **({"targets": list(variant["targets"]), "images": list(images or [])} if variant.get("targets") else {}),
        # @triton.autotune expansion (group, key, config, tune plan) and @triton.heuristics
        # expressions: the runtime picks a config and evaluates these at launch (runtime.tuned)
        **({"autotune": variant["tuning"]} if variant.get("tuning") else {}),
        **({"heuristics": dict(variant["heuristics"])} if variant.get("heuristics") else {}),
    }
