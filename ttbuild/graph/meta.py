"""The runtime's metadata JSON (schema "ttbuild.kernel/2", docs/CONTRACTS.md) built from stage outputs, no MLIR import."""

from __future__ import annotations

import hashlib
import json

import ttbuild
from ttbuild.errors import TTBuildError
from ttbuild.irattrs import module_attrs
from ttbuild.stages import STAGES
from ttbuild.target import Target, gpu_model, min_cuda_driver
from ttbuild.tma import MODULE_ATTR, decode_attr

from .keys import xxh3_hex

SCHEMA = "ttbuild.kernel/2"  # 2: params carry origin (and part), copied from the ttir stage's ABI
# TTGIR module attributes of the per-program global scratch (Triton's global_scratch): bytes per
# program and the alignment the kernel assumes of its base
SCRATCH_SIZE_ATTR = "ttg.global_scratch_memory_size"
SCRATCH_ALIGN_ATTR = "ttg.global_scratch_memory_alignment"



class MetaError(TTBuildError):
    """The stage outputs make no metadata: a missing or malformed ABI record, a TTGIR TMA choice
    that disagrees with the kernel's parameters, a bad module attribute."""


def abi_of(variant: dict, blobs: dict[str, bytes]) -> dict:
    """The ttir stage's record of the kernel ABI (`blobs["abi"]`, ttbuild.frontend.abi):
    {"params": [...], "descriptors": [...]}, copied into the metadata as it is. Raises
    MetaError when it is missing or not such a document (artifacts of another ttbuild)."""
    where = f"the ttir stage's ABI record of {variant.get('name', variant['kernel'])}"
    try:
        doc = json.loads(blobs["abi"])
    except KeyError:
        raise MetaError(f"{where} is missing") from None
    except ValueError as exc:
        raise MetaError(f"{where} is not JSON: {exc}") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("params"), list) and isinstance(doc.get("descriptors"), list)
            and all(isinstance(p, dict) for p in doc["params"] + doc["descriptors"])):
        raise MetaError(f"{where} is not {{\"params\": [...], \"descriptors\": [...]}}")
    return doc


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


def _descriptors(abi: dict, tma: list) -> list[dict]:
    """The metadata's `descriptors` entry of each tensordesc parameter, in order: the ABI's
    {"name", "dtype", "block_shape"}, plus "tma": {"swizzle", "box"} where `tma`
    (tma_entries()) says the parameter loads through TMA. Raises MetaError where the TTGIR's
    choice disagrees with the parameters the TTIR's kernel takes (a tensormap or not)."""
    out = []
    for i, d in enumerate(abi["descriptors"]):
        record = tma[i] if tma else None
        if (record is not None) != bool(d.get("tensormap")):
            raise MetaError(f"descriptor {d.get('name')!r}: the TTGIR {'loads' if record else 'does not load'} it "
                            f"through TMA but its kernel parameters {'lack' if record else 'have'} a tensormap")
        out.append({"name": d["name"], "dtype": d["dtype"], "block_shape": list(d["block_shape"]),
                    **({"tma": {"swizzle": record["swizzle"], "box": list(record["box"])}} if record else {})})
    return out


def tma_entries(variant: dict, ttgir: bytes | str, abi: dict) -> list:
    """The TTGIR stage's TMA choice (ttbuild.tma.MODULE_ATTR): per tensordesc parameter of the
    ABI (abi_of()) in order, None (pointer form) or {"swizzle": bytes, "box": [rows, cols]}; []
    when the module has no such attribute (every descriptor in pointer form, as before TMA).
    Raises MetaError for an attribute that is malformed or does not fit the ABI's descriptors."""
    value = module_attrs(ttgir).get(MODULE_ATTR)
    where = f"TTGIR module attribute {MODULE_ATTR} of {variant.get('name', variant['kernel'])}"
    try:
        entries = decode_attr(value)
    except ValueError as exc:
        raise MetaError(f"{where}: {exc}") from None
    if not entries:
        return []
    blocks = [d.get("block_shape") or [] for d in abi["descriptors"]]
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
    """The `lib/<variant>.json` document for `variant` (a dict of Variant fields plus `arch`)
    from its stage outputs `blobs` (stage -> bytes: parse = its `json` output, and "abi": the
    ttir stage's record of the kernel ABI, whose `params` the document copies, abi_of()).
    `num_warps`, `num_ctas`, `shared` come from the TTGIR module attributes, falling back to
    the variant when an attribute is absent (shared: 0). `images` (multi-target variants):
    image_entry() of every cubin and the JIT PTX. A descriptor parameter that the TTGIR stage
    chose to load through TMA (tma_entries()) has a "tma" record in `descriptors` (its
    `<name>.tensormap` parameter is the ABI's); without that choice the document is as it was
    before TMA. A kernel with global scratch (global_scratch()) has a
    "global_scratch" record: its cubin takes one more parameter after those `params` lists, the
    u64 address of the buffer the runtime provides (no entry of `params`: no user argument)."""
    abi = abi_of(variant, blobs)
    # TTGIR module attributes through the one stdlib reader: metadata writing imports no MLIR.
    attrs = {k: v for k, v in module_attrs(blobs["ttgir"]).items() if isinstance(v, int)}
    num_warps = attrs.get("ttg.num-warps")
    num_ctas = attrs.get("ttg.num-ctas")
    shared = attrs.get("ttg.shared")
    target = Target.parse(variant["target"])
    tma = tma_entries(variant, blobs["ttgir"], abi)
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
        # the kernel ABI as the ttir stage emitted it (ttbuild.frontend.abi)
        "params": abi["params"],
        "signature": variant["signature"],
        "constexprs": dict(variant["constexprs"]),
        # tensordesc<...> parameters: the runtime expands a host descriptor into base, shape, strides
        # (behind the address of the CUtensorMap it encodes where the entry has "tma")
        **({"descriptors": descs} if (descs := _descriptors(abi, tma)) else {}),
        "num_warps": num_warps if num_warps is not None else variant["num_warps"],
        # warp-specialized: the block launched, the producer partition's warps included
        **({"total_num_warps": total} if (total := attrs.get("ttg.total-num-warps")) else {}),
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
        # the GPU model whose facts the kernel's modules read (a row's `gpu`): the runtime runs it
        # only on a device with that model's SM count
        **({"gpu": gpu_entry(variant["gpu"], target)} if variant.get("gpu") else {}),
    }


def gpu_entry(name: str, target: Target) -> dict:
    """The metadata's `gpu` record of GPU model `name` (ttbuild.target.GPU_MODELS): model, sm_count
    (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT there) and device_name."""
    model = gpu_model(name, target)
    return {"model": model.name, "sm_count": model.sm_count, "device_name": model.device_name}
