"""Loads prebuilt kernels from `artifacts/lib` and launches them like Triton: `load("artifacts").add_kernel[grid](x, y, out, n)`.

Imports only the standard library at import time; `cuda.bindings` is imported on the first
launch (through `ttbuild.runtime.driver.default_driver`). Never imports the compiler.
"""

from __future__ import annotations

import os
import threading

from .driver import CtypesCudaDriver, CudaDriver, CudaError, Driver, default_driver
from .interop import InteropError
from .launch import Launcher, LaunchError
from .metadata import MetadataError, Param, Variant, read_library
from .nonearg import NoneDispatch, none_params
from .select import NoMatchingVariant
from .serve import DeviceNotCovered, ServeMiss, serve
from .tensordesc import DescriptorError, DescriptorLauncher, TensorDescriptor
from .torchop import TorchOpError, torch_op
from .tuned import TunedLauncher
from .tuningtable import TuningError, load_table, table_path

__all__ = ["load", "Library", "Launcher", "Variant", "Param", "Driver", "CudaDriver", "CtypesCudaDriver",
           "CudaError", "MetadataError", "NoMatchingVariant", "LaunchError", "InteropError", "TorchOpError",
           "default_driver", "torch_op", "TunedLauncher", "TuningError", "TensorDescriptor", "DescriptorError",
           "serve", "ServeMiss", "DeviceNotCovered", "open_library"]


class Library:
    """The kernels of one artifacts directory (library order = JSON file names sorted).

    A kernel is identified by its source file and name (two files may each define an
    `add_kernel`): `lib.add_kernel` / `lib["add_kernel"]` is the Launcher over its variants
    when one file defines that name, `lib["vector_add.py:add_kernel"]` (".py" optional) names
    it always; an ambiguous short name raises AttributeError (KeyError through `[]`) listing the
    qualified names. `lib.variant(name)` is a Launcher over one variant. A kernel built from
    `@triton.autotune` / `@triton.heuristics` rows is a TunedLauncher reading
    `<artifacts>/tuning/<kernel>.json` (ttbuild.runtime.tuned).

    `variants`: the Variants, read; or None with `groups` ({(file, kernel): libindex.KernelGroup}
    from the library index), whose metadata is read when the kernel is first asked for. Either
    way a kernel's launcher is made on its first use.
    """

    def __init__(self, variants: list[Variant] | None, lib_dir: str, driver=None, *, groups: dict | None = None):
        self.lib_dir = lib_dir
        self._driver = driver
        # (file, kernel) -> libindex.KernelGroup: given Variants, or index rows read on first use
        self._all = list(variants) if variants is not None else None
        if groups is None:
            # imported when used: `python -m ttbuild.runtime.libindex` runs that module as __main__
            from .libindex import groups_of

            groups = groups_of(self._all)
        self._groups = groups
        names: dict[str, list[str]] = {}
        for file, kernel in self._groups:
            names.setdefault(kernel, []).append(f"{file}:{kernel}" if file else kernel)
        self._qualified = {kernel: sorted(qs) for kernel, qs in names.items()}
        self._by_name = {f"{f}:{k}" if f else k: g for (f, k), g in self._groups.items()}
        self._launchers: dict = {}  # qualified name -> Launcher (or the MetadataError it raised), made on first use
        self._single: dict = {}
        self._making = threading.Lock()

    @property
    def variants(self) -> list[Variant]:
        """Every variant in library order; reads every kernel's metadata that was not read yet."""
        if self._all is None:
            order = sorted((o, i, n) for i, g in enumerate(self._groups.values()) for n, o in enumerate(g.order))
            groups = list(self._groups.values())
            self._all = [groups[i].load()[n] for _, i, n in order]
        return self._all

    def kernel_groups(self) -> list:
        """The library's kernels as libindex.KernelGroup (file, kernel, names, images(), load()), in no
        particular order: what serve and its device check read before any metadata file."""
        return list(self._groups.values())

    def variants_of(self, kernel: str, accept) -> list[Variant]:
        """The variants of the kernels named `kernel` whose source file `accept(file)` takes, in library
        order; reads only those kernels' metadata."""
        picked = [g for (f, k), g in self._groups.items() if k == kernel and accept(f)]
        if len(picked) == 1:
            return list(picked[0].load())
        return [v for _, v in sorted((o, v) for g in picked for o, v in zip(g.order, g.load()))]

    @property
    def kernels(self) -> list[str]:
        """Each kernel's name: short where one file defines it, else "file.py:name"."""
        return sorted(k for kernel, qs in self._qualified.items() for k in ([kernel] if len(qs) == 1 else qs))

    def _find(self, name: str) -> Launcher:
        if ":" in name:
            file, _, kernel = name.rpartition(":")
            for q in (name, f"{file}.py:{kernel}"):
                if q in self._by_name:
                    return self._launcher(q)
        else:
            qs = self._qualified.get(name)
            if qs is not None and len(qs) == 1:
                return self._launcher(qs[0])
            if qs:
                raise LookupError(f"kernel {name!r} is defined in {len(qs)} files of {self.lib_dir}: "
                                  f"name one, {' or '.join(f'lib[{q!r}]' for q in qs)}")
        raise LookupError(f"no kernel {name!r} in {self.lib_dir}; kernels: {', '.join(self.kernels) or 'none'}")

    def _launcher(self, qualified: str) -> Launcher:
        found = self._launchers.get(qualified)
        if found is None:
            with self._making:  # one launcher per kernel, whichever thread asks first
                found = self._launchers.get(qualified)
                if found is None:
                    found = self._launchers[qualified] = self._make(self._by_name[qualified])
        if isinstance(found, MetadataError):
            raise found
        return found

    def _make(self, group):
        """The launcher of one kernel, or the MetadataError its metadata raised (raised again at each ask)."""
        file, kernel = group.file, group.kernel
        unique = len(self._qualified[kernel]) == 1
        q = f"{file}:{kernel}" if file else kernel
        name = kernel if unique else q
        try:
            vs = _widest(group.load())
            if any(v.autotune or v.heuristics for v in vs):
                tuning_dir = os.path.join(os.path.dirname(os.path.abspath(self.lib_dir)), "tuning")
                # artifacts/tuning/<kernel>.json (<file stem>.<kernel>.json when two files define it)
                table = kernel if unique else f"{file.removesuffix('.py')}.{kernel}"
                launcher = TunedLauncher(name, vs, self._driver, load_table(tuning_dir, table),
                                         table_file=table_path(tuning_dir, table))
            elif len({none_params(v) for v in vs}) > 1:  # variants for None and for a value
                launcher = NoneDispatch(name, vs, self._driver)
            else:
                launcher = Launcher(name, vs, self._driver)
            if vs[0].descriptors:
                launcher = DescriptorLauncher(launcher, vs[0].descriptors)
            return launcher
        except MetadataError as exc:  # raised when that kernel is asked for: the rest loads
            return exc

    def __getattr__(self, name):
        if self.__dict__.get("_by_name") is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._find(name)
        except LookupError as exc:
            raise AttributeError(str(exc)) from None

    def __getitem__(self, name) -> Launcher:
        try:
            return self._find(name)
        except LookupError as exc:
            raise KeyError(str(exc)) from None

    def __contains__(self, name) -> bool:
        try:
            self._find(name)
            return True
        except LookupError:
            return False

    def __dir__(self):
        return sorted(set(super().__dir__()) | {k for k in self.kernels if ":" not in k})

    def variant(self, name: str) -> Launcher:
        """A Launcher restricted to the variant named `name` (its JSON's "variant")."""
        if name not in self._single:
            group = next((g for g in self._groups.values() if name in g.names), None)
            match = [v for v in group.load() if v.variant == name] if group is not None else []
            if not match:
                every = sorted((o, n) for g in self._groups.values() for o, n in zip(g.order, g.names))
                raise KeyError(f"no variant {name!r} in {self.lib_dir}; variants: {', '.join(n for _, n in every)}")
            single = Launcher(match[0].kernel, match, self._driver)
            self._single[name] = DescriptorLauncher(single, match[0].descriptors) if match[0].descriptors else single
        return self._single[name]

    def __repr__(self):
        count = sum(len(g.names) for g in self._groups.values())
        return f"<ttbuild Library {self.lib_dir}: {count} variants of {self.kernels}>"


def _widest(variants: list) -> list:
    """The variants of a kernel that share its widest parameter kinds: recorded rows may fix a
    runtime parameter to 1 as a constexpr (Triton's `== 1` specialization, ttbuild.record),
    which one Launcher cannot mix with rows taking it at run time. The group with the fewest
    constexprs takes every call; `serve` (ttbuild.runtime.serve) uses the others too. A parameter
    built as a constexpr None counts as a runtime one here: NoneDispatch picks those by the call."""
    groups: dict = {}
    for v in variants:
        groups.setdefault(tuple(p.kind == "constexpr" and p.value is not None for p in v.params), []).append(v)
    if len(groups) == 1:
        return variants
    return min(groups.items(), key=lambda kv: (sum(kv[0]), -len(kv[1])))[1]


def load(path: str = "artifacts", driver=None) -> Library:
    """The library of `<path>/lib` (or of `path` when it is the lib folder itself).

    With the library index the build writes (lib/ttbuild.index, ttbuild.runtime.libindex), a
    kernel's `*.json` are read when that kernel is first asked for; without one that fits lib/,
    every `*.json` is read now. Nothing touches the GPU here: cubins load on the first launch of
    each variant, per CUDA context. `driver`: a Driver (see ttbuild.runtime.driver) to launch
    through; default CUDA. Raises MetadataError for a missing folder or a bad metadata file
    (through the index: when its kernel is first asked for).
    """
    lib_dir = os.path.join(path, "lib")
    if not os.path.isdir(lib_dir) and os.path.isdir(path) and any(
            n.endswith(".json") for n in os.listdir(path)):
        lib_dir = path
    return open_library(lib_dir, driver)


def open_library(lib_dir: str, driver=None) -> Library:
    """The Library of the folder `lib_dir`: through its index (ttbuild.runtime.libindex), which
    reads a kernel's metadata on that kernel's first use, else by reading every `*.json` now
    (a library built before the index, or changed since). Raises MetadataError as `load`."""
    from .libindex import read_index

    groups = read_index(lib_dir) if os.path.isdir(lib_dir) else None
    if groups is None:
        return Library(read_library(lib_dir), lib_dir, driver)
    return Library(None, lib_dir, driver, groups=groups)
