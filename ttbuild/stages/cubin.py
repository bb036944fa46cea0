"""Stage cubin: PTX -> cubin with ptxas from the nvidia-cuda-nvcc wheel."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 1


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ptx"}; options: arch ("sm_90a"), ptxas_options (list of str, e.g. ["-O3"]).
    Returns {"cubin": ELF bytes}. Raises ToolError (stderr + repro command) when ptxas fails."""
    from ttbuild.backend.ptxas import assemble

    arch = str(options.get("arch", "sm_90a"))
    extra = [str(o) for o in options.get("ptxas_options", []) or []]
    return {"cubin": assemble(inputs["ptx"], arch, extra)}
