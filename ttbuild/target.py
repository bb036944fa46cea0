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

    def __str__(self) -> str:
        return f"{self.backend}:{self.capability}"


DEFAULT_TARGET = Target("cuda", 90)
