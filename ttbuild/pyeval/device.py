"""Device facts a module may read, answered from the variant's target (and GPU model, when the row names one), each read recorded; standard library only.

Which facts: `torch.cuda.get_device_capability()`, `.get_device_properties(i)` (`major`, `minor`,
`warp_size`, `shared_memory_per_block(_optin)`, and with a GPU model `multi_processor_count`,
`name`), `torch.cuda.get_device_name(i)` (with a GPU model), `is_available()` probes, Triton's
`driver.active.get_current_target()` and `driver.active.utils.get_device_properties(i)`
(`max_shared_mem`, `warpSize`, `max_num_regs`, and with a GPU model `multiprocessor_count`).
A list over `range(torch.cuda.device_count())` is one value per GPU, each the target's (Uniform).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .modnames import _DEVICE_PROBES
from .objects import WARP_SIZE, DeviceProperties, GPUTarget, NeedsValue, Opaque
from .values import short

CALLS = frozenset({"torch.cuda.device_count", "torch.cuda.get_device_capability", "torch.cuda.get_device_properties", "torch.cuda.get_device_name",
                   "triton.runtime.driver.active.get_current_target",
                   "triton.runtime.driver.active.utils.get_device_properties"}) | frozenset(_DEVICE_PROBES)
_NAMED = "name the GPU model in the variant's row (gpu = \"h100-sxm\"; ttbuild.target.GPU_MODELS)"
# 64K 32-bit registers per block on every capability ttbuild targets (CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability"): Triton's `max_num_regs`.
_REGS_PER_BLOCK = 65536


class DeviceCount:
    """`torch.cuda.device_count()`: how many GPUs the machine has is no fact of the target (at least one, each
    the target GPU: a build is for the GPU it runs on). `range(DeviceCount)` is a DeviceRange."""


class DeviceRange:
    """`range(torch.cuda.device_count())`: one index per GPU; a list comprehension over it is Uniform."""


@dataclass(frozen=True)
class Uniform:
    """`[f(i) for i in range(torch.cuda.device_count())]` where every GPU is the target: `value` per GPU, the
    same for each; index 0 (and -1) is `value`, any other index needs the machine's GPU count."""

    value: object


DEVICE_INDEX = Opaque("the index of one of the machine's GPUs")


class DriverProperties(dict):
    """Triton's `driver.active.utils.get_device_properties(i)`: a dict; the SM count is there only when the row
    names the GPU model (reading it otherwise needs the running program's GPU)."""

    def __missing__(self, key):
        if key == "multiprocessor_count":
            raise NeedsValue(f"the GPU's SM count, which the compute capability does not fix: {_NAMED}")
        raise KeyError(key)


def fact(project, path: str, node: ast.AST, src):
    """The value of device probe `path` for the variant's target, recorded as read (the parse key then holds the
    target). Raises a located error when the read has no target."""
    if project.capability is None:
        raise src.error(node, f"`{short(node)}` needs the variant's target, which this read was not given")
    project.read_target = True
    cap = project.capability
    if path == "torch.version.hip":
        return None
    if path in _DEVICE_PROBES:  # a CUDA target runs on a CUDA device, and on no other backend's
        return _DEVICE_PROBES[path]
    if path.endswith("get_device_capability"):
        return (cap // 10, cap % 10)
    if path.endswith("get_current_target"):
        return GPUTarget(cap)
    if path == "torch.cuda.device_count":
        return DeviceCount()
    if path == "torch.cuda.get_device_name":
        return project.device_name if project.device_name is not None else Opaque(f"{path}(...)")
    props = DeviceProperties(cap, project.sm_count, project.device_name)
    if path.endswith("utils.get_device_properties"):
        out = DriverProperties(max_shared_mem=props.shared_memory_per_block_optin, warpSize=WARP_SIZE,
                               max_num_regs=_REGS_PER_BLOCK)
        if project.sm_count is not None:
            out["multiprocessor_count"] = project.sm_count
        return out
    return props


def attribute(props: DeviceProperties, attr: str, node: ast.AST, cannot):
    """`props.<attr>` of torch's device properties; `cannot(node, why)` makes the located refusal."""
    if attr == "warp_size":
        return WARP_SIZE
    if attr in ("major", "minor", "shared_memory_per_block", "shared_memory_per_block_optin"):
        return getattr(props, attr)
    if attr == "multi_processor_count" and props.sm_count is not None:
        return props.sm_count
    if attr == "name":
        return props.name if props.name is not None else Opaque("the GPU's name")
    raise cannot(node, f"`{attr}` of a GPU depends on the GPU model, not only on the target: {_NAMED}; known without "
                       "it: warp_size, major, minor, shared_memory_per_block(_optin)")
