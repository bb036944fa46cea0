"""Tensor-descriptor arguments: a host descriptor becomes the base, shape and strides of a `tensordesc<...>` parameter; stdlib only.

The parameter's compiled form is its entries of the metadata's `params` (the kernel ABI the ttir stage recorded,
ttbuild.frontend.abi: `"origin"` the parameter, `"part"` tensormap / base / shape / stride); where it loads through
TMA, the address of its CUtensorMap comes first.

A descriptor argument may be Triton's host `TensorDescriptor`
(python/triton/tools/tensor_descriptor.py: `base`, `shape`, `strides`, `block_shape`, `padding`),
this module's `TensorDescriptor`, or a tensor (a torch tensor: `data_ptr()`, `shape`, `stride()`),
which takes the block shape of the kernel's signature and zero padding. The checks are the TMA
contract (`cuTensorMapEncodeTiled`, CUDA driver API), which the compiled kernel assumes:
- the base is 16-byte aligned;
- every stride but the last is a multiple of 16 bytes, and the last is 1;
- the block shape is the signature's;
- `padding` (what loads read out of bounds; an object without one: "zero") is "zero" or "nan",
  "nan" only for floating-point descriptors (Triton's checks and messages), and "nan" only where
  the parameter loads through TMA: its map is encoded with the NaN fill (ttbuild.runtime.tensormap).
  A parameter read through pointers was compiled with `other=0`, so "nan" is refused there.

A parameter whose metadata `descriptors` entry has "tma": {"swizzle", "box"} (ttbuild.tma) takes
`<name>.tensormap` first: the device address of the CUtensorMap of the descriptor on the device
that holds its base (ttbuild.runtime.tensormap: encoded once per distinct descriptor, then one dict
lookup), with the driver API's further limits checked when it is encoded: every extent in
[1, 2**32], byte strides below 2**40.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import TTBuildError
from ..signature import DTYPE_BYTES
from .metadata import MetadataError


class DescriptorError(TTBuildError, TypeError):
    """A descriptor argument the kernel cannot take; the message names the parameter."""


PADDINGS = ("zero", "nan")  # Triton's TensorDescriptor.padding values
FLOAT_DTYPES = frozenset(("fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5"))  # may take padding="nan"


def padding_error(padding, floating) -> str | None:
    """Triton's TensorDescriptor padding checks (its messages): None where `padding` is fine for
    a descriptor whose elements are floating point (`floating`; None: not known here)."""
    if padding == "zero":
        return None
    if not (isinstance(padding, str) and padding == "nan"):
        return f"Illegal value for padding: {padding!r} (\"zero\" or \"nan\")"
    if floating is False:
        return "Padding option `nan` is only supported for floating point tensors"
    return None


@dataclass(frozen=True, slots=True)
class TensorDescriptor:
    """A host tensor descriptor: `base` (a tensor), `shape` and `strides` (elements), `block_shape`,
    `padding` (what loads read out of bounds: "zero" or, for floating-point tensors, "nan"; as
    Triton's). `TensorDescriptor.from_tensor(t, [64, 64])` takes the tensor's own shape and
    strides (as Triton's `TensorDescriptor.from_tensor`). Slotted: the C launch path (claunch.c
    DescExpand) reads its fields from their slots, no dict lookups."""

    base: Any
    shape: tuple
    strides: tuple
    block_shape: tuple
    padding: str = "zero"

    def __post_init__(self):
        if self.padding != "zero":  # Triton's checks (the base's dtype where it says is_floating_point)
            why = padding_error(self.padding, getattr(getattr(self.base, "dtype", None), "is_floating_point", None))
            if why is not None:
                raise DescriptorError(why)

    @classmethod
    def from_tensor(cls, tensor, block_shape, padding: str = "zero") -> "TensorDescriptor":
        """A descriptor over all of `tensor` (its shape and strides in elements) with boxes of `block_shape`,
        Triton's TensorDescriptor.from_tensor."""
        return cls(tensor, tuple(tensor.shape), tuple(tensor.stride()), tuple(block_shape), padding)


def expander(spec: dict, kernel: str, tensormap=None):
    """`expand(arg) -> (base, *shape, *strides[:-1])` for one descriptor parameter; `spec` is the
    metadata's {"name", "dtype", "block_shape"}. With `tensormap` (a TensorMapper, for a spec
    with "tma"): `(tensormap(base, address, shape, strides, padding), base, *shape,
    *strides[:-1])`. The expansion raises DescriptorError naming the parameter, also for a
    padding Triton refuses and for padding="nan" without `tensormap` (the pointer form reads
    zeros out of bounds). An extent or stride out of the i32/i64 range is refused by variant
    selection, as any integer argument is."""
    name, block = spec["name"], tuple(spec["block_shape"])
    blist, rank, size = list(block), len(block), DTYPE_BYTES[spec["dtype"]]
    floating = spec["dtype"] in FLOAT_DTYPES

    def fail(why: str):
        """Raise DescriptorError "<kernel>: <parameter>: why"."""
        raise DescriptorError(f"{kernel}: {name}: {why}")

    def expand(arg) -> tuple:
        """The launch values one descriptor argument expands into (the TMA map address or base, then shape and
        strides as the kernel's signature lists them). Raises DescriptorError for another argument type, a block
        shape that differs from the variant's, or a padding it cannot honour."""
        try:  # a host descriptor (Triton's dataclass or ours): read its fields
            base, shape, strides, got = arg.base, arg.shape, arg.strides, arg.block_shape
        except AttributeError:
            if not (hasattr(arg, "data_ptr") and callable(getattr(arg, "stride", None))):
                raise DescriptorError(f"{kernel}: {name} takes a tensor descriptor (Triton's TensorDescriptor, "
                                      f"ttbuild.runtime.TensorDescriptor) or a tensor, got {type(arg).__name__}") from None
            base, shape, strides, got, padding = arg, tuple(arg.shape), tuple(arg.stride()), blist, "zero"
        else:
            padding = getattr(arg, "padding", "zero")
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
        if padding != "zero":
            why = padding_error(padding, floating)
            if why is not None:
                fail(why if floating else f"{why}; the kernel's descriptor holds {spec['dtype']}")
            if tensormap is None:
                fail(f"padding=\"nan\" cannot be honoured: this variant reads {name} through pointers, out-of-bounds "
                     f"elements zero-filled (compiled with other=0), so NaN padding would silently read zeros; "
                     f"pass padding=\"zero\" (or a kernel that loads {name} through TMA)")
        if tensormap is not None:
            ptr = _address(base, name, kernel)
            if ptr % 16:
                fail(f"the base address must be 16-byte aligned, got {ptr:#x}")
            return (tensormap(base, ptr, shape, strides, padding), base, *shape, *strides[:-1])
        ptr = base.data_ptr() if hasattr(base, "data_ptr") else 0
        if ptr % 16:
            fail(f"the base address must be 16-byte aligned, got {ptr:#x}")
        return (base, *shape, *strides[:-1])
    return expand


def _address(base, name: str, kernel: str) -> int:
    """The device address of a descriptor's base: data_ptr(), __cuda_array_interface__ or
    DLPack (read with the legacy default stream: the launch asks again with its own)."""
    get = getattr(base, "data_ptr", None)
    if get is not None:
        return get()
    cai = getattr(base, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0] or 0
    if hasattr(base, "__dlpack__") and hasattr(base, "__dlpack_device__"):
        from .interop import dlpack_pointer

        return dlpack_pointer(base, name, 0)[0]
    raise DescriptorError(f"{kernel}: {name}: the descriptor's base must be a device tensor (data_ptr(), "
                          f"__cuda_array_interface__ or __dlpack__), got {type(base).__name__}")


def _device(base, name: str, kernel: str, maps) -> int:
    """The device holding a descriptor's base: get_device() (torch), the DLPack device, else
    the current context's (what the launch does for such arguments)."""
    get = getattr(base, "get_device", None)
    if get is not None:
        dev = get()
        if dev < 0:
            raise DescriptorError(f"{kernel}: {name}: the descriptor's tensor is in host memory (device "
                                  f"{getattr(base, 'device', 'cpu')}); a kernel needs CUDA device memory")
        return dev
    if hasattr(base, "__dlpack_device__"):
        from .interop import dlpack_device

        return dlpack_device(base, name)
    return maps.current_device()


def tma_record(spec: dict, where: str) -> tuple[tuple, int] | None:
    """(box, swizzle) of a spec that loads through TMA, None for the pointer form; MetadataError
    for a "tma" record that is not {"swizzle": 0/32/64/128, "box": one extent per block dimension}."""
    tma = spec.get("tma")
    if tma is None:
        return None
    box = tma.get("box") if isinstance(tma, dict) else None
    if not (isinstance(box, list) and len(box) == len(spec["block_shape"]) and all(
            isinstance(b, int) and b > 0 for b in box) and tma.get("swizzle") in (0, 32, 64, 128)):
        raise MetadataError(f"{where}: descriptor {spec['name']!r} has 'tma' {tma!r}, not "
                            "{\"swizzle\": 0/32/64/128, \"box\": [one extent per block dimension]}")
    return tuple(box), tma["swizzle"]


class TensorMapper:
    """`tensormap(base, address, shape, strides, padding="zero") -> int` for a spec with "tma":
    the device address of the CUtensorMap of that descriptor (address = base's device address,
    shape and strides in elements, padding the out-of-bound fill: "zero" or "nan"), from
    `maps_of()` (a ttbuild.runtime.tensormap.TensorMaps, asked for at the first call and then
    kept as `maps`). Raises DescriptorError naming the parameter for a descriptor the driver API
    cannot encode. claunch.c's DescExpand calls it on a miss of its one-entry cache per position
    (with padding only where it is "nan"), which it keys on (device, address, shape, strides,
    padding) and on `maps.epoch` (a map address stays valid until the epoch changes)."""

    def __init__(self, spec: dict, kernel: str, maps_of):
        self.name, self.dtype, self.kernel = spec["name"], spec["dtype"], kernel
        self.box, self.swizzle = tma_record(spec, kernel)
        self.maps_of = maps_of
        self.maps = None

    def __call__(self, base, address, shape, strides, padding="zero") -> int:
        from .tensormap import TensorMapError

        maps = self.maps
        if maps is None:
            maps = self.maps = self.maps_of()
        device = _device(base, self.name, self.kernel, maps)
        shape, strides = tuple(shape), tuple(strides)
        hit = maps.table.get((device, self.dtype, address, shape, strides, self.box, self.swizzle, padding))
        if hit is not None:
            return hit
        try:
            return maps.address(device, self.dtype, address, shape, strides, self.box, self.swizzle, padding)
        except TensorMapError as exc:
            raise DescriptorError(f"{self.kernel}: {self.name}: {exc}") from None


def _no_tensormap(base, address, shape, strides, padding="zero") -> int:
    """select()'s stand-in: variant selection reads nothing of the map's address."""
    return 0


def expand(arg, spec: dict, kernel: str) -> tuple:
    """(base, *shape, *strides[:-1]) for one descriptor argument (see expander); the pointer form
    alone, also for a spec with "tma" (DescriptorLauncher puts its map's address in front)."""
    return expander(spec, kernel)(arg)


class DescriptorLauncher:
    """A kernel with `tensordesc<...>` parameters: `[grid](*args, **kwargs)` expands each
    descriptor argument (positional or by name) and launches through `inner` (a Launcher or a
    TunedLauncher over the expanded parameters). Other attributes are `inner`'s."""

    def __init__(self, inner, descriptors):
        self.inner = inner
        self.descriptors = {d["name"]: d for d in descriptors}
        self.kernel = inner.kernel
        tma = {n for n, d in self.descriptors.items() if tma_record(d, self.kernel) is not None}
        # each descriptor's kernel parameters, as the metadata's ABI records them
        self._entries = descriptor_entries(inner.variants[0].params, self.descriptors, tma, self.kernel)
        parts = {e for n, names in self._entries.items() for e in names if e != n}
        names = getattr(inner, "call_names", inner.param_names)
        if tma:
            _same_tma_everywhere(self.kernel, getattr(inner, "variants", ()), tma)
        self.call_names = tuple(n for n in names if n not in parts)
        # TMA descriptors: per name, its TensorMapper (the driver's TensorMaps found at the first launch)
        self._tensormaps = {n: TensorMapper(self.descriptors[n], self.kernel, self._tensor_maps) for n in tma}
        self._maps = None
        self._by_name = {n: expander(d, self.kernel, self._tensormaps.get(n)) for n, d in self.descriptors.items()}
        self._selecting = {n: expander(d, self.kernel, _no_tensormap if n in tma else None)
                           for n, d in self.descriptors.items()}
        self._plan = [self._by_name.get(n) for n in self.call_names]  # per position: an expander or None
        # claunch.c DescExpand's arguments: per position the rank (0: not a descriptor), element
        # bytes and block shape; with TMA descriptors also per position its TensorMapper or None
        specs = [self.descriptors.get(n) for n in self.call_names]
        self._c_plan = (bytes(len(s["block_shape"]) if s else 0 for s in specs),
                        tuple(DTYPE_BYTES[s["dtype"]] if s else 0 for s in specs),
                        tuple(tuple(s["block_shape"]) if s else None for s in specs))
        self._c_tensormaps = tuple(self._tensormaps.get(n) for n in self.call_names) if tma else None
        self._bound: dict = {}  # grid -> its launch (grids that are tuples or ints)

    def _tensor_maps(self):
        """The TensorMaps of the driver the launches go through (made on first use)."""
        if self._maps is None:
            from .tensormap import tensor_maps

            self._maps = tensor_maps(_driver_of(self.inner))
        return self._maps

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def expand(self, args, kwargs, select: bool = False) -> tuple[list, dict]:
        """The arguments with each descriptor replaced by its expanded values (`select`: a TMA
        descriptor's map address is 0, nothing is encoded)."""
        by_name = self._selecting if select else self._by_name
        out = []
        for a, n in zip(args, self.call_names):
            ex = by_name.get(n)
            if ex is None:
                out.append(a)
            else:
                out.extend(ex(a))
        out.extend(args[len(self._plan):])
        kw = {}
        for k, v in kwargs.items():
            ex = by_name.get(k)
            if ex is None:
                kw[k] = v
                continue
            kw.update(zip(self._entries[k], ex(v)))
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
            """Expand the descriptor arguments and launch the inner launcher's `grid` function; keyword or miscounted
            calls take the generic expansion."""
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
        if self._c_tensormaps is not None:
            return module.DescExpand(*self._c_plan, fn, launch, tensormaps=self._c_tensormaps)
        return module.DescExpand(*self._c_plan, fn, launch)

    def run(self, *args, grid, **kwargs):
        """Launch on `grid` (Launcher.run's form, descriptors expanded). Returns None."""
        return self[grid](*args, **kwargs)

    def select(self, *args, **kwargs):
        """The variant a launch with these arguments would use, descriptors expanded (Launcher.select). Raises
        DescriptorError or NoMatchingVariant."""
        a, kw = self.expand(args, kwargs, select=True)
        return self.inner.select(*a, **kw)

    def __repr__(self):
        return f"<ttbuild kernel {self.kernel} with descriptor parameters {', '.join(self.descriptors)}>"


def descriptor_entries(params, descriptors: dict, tma, kernel: str) -> dict[str, tuple[str, ...]]:
    """Per descriptor name, the names of its kernel parameters in order: the `params` (metadata
    Param records, the kernel ABI) whose origin it is. Raises MetadataError ("rebuild the
    library") unless they are contiguous and their parts are what `expander` gives: tensormap
    (for a name in `tma`), base, one shape per block dimension, one stride per dimension but
    the last."""
    out = {}
    for n, d in descriptors.items():
        at = [i for i, p in enumerate(params) if p.origin == n]
        rank = len(d["block_shape"])
        want = ["tensormap"] * (n in tma) + ["base"] + ["shape"] * rank + ["stride"] * (rank - 1)
        got = [params[i].part for i in at]
        if got != want or at != list(range(at[0], at[0] + len(at))):
            raise MetadataError(f"{kernel}: descriptor {n!r} passes as {got or 'nothing'} in the metadata's params, "
                                f"not as the contiguous {want} this runtime expands it to: rebuild the library")
        out[n] = tuple(params[i].name for i in at)
    return out


def _driver_of(inner):
    """The driver a Launcher or TunedLauncher (`base`) launches through."""
    driver = getattr(inner, "driver", None)
    if driver is None:
        driver = getattr(getattr(inner, "base", None), "driver", None)
    if driver is None:
        from .driver import default_driver

        driver = default_driver()
    return driver


def _same_tma_everywhere(kernel: str, variants, names) -> None:
    """Refuse (MetadataError) a kernel whose variants encode a TMA descriptor differently (dtype,
    block, box, swizzle): the map is encoded before a variant is chosen, so it must fit them all."""
    for n in names:
        seen = {}
        for v in variants:
            d = next((d for d in getattr(v, "descriptors", ()) if d["name"] == n), None)
            rec = None if d is None else (d["dtype"], tuple(d["block_shape"]), repr(d.get("tma")))
            seen.setdefault(rec, v)
        if len(seen) > 1:
            raise MetadataError(f"{kernel}: variants {', '.join(v.variant for v in seen.values())} disagree on "
                                f"descriptor {n!r} (dtype, block shape or TMA box and swizzle); a TMA descriptor's "
                                "map is encoded before the variant is chosen: build one kernel name per encoding")
