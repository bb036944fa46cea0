"""Compile options as one frozen value (`Options`), every default stated once and validated once; stdlib only.

Modelled on Triton's `CUDAOptions` (third_party/nvidia/backend/compiler.py): a frozen dataclass
whose fields are the knobs a kernel variant sets. The variant list (graph/variants.py), the
stages (stages/*.py) and the in-memory driver (compiler.py) all build their options here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from ttbuild.errors import TTBuildError
from ttbuild.target import DEFAULT_TARGET, Target, TargetError, compilable, gpu_model

# Triton's limit: a CTA holds at most 1024 threads = 32 warps of 32 threads.
MAX_NUM_WARPS = 32


class OptionError(TTBuildError, ValueError):
    """An option value the compiler cannot use; `field` names the option, `why` says what is
    wrong (`str()` is "<field>: <why>")."""

    def __init__(self, field: str, why: str):
        self.field, self.why = field, why
        super().__init__(f"{field}: {why}")


def _positive_int(name: str, val: Any) -> None:
    if isinstance(val, bool) or not isinstance(val, int) or val < 1:
        raise OptionError(name, f"must be a positive integer, got {val!r}")


def _flag(name: str, val: Any) -> None:
    if not isinstance(val, bool):
        raise OptionError(name, f"must be true or false, got {val!r}")


def _string(name: str, val: Any) -> None:
    if not isinstance(val, str):
        raise OptionError(name, f"must be a string, got {val!r}")


def _strings(name: str, val: Any) -> None:
    if not isinstance(val, (list, tuple)) or not all(isinstance(o, str) for o in val):
        raise OptionError(name, "must be a list of strings")


# The check of each field type `Options` declares (its annotations are strings: `from __future__
# import annotations`); a field of another type fails at import, not silently unchecked.
_CHECKS = {"int": _positive_int, "bool": _flag, "str": _string, "tuple[str, ...]": _strings}


@dataclass(frozen=True)
class Options:
    """The options of one kernel variant past its signature and constexprs.

    num_warps: warps per program (CTA), a power of two 1..32. num_ctas: CTAs per program
    (only 1 is lowered). num_stages: default software-pipelining depth (>= 1). target: the
    GPU, "cuda:<cc>" (`ttbuild.target.Target`). enable_fp_fusion: let LLVM contract
    mul+add into FMA. debug: keep tl.device_assert (Triton's debug=True). ptxas_options:
    extra ptxas flags, e.g. ("-O3",). disable_mma_v3: keep every tt.dot on mma.sync (MMAv2)
    where wgmma would apply (sm_90), as Triton's DISABLE_MMA_V3=1 does; the PTX it gives runs
    on later GPUs too. disable_tma: compile `tensordesc<...>` parameters to their pointer
    form even on a TMA target (sm_90+), as below sm_90 (ttbuild.tma; a multi-target variant
    sets it so that every image takes the same parameters). gpu: the GPU model
    (`ttbuild.target.GPU_MODELS`, "h100-sxm"), only for a project kernel whose modules read a
    fact the capability does not fix (the SM count, the device name); "" when none is named.

    Raises OptionError (a ValueError) from `__post_init__` for a value of the wrong type or
    range; the messages are the ones the variant list reports at the field's line.
    """

    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3
    target: str = str(DEFAULT_TARGET)
    enable_fp_fusion: bool = True
    debug: bool = False
    ptxas_options: tuple[str, ...] = ()
    disable_mma_v3: bool = False
    disable_tma: bool = False
    gpu: str = ""

    def __post_init__(self):
        # Each field checked by its declared type (dataclasses.fields), then the rules of its own.
        for f in fields(self):
            _CHECKS[f.type](f.name, getattr(self, f.name))
        if self.num_warps & (self.num_warps - 1) or self.num_warps > MAX_NUM_WARPS:
            raise OptionError("num_warps", f"must be a power of two from 1 to {MAX_NUM_WARPS}, got {self.num_warps}")
        try:
            compilable(Target.parse(self.target))
        except TargetError as exc:
            raise OptionError("target", str(exc)) from None
        if self.gpu:
            try:
                gpu_model(self.gpu, Target.parse(self.target))
            except TargetError as exc:
                raise OptionError("gpu", str(exc)) from None
        if self.num_ctas != 1:  # ttgir lowers one CTA per program; refused here, at the row
            raise OptionError("num_ctas", f"only 1 CTA per program is compiled (Triton's thread-block clusters, "
                                          f"num_ctas > 1, are not lowered yet), got {self.num_ctas}")
        object.__setattr__(self, "ptxas_options", tuple(self.ptxas_options))

    @property
    def target_info(self) -> Target:
        """`target` parsed: backend, capability, arch, PTX version."""
        return Target.parse(self.target)

    @property
    def arch(self) -> str:
        """ptxas/LLVM arch of `target` ("sm_90a")."""
        return self.target_info.arch

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> "Options":
        """Options from a stage's option dict: the keys named like fields are read, the rest
        (signature, arch, ...) ignored; absent fields take the defaults above. Raises OptionError."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in options.items() if k in names})


if {f.type for f in fields(Options)} - set(_CHECKS):
    raise TypeError(f"Options field types without a check: {({f.type for f in fields(Options)} - set(_CHECKS))}")
FIELD_NAMES = tuple(f.name for f in fields(Options))
DEFAULTS = Options()
