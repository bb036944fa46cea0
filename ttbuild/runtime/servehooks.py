"""Triton's launch hooks on served launches: `knobs.runtime.launch_enter_hook` / `launch_exit_hook`, when set, get the LazyDict Triton 3.6 would pass.

Triton 3.6 (python/triton/runtime/jit.py `JITFunction.run`, compiler/compiler.py
`CompiledKernel.launch_metadata`, backends/nvidia/driver.py's launcher) calls the enter hook
with a LazyDict of {"name", "function", "stream"} just before cuLaunchKernel, the exit hook
with the same object after it; a kernel's `@triton.jit(launch_metadata=fn)` adds
`fn(grid, metadata, args)` to it, evaluated when a hook calls `.get()` (grid: the launch grid
as the call site gave it or its callable returned; metadata: the compiled kernel's metadata,
here a KernelMetadata namedtuple of the variant's; args: every parameter by name). A hook is
"set" when it is a callable other than an empty HookChain (3.6's default). With no hook set a
served launch checks two attributes and takes its usual path.
"""

from __future__ import annotations

import collections
import sys

from ..cxvalue import to_live
from .metadata import Variant


class LazyDict:
    """Triton 3.6's compiler.LazyDict interface (`data`, `add(func, args)`, `get()`), used when
    Triton itself is not loaded (the façade)."""

    def __init__(self, data: dict):
        self.data = data
        self.extras: list = []

    def get(self) -> dict:
        for func, args in self.extras:
            self.data = self.data | func(*args)
        self.extras.clear()
        return self.data

    def add(self, func, args) -> None:
        self.extras.append((func, args))


# The fields of Triton 3.6's KernelMetadata (its metadata JSON) that a variant knows.
KernelMetadata = collections.namedtuple(
    "KernelMetadata", "name num_warps num_ctas num_stages shared target arch ptx_version global_scratch_size "
                      "global_scratch_align")
GPUTarget = collections.namedtuple("GPUTarget", "backend arch warp_size")


def runtime_knobs(triton_module):
    """`triton.knobs.runtime` of a loaded Triton or façade, else None (a Triton without knobs)."""
    knobs = sys.modules.get(triton_module.__name__ + ".knobs") or getattr(triton_module, "knobs", None)
    return getattr(knobs, "runtime", None)


def hooks_set(rk) -> tuple | None:
    """(enter hook, exit hook) of `triton.knobs.runtime` when either is set, else None."""
    enter, leave = rk.launch_enter_hook, rk.launch_exit_hook
    if getattr(enter, "calls", enter) or getattr(leave, "calls", leave):
        return enter, leave
    return None


def kernel_metadata(v: Variant) -> KernelMetadata:
    """The metadata object a kernel's `launch_metadata` function receives, from the variant."""
    cc = v.capability
    scratch = v.global_scratch or (0, 1)
    return KernelMetadata(name=v.entry, num_warps=v.num_warps, num_ctas=v.num_ctas, num_stages=v.num_stages,
                          shared=v.shared, target=GPUTarget("cuda", cc[0] * 10 + cc[1], 32), arch=v.arch,
                          ptx_version=v.ptx_version, global_scratch_size=scratch[0], global_scratch_align=scratch[1])


def _stream(given) -> int:
    """The stream handle the launch runs on: the `stream=` given, else torch's current raw
    stream (Triton's driver.active.get_current_stream), else 0."""
    if given is not None:
        return given if type(given) is int else int(getattr(given, "cuda_stream", 0) or 0)
    torch = sys.modules.get("torch")
    try:
        c = torch._C
        return int(c._cuda_getCurrentRawStream(c._cuda_getDevice()))
    except AttributeError:
        return 0


def _function(launcher, variant, driver):
    """The variant's function handle in the current context (loaded now if need be), or None
    when the launcher does not expose it."""
    comp = getattr(launcher, "_compiled", {}).get(variant.variant)
    if comp is None or driver is None:
        return None
    ctx, capability = driver.context(None)
    return comp.function(driver, ctx, capability)


def hooked_launch(server, sk, jit_self, args, kwargs, grid, hooks):
    """Launch as ServedKernel.launch does, between the enter and exit hooks. A miss under
    policy `warn` runs Triton's own run, which calls the hooks itself."""
    enter, leave = hooks
    variant = sk.launch(args, dict(kwargs), grid, True, server.original_run, jit_self)
    if not isinstance(variant, Variant):
        return server.original_run(jit_self, *args, grid=grid, warmup=False, **kwargs)
    kwargs = dict(kwargs)
    stream, pdl = kwargs.pop("stream", None), kwargs.pop("launch_pdl", False)
    bound, options = sk.bind(args, kwargs)
    launcher = next(lch for _, lch in sk.groups if variant in lch.variants)
    if callable(grid):  # what the launcher passes a grid callable: the arguments, constexprs and options
        grid = grid({**{n: to_live(x) for n, x in variant.constexprs.items()}, **bound, "num_warps": variant.num_warps,
                     "num_stages": variant.num_stages, "num_ctas": variant.num_ctas})
    metadata = None
    if enter is not None:  # Triton 3.6 builds it only then (CompiledKernel.launch_metadata)
        cls = getattr(sys.modules.get("triton.compiler.compiler"), "LazyDict", LazyDict)
        metadata = cls({"name": variant.entry, "function": _function(launcher, variant, launcher.driver),
                        "stream": _stream(stream)})
        extra = getattr(jit_self, "launch_metadata", None)
        if extra is not None:
            metadata.add(extra, (grid, kernel_metadata(variant), dict(bound)))
        if getattr(enter, "calls", True):
            enter(metadata)
    launcher.run(*bound.values(), grid=grid, stream=stream, launch_pdl=pdl, **sk.launcher_options(options))
    if getattr(leave, "calls", leave):
        leave(metadata)
    return None
