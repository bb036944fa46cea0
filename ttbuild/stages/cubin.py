"""Stage cubin: PTX -> cubin with the ptxas `ttbuild.toolchain` names (the nvidia-cuda-nvcc wheel's)."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 6  # a two-CTA setmaxnreg plan gives way to the one-CTA form where ptxas serializes wgmma or spills under it


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ptx"}; options: arch ("sm_90a"), ptxas_options (list of str, e.g. ["-O3"]).
    Returns {"cubin": ELF bytes}. Raises ToolError (stderr + repro command) when ptxas fails."""
    from ttbuild.backend.nvptx.ptxas import assemble
    from ttbuild.stages import declared_options
    from ttbuild.target import DEFAULT_TARGET

    arch = str(options.get("arch", DEFAULT_TARGET.arch))
    extra = list(declared_options("cubin", {"ptxas_options": options.get("ptxas_options") or ()}).ptxas_options)
    return {"cubin": assemble(inputs["ptx"], arch, extra)}
