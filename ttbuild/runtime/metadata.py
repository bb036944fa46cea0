"""Reads `lib/<variant>.json` (schema "ttbuild.kernel/2", docs/CONTRACTS.md) into frozen records; stdlib only."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import TTBuildError
from ..options import DEFAULTS, MAX_NUM_WARPS
from ..signature import DIVISIBILITIES, DTYPE_BYTES
from ..target import PTX_VERSION, Target, TargetError, cuda_version_text, min_cuda_driver

SCHEMA = "ttbuild.kernel/2"
# A tensor descriptor parameter's entries in `params` (docs/CONTRACTS.md, "Kernel ABI")
PARTS = ("tensormap", "base", "shape", "stride")


class MetadataError(TTBuildError, ValueError):
    """A metadata JSON the runtime cannot use: wrong schema, missing field, missing cubin."""


@dataclass(frozen=True)
class Param:
    """One entry of the kernel ABI (docs/CONTRACTS.md, "Kernel ABI"): a kernel parameter of the
    cubin, or a constexpr the variant was built with.

    kind: "pointer" (dtype = pointee), "scalar" (dtype), or "constexpr" (value).
    divisibility: 16 means the address (pointer) or the value (scalar) is a multiple of 16; else 1.
    origin: the Python parameter it comes from (its own name but for a tensor descriptor's
    entries); part: which of a descriptor's entries it is (PARTS), None for the others.
    """

    name: str
    kind: str
    dtype: str | None = None
    divisibility: int = 1
    value: Any = None
    origin: str = ""  # "" reads as `name`
    part: str | None = None

    def __post_init__(self):
        if not self.origin:
            object.__setattr__(self, "origin", self.name)


@dataclass(frozen=True)
class Image:
    """One loadable binary of a variant: kind "cubin" (SASS for `arch`) or "ptx" (JIT by the
    driver); path beside the JSON; shared: dynamic shared memory bytes it needs."""

    kind: str
    target: str
    arch: str
    path: str
    shared: int = 0
    sha256: str = ""   # of the file as built ("" when the metadata gives none: older libraries)

    @property
    def capability(self) -> tuple[int, int]:
        """The image's target as (major, minor) compute capability: (9, 0) for cuda:90."""
        return Target.parse(self.target).major_minor

    def runs_on(self, capability) -> bool:
        """CUDA compatibility: a cubin for sm_XYa runs on X.Y only, one for sm_XY on X.y with
        y >= Y (same major); PTX for compute X.Y is JIT-compiled for any X'.Y' >= X.Y
        (CUDA C Programming Guide, "Binary Compatibility" and "PTX Compatibility")."""
        want = self.capability
        if self.kind == "ptx":
            return tuple(capability) >= want
        if self.arch.endswith("a"):
            return tuple(capability) == want
        return capability[0] == want[0] and capability[1] >= want[1]

    def describe(self) -> str:
        """"cubin for sm_90" or "PTX for compute_90 (JIT)": how messages name the image."""
        return f"PTX for {self.arch} (JIT)" if self.kind == "ptx" else f"cubin for {self.arch}"


def best_image(images, capability):
    """The image to load on `capability`: exact SASS first (the newest cubin that runs), then
    PTX to JIT; None when nothing runs there."""
    cubins = [i for i in images if i.kind == "cubin" and i.runs_on(capability)]
    if cubins:
        return max(cubins, key=lambda i: i.capability)
    ptx = [i for i in images if i.kind == "ptx" and i.runs_on(capability)]
    return max(ptx, key=lambda i: i.capability) if ptx else None


@dataclass(frozen=True)
class Variant:
    """One compiled kernel variant: the metadata plus where its cubin lives (read lazily).

    shared: bytes of dynamic shared memory per block. target: "cuda:90"; arch: "sm_90a".
    """

    variant: str
    kernel: str
    entry: str
    cubin_path: str
    params: tuple[Param, ...]
    signature: str
    constexprs: dict = field(hash=False, compare=False)
    num_warps: int = DEFAULTS.num_warps
    # warps launched when warp-specialized partitions add to num_warps (Triton's
    # ttg.total-num-warps); None: num_warps
    total_num_warps: int | None = None
    num_ctas: int = DEFAULTS.num_ctas
    num_stages: int = DEFAULTS.num_stages
    shared: int = 0
    target: str = DEFAULTS.target
    arch: str = DEFAULTS.arch
    json_path: str = ""
    images: tuple[Image, ...] = ()
    targets: tuple[str, ...] = ()
    ptx_version: int = PTX_VERSION
    min_cuda_driver: int = field(default_factory=lambda: min_cuda_driver(PTX_VERSION))
    file: str = ""  # the kernel's source file, relative to the kernels folder ("" in older libraries)
    # @triton.autotune expansion: {"group", "key", "config", "configs", "reset_to_zero",
    # "restore_value", "tune"?}; None for a plain variant (ttbuild.runtime.tuned)
    autotune: dict | None = field(default=None, hash=False, compare=False)
    # constexpr name -> @triton.heuristics expression over `args` (ttbuild.runtime.heuristics)
    heuristics: dict = field(default_factory=dict, hash=False, compare=False)
    # tensordesc<...> parameters: ({"name", "dtype", "block_shape"}, ...) (ttbuild.runtime.tensordesc)
    descriptors: tuple = ()
    # (bytes per program, alignment) of the global scratch the kernel takes after its parameters
    # (metadata "global_scratch", ttbuild.runtime.scratch); None: no such parameter
    global_scratch: tuple[int, int] | None = None
    # {"model", "sm_count", "device_name"}: the GPU model whose facts the kernel's modules read at build
    # time (metadata "gpu"); None: nothing beyond the compute capability
    gpu: dict | None = field(default=None, hash=False, compare=False)

    def runs_on(self, capability) -> bool:
        """Whether an image of the variant runs on `capability` (best_image) and, where the driver's
        Capability carries the device's SM count, the GPU model it was built for is that device's."""
        return best_image(self.images, capability) is not None and not self.model_ok(getattr(capability, "sm_count", None))

    def model_ok(self, sm_count: int | None) -> str:
        """'' when the variant may run on a device with `sm_count` SMs (None: not known), else the reason: a
        variant built for a GPU model (its modules read the SM count or name) runs only on that model's SM
        count; the device's name is not compared (one model's boards report several)."""
        if self.gpu is None or sm_count is None or sm_count == self.gpu["sm_count"]:
            return ""
        return (f"built for the GPU model {self.gpu['model']} ({self.gpu['sm_count']} SMs), whose facts its modules "
                f"read; this device has {sm_count} SMs: build its row with that GPU's gpu = ... (ttbuild.target.GPU_MODELS)")

    @property
    def launch_params(self) -> tuple[Param, ...]:
        """The kernel parameters the caller passes: pointer and scalar params, in order (the
        cubin's parameters, but for the trailing global scratch address of a variant with
        `global_scratch`, which the runtime adds)."""
        return tuple(p for p in self.params if p.kind != "constexpr")

    @property
    def capability(self) -> tuple[int, int]:
        """Compute capability the target names: "cuda:90" -> (9, 0)."""
        try:
            return Target.parse(self.target).major_minor
        except TargetError:
            raise MetadataError(f"{self.json_path}: target {self.target!r} is not 'cuda:<cc>'") from None

    def describe(self) -> str:
        """One line naming the variant for NoMatchingVariant and friends: name, signature, constexprs, num_warps and
        target(s)."""
        cx = ",".join(f"{k}={v}" for k, v in sorted(self.constexprs.items()))
        where = ", ".join(self.targets) if self.targets else self.target
        return (f"{self.variant} ({self.signature}; {cx or 'no constexprs'}; "
                f"num_warps={self.num_warps}; {where})")

    def holds(self) -> str:
        """What the variant can load, for error messages: 'cubins for sm_80, sm_90a; PTX for sm_90 (JIT)'."""
        cubins = [i.arch for i in self.images if i.kind == "cubin"]
        ptx = [i.arch for i in self.images if i.kind == "ptx"]
        text = f"cubin{'s' if len(cubins) > 1 else ''} for {', '.join(cubins)}" if cubins else "no cubin"
        if ptx:
            text += f"; PTX for {', '.join(ptx)} (JIT on compute capability >= " + \
                    ", ".join("%d.%d" % i.capability for i in self.images if i.kind == "ptx") + ")"
        return text

    def driver_text(self) -> str:
        """The oldest driver the variant's PTX ISA needs, as "CUDA 12.4 (PTX ISA 8.4)" (PTX ISA release notes'
        table)."""
        return f"CUDA {cuda_version_text(self.min_cuda_driver)} (PTX ISA {self.ptx_version // 10}.{self.ptx_version % 10})"


def _need(doc: dict, key: str, typ, where: str):
    if key not in doc:
        raise MetadataError(f"{where}: missing field {key!r}")
    val = doc[key]
    if not isinstance(val, typ) or isinstance(val, bool) and typ is int:
        raise MetadataError(f"{where}: field {key!r} should be {getattr(typ, '__name__', typ)}, "
                            f"got {val!r}")
    return val


def _param(raw: Any, where: str) -> Param:
    if not isinstance(raw, dict):
        raise MetadataError(f"{where}: each entry of 'params' must be an object, got {raw!r}")
    name = _need(raw, "name", str, where)
    kind = _need(raw, "kind", str, where)
    origin, part = _origin(raw, name, where)
    if kind == "constexpr":
        if "value" not in raw:
            raise MetadataError(f"{where}: constexpr param {name!r} has no 'value'")
        return Param(name, kind, value=raw["value"], origin=origin)
    if kind not in ("pointer", "scalar"):
        raise MetadataError(f"{where}: param {name!r} has unknown kind {kind!r}")
    dtype = _need(raw, "dtype", str, where)
    if dtype not in DTYPE_BYTES:
        raise MetadataError(f"{where}: param {name!r} has unknown dtype {dtype!r}")
    div = raw.get("divisibility", 1)
    if div not in DIVISIBILITIES:
        raise MetadataError(f"{where}: param {name!r} divisibility must be 1 or 16, got {div!r}")
    return Param(name, kind, dtype=dtype, divisibility=div, origin=origin, part=part)


def _origin(raw: dict, name: str, where: str) -> tuple[str, str | None]:
    """(origin, part) of a `params` entry: a descriptor's entries name it as their origin and
    their part (PARTS; its base keeps its name), the others themselves and no part; an absent
    origin is the entry's own name."""
    origin, part = raw.get("origin", name), raw.get("part")
    if not (isinstance(origin, str) and part in (None, *PARTS) and (origin == name) == (part in (None, "base"))):
        raise MetadataError(f"{where}: param {name!r} has origin {origin!r} and part {part!r}: a descriptor's "
                            f"entries name it as origin and a part ({', '.join(PARTS)}), other params themselves")
    return origin, part


def parse_variant(doc: Any, json_path: str) -> Variant:
    """Validate one metadata document; raises MetadataError naming the file and the field."""
    where = json_path
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: top level must be a JSON object")
    schema = doc.get("schema")
    if schema != SCHEMA:
        if isinstance(schema, str) and schema.startswith("ttbuild.kernel/"):
            raise MetadataError(f"{where}: written by another ttbuild (metadata schema {schema!r}; this runtime reads "
                                f"{SCHEMA!r}): rebuild the library (`ttbuild build`)")
        raise MetadataError(f"{where}: schema {schema!r} is not {SCHEMA!r}")
    _check_fields(doc, where)
    params = tuple(_param(p, where) for p in _need(doc, "params", list, where))
    cubin = _need(doc, "cubin", str, where)
    if os.path.basename(cubin) != cubin:
        raise MetadataError(f"{where}: 'cubin' must be a file name beside the JSON, got {cubin!r}")
    cubin_path = os.path.join(os.path.dirname(json_path), cubin)
    if not os.path.isfile(cubin_path):
        raise MetadataError(f"{where}: cubin {cubin_path} does not exist")
    images = _images(doc, json_path, cubin_path)
    ptx_version = doc.get("ptx_version", PTX_VERSION)
    min_driver = doc.get("min_cuda_driver", min_cuda_driver(ptx_version if isinstance(ptx_version, int) else PTX_VERSION))
    if not isinstance(ptx_version, int) or not isinstance(min_driver, int):
        raise MetadataError(f"{where}: 'ptx_version' and 'min_cuda_driver' must be integers")
    constexprs = dict(doc.get("constexprs") or {})
    for p in params:
        if p.kind == "constexpr" and constexprs.setdefault(p.name, p.value) != p.value:
            raise MetadataError(f"{where}: constexpr {p.name!r} is {p.value!r} in 'params' "
                                f"but {constexprs[p.name]!r} in 'constexprs'")
    v = Variant(
        variant=_need(doc, "variant", str, where),
        kernel=_need(doc, "kernel", str, where),
        entry=_need(doc, "entry", str, where),
        cubin_path=cubin_path,
        params=params,
        signature=doc.get("signature", ""),
        constexprs=constexprs,
        num_warps=_need(doc, "num_warps", int, where),
        total_num_warps=doc.get("total_num_warps"),
        num_ctas=doc.get("num_ctas", DEFAULTS.num_ctas),
        num_stages=doc.get("num_stages", DEFAULTS.num_stages),
        shared=_need(doc, "shared", int, where),
        target=_need(doc, "target", str, where),
        arch=doc.get("arch", ""),
        json_path=json_path,
        images=images,
        targets=tuple(doc.get("targets") or ()),
        ptx_version=ptx_version,
        min_cuda_driver=min_driver,
        file=doc.get("file", "") if isinstance(doc.get("file", ""), str) else "",
        autotune=_autotune(doc.get("autotune"), where),
        heuristics=_heuristics(doc.get("heuristics"), where),
        descriptors=_descriptor_specs(doc.get("descriptors"), where),
        global_scratch=_global_scratch(doc.get("global_scratch"), where),
        gpu=dict(doc["gpu"]) if doc.get("gpu") is not None else None,
    )
    _ = v.capability  # validate the target string now, not at the first launch
    _check_launch(v, where)
    return v


def _is_int(x) -> bool:
    return type(x) is int


# The schema's optional fields past their presence: field -> (test, what it must be). The
# runtime reads each of these, so a value of another type would fail later, deep in a launch,
# as a TypeError or AttributeError, or reach the driver (docs/CONTRACTS.md, "Metadata").
_OPTIONAL = {
    "signature": (lambda x: isinstance(x, str), "a string"),
    "arch": (lambda x: isinstance(x, str), "a string"),
    "file": (lambda x: isinstance(x, str), "a string"),
    "constexprs": (lambda x: x is None or isinstance(x, dict), "an object"),
    "num_ctas": (lambda x: x == 1 and _is_int(x), "1 (one CTA per program)"),
    "num_stages": (lambda x: _is_int(x) and x >= 1, "a positive integer"),
    "total_num_warps": (lambda x: _is_int(x) and 1 <= x <= MAX_NUM_WARPS, f"an integer from 1 to {MAX_NUM_WARPS}"),
    "targets": (lambda x: x is None or isinstance(x, list) and all(isinstance(t, str) and not _bad_target(t) for t in x),
                "a list of targets like 'cuda:90'"),
    "ptx_version": (lambda x: _is_int(x) and x > 0, "a positive integer"),
    "min_cuda_driver": (lambda x: _is_int(x) and x > 0, "a positive integer"),
    "cubin_sha256": (lambda x: isinstance(x, str), "a string"),
    "gpu": (lambda x: isinstance(x, dict) and isinstance(x.get("model"), str) and _is_int(x.get("sm_count"))
            and x["sm_count"] > 0, "an object with model (string) and sm_count (positive integer)"),
}
_REQUIRED_TEXT = ("variant", "kernel", "entry")


def _check_fields(doc: dict, where: str) -> None:
    """The types and ranges of the fields the runtime reads; MetadataError naming the field."""
    for key, (ok, what) in _OPTIONAL.items():
        if key in doc and not ok(doc[key]):
            raise MetadataError(f"{where}: field {key!r} must be {what}, got {doc[key]!r}")
    for key in _REQUIRED_TEXT:
        if not (isinstance(doc.get(key), str) and doc[key]):
            raise MetadataError(f"{where}: field {key!r} must be a non-empty string, got {doc.get(key)!r}")


def _check_launch(v: Variant, where: str) -> None:
    """What cuLaunchKernel is given: a block of num_warps * 32 threads (num_warps a power of two,
    Triton's rule, at most 1024 threads; total_num_warps * 32 for a warp-specialized kernel) and `shared` dynamic bytes within what the target's
    GPU can give one block (Target.max_shared_bytes)."""
    if not 1 <= v.num_warps <= MAX_NUM_WARPS or v.num_warps & (v.num_warps - 1):
        raise MetadataError(f"{where}: num_warps {v.num_warps} is not a power of two from 1 to {MAX_NUM_WARPS}")
    if v.total_num_warps is not None and v.total_num_warps < v.num_warps:
        raise MetadataError(f"{where}: total_num_warps {v.total_num_warps} is below num_warps {v.num_warps}")
    for img in v.images or ():
        limit = Target.parse(img.target).max_shared_bytes
        if not (_is_int(img.shared) and 0 <= img.shared <= limit):
            raise MetadataError(f"{where}: 'shared' {img.shared!r} bytes is not 0..{limit}, what {img.target} "
                                "gives one block")
    if not 0 <= v.shared <= Target.parse(v.target).max_shared_bytes:
        raise MetadataError(f"{where}: 'shared' {v.shared} bytes is not 0..{Target.parse(v.target).max_shared_bytes}, "
                            f"what {v.target} gives one block")


def _autotune(raw, where: str) -> dict | None:
    """The "autotune" record of an expanded variant, checked for what the runtime reads."""
    if raw is None:
        return None
    ok = (isinstance(raw, dict) and isinstance(raw.get("group"), str)
          and _is_int(raw.get("config")) and raw["config"] >= 0 and isinstance(raw.get("key"), list)
          and all(isinstance(k, str) for k in raw["key"]))
    if not ok:
        raise MetadataError(f"{where}: 'autotune' needs group (string), config (int) and key (list of names)")
    optional = {"configs": lambda x: _is_int(x) and x >= 1, "kwargs": lambda x: isinstance(x, dict),
                "num_warps": lambda x: _is_int(x) and x >= 1, "num_stages": lambda x: _is_int(x) and x >= 1,
                "reset_to_zero": lambda x: isinstance(x, list) and all(isinstance(n, str) for n in x),
                "restore_value": lambda x: isinstance(x, list) and all(isinstance(n, str) for n in x),
                "tune": lambda x: x is None or isinstance(x, dict)}
    for key, ok in optional.items():
        if key in raw and not ok(raw[key]):
            raise MetadataError(f"{where}: 'autotune' field {key!r} has the wrong type or range: {raw[key]!r}")
    return dict(raw)


def _descriptor_specs(raw, where: str) -> tuple:
    if raw is None:
        return ()
    ok = isinstance(raw, list) and all(
        isinstance(d, dict) and isinstance(d.get("name"), str) and d.get("dtype") in DTYPE_BYTES
        and isinstance(d.get("block_shape"), list) and 1 <= len(d["block_shape"]) <= 5
        and all(_is_int(x) and x > 0 for x in d["block_shape"]) for d in raw)
    if not ok:
        raise MetadataError(f"{where}: 'descriptors' must list {{name, dtype, block_shape}} objects")
    return tuple(dict(d) for d in raw)


def _global_scratch(raw, where: str) -> tuple[int, int] | None:
    """(size, align) of a "global_scratch" record {"size": bytes per program > 0, "align": a
    power of two >= 1}; None when absent."""
    if raw is None:
        return None
    size = raw.get("size") if isinstance(raw, dict) else None
    align = raw.get("align") if isinstance(raw, dict) else None
    if not (type(size) is int and size > 0 and type(align) is int and align >= 1 and not align & (align - 1)):
        raise MetadataError(f"{where}: 'global_scratch' must be {{\"size\": bytes per program (> 0), "
                            f"\"align\": a power of two (>= 1)}}, got {raw!r}")
    return size, align


def _heuristics(raw, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise MetadataError(f"{where}: 'heuristics' must map constexpr names to expressions")
    return dict(raw)


def _images(doc: dict, json_path: str, cubin_path: str) -> tuple[Image, ...]:
    """The variant's loadable binaries: its `images` list (multi-target variants), else the one
    cubin for its target."""
    where = json_path
    raw = doc.get("images")
    if raw is None:
        target = doc.get("target", DEFAULTS.target)
        arch = doc.get("arch") or (Target.parse(target).arch if isinstance(target, str) and
                                   not _bad_target(target) else "")
        digest = doc.get("cubin_sha256", "")
        return (Image("cubin", target, arch, cubin_path, doc.get("shared", 0),
                      digest if isinstance(digest, str) else ""),)
    if not isinstance(raw, list) or not raw:
        raise MetadataError(f"{where}: 'images' must be a non-empty list")
    out = []
    for i, img in enumerate(raw):
        if not isinstance(img, dict):
            raise MetadataError(f"{where}: images[{i}] must be an object")
        kind = img.get("kind")
        if kind not in ("cubin", "ptx"):
            raise MetadataError(f"{where}: images[{i}] kind must be 'cubin' or 'ptx', got {kind!r}")
        target, arch, file = img.get("target"), img.get("arch"), img.get("file")
        if not all(isinstance(x, str) for x in (target, arch, file)) or _bad_target(target):
            raise MetadataError(f"{where}: images[{i}] needs target ('cuda:90'), arch and file strings")
        if os.path.basename(file) != file:
            raise MetadataError(f"{where}: images[{i}] file must be a name beside the JSON, got {file!r}")
        path = os.path.join(os.path.dirname(json_path), file)
        if not os.path.isfile(path):
            raise MetadataError(f"{where}: images[{i}] {path} does not exist")
        digest, shared = img.get("sha256", ""), img.get("shared", 0)
        if not _is_int(shared):
            raise MetadataError(f"{where}: images[{i}] 'shared' must be an integer, got {shared!r}")
        out.append(Image(kind, target, arch, path, shared, digest if isinstance(digest, str) else ""))
    return tuple(out)


def _bad_target(text) -> bool:
    try:
        Target.parse(text)
        return False
    except TargetError:
        return True


def read_json(path: str, what: str):
    """The JSON document in file `path`. Raises MetadataError "<path>: cannot read <what>: why" when
    the file cannot be read or parsed (also past the parser's nesting depth)."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
        raise MetadataError(f"{path}: cannot read {what}: {exc}") from None


def read_library(lib_dir: str) -> list[Variant]:
    """Every `*.json` in lib_dir, sorted by file name (so variant order is deterministic).

    Raises MetadataError for a missing directory or any bad file.
    """
    if not os.path.isdir(lib_dir):
        raise MetadataError(f"{lib_dir}: no such directory (build the kernels first: `doit`)")
    out = []
    for name in sorted(os.listdir(lib_dir)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(lib_dir, name)
        out.append(parse_variant(read_json(path, "JSON"), path))
    return out
