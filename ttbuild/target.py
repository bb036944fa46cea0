"""The compilation target as one value: `Target.parse("cuda:90")` -> backend, capability, LLVM/ptxas arch, PTX ISA version; stdlib only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttbuild.errors import TTBuildError

# `backend:compute capability`, Triton's spelling (triton/backends/compiler.py GPUTarget is
# ("cuda", 90, 32)); two or three digits: 80, 90, 100, 120.
_SPELLING = re.compile(r"([a-z]+):(\d{2,3})\Z")
BACKENDS = ("cuda",)

# PTX ISA version the backend emits (90 = PTX ISA 9.0): what LLVM 22's NVPTX `+ptx90` feature
# produces, for every capability (docs/DESIGN.md, "Backend facts").
PTX_VERSION = 90


# The CUDA release that introduced each PTX ISA version (PTX ISA manual, "Release Notes"; the
# inverse of triton/backends/nvidia/compiler.py's ptx version table): a driver older than that
# release cannot JIT the PTX, nor load cubins built by its ptxas. Driver versions are spelled
# as cuDriverGetVersion returns them: 1000 * major + 10 * minor (13000 = CUDA 13.0, driver 580).
PTX_ISA_CUDA = {80: 12000, 81: 12010, 82: 12020, 83: 12030, 84: 12040, 85: 12050, 86: 12070,
                87: 12080, 88: 12090, 90: 13000, 91: 13010}


# The compute capabilities the pinned ptxas (nvidia-cuda-nvcc 13.0, `ptxas --help`, --gpu-name)
# compiles for: a variant for any other is refused when the variant list is validated, not
# when ptxas fails at the last stage.
PTXAS_CAPABILITIES = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)


def compilable(target: "Target") -> "Target":
    """`target` when the pinned ptxas compiles for its capability; TargetError otherwise."""
    if target.capability not in PTXAS_CAPABILITIES:
        raise TargetError(f"{target}: no GPU of compute capability {target.capability} is known to ptxas 13.0; "
                          f"targets: {', '.join(f'cuda:{c}' for c in PTXAS_CAPABILITIES)}")
    return target


def min_cuda_driver(ptx_version: int) -> int:
    """Lowest CUDA driver version (cuDriverGetVersion encoding) that runs PTX ISA `ptx_version`
    (90 = 9.0 -> 13000); a version newer than the table is assumed to need its own major.minor."""
    if ptx_version in PTX_ISA_CUDA:
        return PTX_ISA_CUDA[ptx_version]
    major, minor = divmod(ptx_version, 10)
    return (major + 4) * 1000 + minor * 10


def cuda_version_text(version: int) -> str:
    """13000 -> "13.0"."""
    return f"{version // 1000}.{version % 1000 // 10}"


class TargetError(TTBuildError, ValueError):
    """A target string that is not `cuda:<capability>`."""


@dataclass(frozen=True)
class Target:
    """A GPU to compile for: `backend` ("cuda") and compute `capability` as one number
    (90 = sm_90, i.e. major 9, minor 0). Frozen and hashable; `str()` gives back "cuda:90"."""

    backend: str
    capability: int

    @classmethod
    def parse(cls, text: str) -> "Target":
        """`"cuda:90"` -> Target("cuda", 90). Raises TargetError (a ValueError) for anything
        else, e.g. "hip:90", "cuda:9", "sm_90"."""
        match = _SPELLING.match(text) if isinstance(text, str) else None
        if not match or match.group(1) not in BACKENDS:
            raise TargetError(f"must look like 'cuda:90' (backend:compute capability), got {text!r}")
        return cls(match.group(1), int(match.group(2)))

    @property
    def arch(self) -> str:
        """ptxas/LLVM arch: `sm_90a` for 9.0 and newer (Triton uses the arch-specific `a`
        variant there to reach wgmma/TMA), `sm_NN` below."""
        return f"sm_{self.capability}a" if self.capability >= 90 else f"sm_{self.capability}"

    @property
    def ptx_version(self) -> int:
        """PTX ISA version to emit, as LLVM's `+ptxNN` feature number (90 = PTX ISA 9.0)."""
        return PTX_VERSION

    @property
    def major_minor(self) -> tuple[int, int]:
        """Compute capability as (major, minor): 90 -> (9, 0), 120 -> (12, 0)."""
        return divmod(self.capability, 10)

    @property
    def max_shared_bytes(self) -> int:
        """Most dynamic shared memory one CTA may use on this target (the opt-in maximum,
        cudaDevAttrMaxSharedMemoryPerBlockOptin; CUDA C++ Programming Guide, "Technical
        Specifications per Compute Capability"): 227 KB on 9.0 / 10.x, 163 KB on 8.0 / 8.7,
        99 KB on 8.6 / 8.9 / 12.x, 96 KB on 7.x. A kernel needing more cannot launch there
        (Triton raises OutOfResources when loading it)."""
        major, minor = self.major_minor
        if major >= 10 and major != 12 or (major, minor) == (9, 0):
            return 232448
        if (major, minor) in ((8, 0), (8, 7)):
            return 166912
        if major in (8, 12) or major > 9:
            return 101376
        return 98304

    @property
    def sm_residency(self) -> tuple[int, int]:
        """(resident warps, resident CTAs) one SM holds (CUDA C++ Programming Guide, "Technical
        Specifications per Compute Capability"): 64 / 32 on 7.0, 8.0, 9.0, 10.x; 32 / 16 on 7.5;
        48 / 16 on 8.6 / 8.7; 48 / 24 on 8.9; 48 / 32 on 12.x. Every one has 64K 32-bit registers."""
        return _SM_RESIDENCY.get(self.capability, (64, 32))

    @classmethod
    def from_arch(cls, arch: str) -> "Target":
        """The CUDA target of a ptxas/LLVM arch: `sm_90a` -> cuda:90, `sm_86` -> cuda:86. Raises
        TargetError for a name without a capability."""
        match = re.fullmatch(r"sm_(\d{2,3})a?", arch)
        if not match:
            raise TargetError(f"must look like 'sm_90a' (a ptxas arch), got {arch!r}")
        return cls("cuda", int(match.group(1)))

    def __str__(self) -> str:
        return f"{self.backend}:{self.capability}"


# Capabilities whose SM holds other than 64 warps and 32 CTAs (Target.sm_residency).
_SM_RESIDENCY = {75: (32, 16), 86: (48, 16), 87: (48, 16), 89: (48, 24), 120: (48, 32), 121: (48, 32)}


DEFAULT_TARGET = Target("cuda", 90)


@dataclass(frozen=True)
class GPUModel:
    """One GPU model a variant may name (`gpu = "h100-sxm"`): the facts its compute capability
    does not fix. `sm_count` is what `torch.cuda.get_device_properties(i).multi_processor_count`
    and Triton's `driver.active.utils.get_device_properties(i)["multiprocessor_count"]` answer
    there, `device_name` what `torch.cuda.get_device_name(i)` answers (NVIDIA's product
    specifications and the names the driver reports)."""

    name: str
    capability: int
    sm_count: int
    device_name: str


GPU_MODELS = {m.name: m for m in (
    GPUModel("a100", 80, 108, "NVIDIA A100-SXM4-80GB"),
    GPUModel("l4", 89, 58, "NVIDIA L4"),
    GPUModel("h100-sxm", 90, 132, "NVIDIA H100 80GB HBM3"),
    GPUModel("h100-pcie", 90, 114, "NVIDIA H100 PCIe"),
    GPUModel("h200", 90, 132, "NVIDIA H200"),
    GPUModel("h20", 90, 78, "NVIDIA H20"),
    GPUModel("b200", 100, 148, "NVIDIA B200"),
)}


def gpu_model(name: str, target: Target) -> GPUModel:
    """The GPUModel `name` names, checked against the variant's `target` (its capability must be
    the model's). Raises TargetError for an unknown name or another capability."""
    model = GPU_MODELS.get(name)
    if model is None:
        raise TargetError(f"unknown GPU model {name!r}; known: {', '.join(sorted(GPU_MODELS))}")
    if model.capability != target.capability:
        raise TargetError(f"{name} is a GPU of compute capability {model.capability}, not of the target {target}")
    return model


def device_facts(target: str | None, gpu: str = "") -> dict:
    """What a static module read is told of the device (ttbuild.pyeval.modules.Project's keywords): the target's
    capability, and the named GPU model's SM count and device name; all None without a target."""
    if not target:
        return {"capability": None, "sm_count": None, "device_name": None}
    t = Target.parse(target)
    model = gpu_model(gpu, t) if gpu else None
    return {"capability": t.capability, "sm_count": model.sm_count if model else None,
            "device_name": model.device_name if model else None}
