"""Tensor-descriptor arguments: a host descriptor becomes the base pointer, shape and strides that a `tensordesc<...>` parameter is compiled to (ttbuild.signature.SigEntry.expanded); stdlib only.

A descriptor argument may be Triton's host `TensorDescriptor`
(python/triton/tools/tensor_descriptor.py: `base`, `shape`, `strides`, `block_shape`), this
module's `TensorDescriptor`, or a tensor (a torch tensor: `data_ptr()`, `shape`, `stride()`), which
takes the block shape of the kernel's signature. The checks are the TMA contract
(`cuTensorMapEncodeTiled`, CUDA driver API), which the compiled kernel assumes:
- the base is 16-byte aligned;
- every stride but the last is a multiple of 16 bytes, and the last is 1;
- the block shape is the signature's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import TTBuildError
from ..signature import DTYPE_BYTES


class DescriptorError(TTBuildError, TypeError):
    """A descriptor argument the kernel cannot take; the message names the parameter."""


@dataclass(frozen=True)
class TensorDescriptor:
    """A host tensor descriptor: `base` (a tensor), `shape` and `strides` (elements), `block_shape`.
    `TensorDescriptor.from_tensor(t, [64, 64])` takes the tensor's own shape and strides (as
    Triton's `TensorDescriptor.from_tensor`)."""

    base: Any
    shape: tuple
    strides: tuple
    block_shape: tuple

    @classmethod
    def from_tensor(cls, tensor, block_shape) -> "TensorDescriptor":
        return cls(tensor, tuple(tensor.shape), tuple(tensor.stride()), tuple(block_shape))


def expander(spec: dict, kernel: str):
    """`expand(arg) -> (base, *shape, *strides[:-1])` for one descriptor parameter; `spec` is the
    metadata's {"name", "dtype", "block_shape"}. The expansion raises DescriptorError naming the
    parameter. An extent or stride out of the i32/i64 range is refused by variant selection, as
    any integer argument is."""
    name, block = spec["name"], tuple(spec["block_shape"])
    blist, rank, size = list(block), len(block), DTYPE_BYTES[spec["dtype"]]

    def fail(why: str):
        raise DescriptorError(f"{kernel}: {name}: {why}")

    def expand(arg) -> tuple:
        try:  # a host descriptor (Triton's dataclass or ours): read its fields
            base, shape, strides, got = arg.base, arg.shape, arg.strides, arg.block_shape
        except AttributeError:
            if not (hasattr(arg, "data_ptr") and callable(getattr(arg, "stride", None))):
                raise DescriptorError(f"{kernel}: {name} takes a tensor descriptor (Triton's TensorDescriptor, "
                                      f"ttbuild.runtime.TensorDescriptor) or a tensor, got {type(arg).__name__}") from None
            base, shape, strides, got = arg, tuple(arg.shape), tuple(arg.stride()), blist
        if got != blist and tuple(got) != block:
            fail(f"descriptor block shape {list(got)}, the kernel was built for {blist} "
                 f"(tensordesc<{spec['dtype']}{blist}>)")
        if len(shape) != rank or len(strides) != rank:
            fail(f"a rank-{rank} descriptor, got shape {list(shape)} and strides {list(strides)}")
        if strides[-1] != 1:
            fail(f"the last stride must be 1, got {strides[-1]}")
        for s in strides[:-1]:
            if (s * size) % 16:
                fail(f"strides must be multiples of 16 bytes (TMA), got {list(strides)} elements of {size} bytes")
        ptr = base.data_ptr() if hasattr(base, "data_ptr") else 0
        if ptr % 16:
            fail(f"the base address must be 16-byte aligned, got {ptr:#x}")
        return (base, *shape, *strides[:-1])
    return expand


def expand(arg, spec: dict, kernel: str) -> tuple:
    """(base, *shape, *strides[:-1]) for one descriptor argument (see expander)."""
    return expander(spec, kernel)(arg)


class DescriptorLauncher:
    """A kernel with `tensordesc<...>` parameters: `[grid](*args, **kwargs)` expands each
    descriptor argument (positional or by name) and launches through `inner` (a Launcher or a
    TunedLauncher over the expanded parameters). Other attributes are `inner`'s."""

    def __init__(self, inner, descriptors):
        self.inner = inner
        self.descriptors = {d["name"]: d for d in descriptors}
        parts = {f"{n}.{kind}{i}" for n, d in self.descriptors.items() for kind in ("shape", "stride")
                 for i in range(len(d["block_shape"]))}
        names = getattr(inner, "call_names", inner.param_names)
        self.call_names = tuple(n for n in names if n not in parts)
        self.kernel = inner.kernel
        self._by_name = {n: expander(d, self.kernel) for n, d in self.descriptors.items()}
        self._plan = [self._by_name.get(n) for n in self.call_names]  # per position: an expander or None
        # claunch.c DescExpand's arguments: per position the rank (0: not a descriptor), element
        # bytes and block shape
        specs = [self.descriptors.get(n) for n in self.call_names]
        self._c_plan = (bytes(len(s["block_shape"]) if s else 0 for s in specs),
                        tuple(DTYPE_BYTES[s["dtype"]] if s else 0 for s in specs),
                        tuple(tuple(s["block_shape"]) if s else None for s in specs))
        self._bound: dict = {}  # grid -> its launch (grids that are tuples or ints)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def expand(self, args, kwargs) -> tuple[list, dict]:
        """The arguments with each descriptor replaced by its expanded values."""
        out = []
        for a, ex in zip(args, self._plan):
            if ex is None:
                out.append(a)
            else:
                out.extend(ex(a))
        out.extend(args[len(self._plan):])
        kw = {}
        for k, v in kwargs.items():
            ex = self._by_name.get(k)
            if ex is None:
                kw[k] = v
                continue
            rank = len(self.descriptors[k]["block_shape"])
            names = [k] + [f"{k}.shape{i}" for i in range(rank)] + [f"{k}.stride{i}" for i in range(rank - 1)]
            kw.update(zip(names, ex(v)))
        return out, kw

    def __getitem__(self, grid):
        hashable = type(grid) in (tuple, int)
        bound = self._bound.get(grid) if hashable else None
        if bound is None:
            bound = self._launch(grid)
            if hashable:
                self._bound[grid] = bound
        return bound

    def _launch(self, grid):
        """The launch of `grid`: the C expansion where it is built, else this Python one."""
        inner, plan, slow = self.inner, self._plan, self.expand
        fn = inner[grid]
        n = len(plan)

        def launch(*args, **kwargs):  # (claunch.c's DescExpand does this in C where it is built)
            if kwargs or len(args) != n:
                a, kw = slow(args, kwargs)
                return fn(*a, **kw)
            vals = []
            for a, ex in zip(args, plan):
                if ex is None:
                    vals.append(a)
                else:
                    vals.extend(ex(a))
            return fn(*vals)
        return self._in_c(fn, launch) or launch

    def _in_c(self, fn, launch):
        """The C expansion of ttbuild_claunch.DescExpand in front of `fn` (the same checks; any
        other argument goes to `launch`), or None where the C launch path is not built."""
        from . import cext

        module = cext.load()
        if module is None or not hasattr(module, "DescExpand") or not 0 < len(self.call_names) <= 64:
            return None
        return module.DescExpand(*self._c_plan, fn, launch)

    def run(self, *args, grid, **kwargs):
        return self[grid](*args, **kwargs)

    def select(self, *args, **kwargs):
        a, kw = self.expand(args, kwargs)
        return self.inner.select(*a, **kw)

    def __repr__(self):
        return f"<ttbuild kernel {self.kernel} with descriptor parameters {', '.join(self.descriptors)}>"
