"""Loads prebuilt kernels from `artifacts/lib` and launches them like Triton: `load("artifacts").add_kernel[grid](x, y, out, n)`.

Imports only the standard library at import time; `cuda.bindings` is imported on the first
launch (through `ttbuild.runtime.driver.default_driver`). Never imports the compiler.
"""

from __future__ import annotations

import os

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
           "serve", "ServeMiss", "DeviceNotCovered"]


class Library:
    """The kernels of one artifacts directory (library order = JSON file names sorted).

    A kernel is identified by its source file and name (two files may each define an
    `add_kernel`): `lib.add_kernel` / `lib["add_kernel"]` is the Launcher over its variants
    when one file defines that name, `lib["vector_add.py:add_kernel"]` (".py" optional) names
    it always; an ambiguous short name raises AttributeError (KeyError through `[]`) listing the
    qualified names. `lib.variant(name)` is a Launcher over one variant. A kernel built from
    `@triton.autotune` / `@triton.heuristics` rows is a TunedLauncher reading
    `<artifacts>/tuning/<kernel>.json` (ttbuild.runtime.tuned).
    """

    def __init__(self, variants: list[Variant], lib_dir: str, driver=None):
        self.lib_dir = lib_dir
        self.variants = list(variants)
        self._driver = driver
        groups: dict = {}
        for v in self.variants:
            groups.setdefault((v.file, v.kernel), []).append(v)
        names: dict[str, list[str]] = {}
        for file, kernel in groups:
            names.setdefault(kernel, []).append(f"{file}:{kernel}" if file else kernel)
        self._qualified = {kernel: sorted(qs) for kernel, qs in names.items()}
        tuning_dir = os.path.join(os.path.dirname(os.path.abspath(lib_dir)), "tuning")
        self._launchers = {}
        for (file, kernel), vs in groups.items():
            vs = _widest(vs)
            unique = len(self._qualified[kernel]) == 1
            q = f"{file}:{kernel}" if file else kernel
            try:
                if any(v.autotune or v.heuristics for v in vs):
                    # artifacts/tuning/<kernel>.json (<file stem>.<kernel>.json when two files define it)
                    name = kernel if unique else f"{file.removesuffix('.py')}.{kernel}"
                    self._launchers[q] = TunedLauncher(kernel if unique else q, vs, driver, load_table(tuning_dir, name),
                                                       table_file=table_path(tuning_dir, name))
                elif len({none_params(v) for v in vs}) > 1:  # variants for None and for a value
                    self._launchers[q] = NoneDispatch(kernel if unique else q, vs, driver)
                else:
                    self._launchers[q] = Launcher(kernel if unique else q, vs, driver)
                if vs[0].descriptors:
                    self._launchers[q] = DescriptorLauncher(self._launchers[q], vs[0].descriptors)
            except MetadataError as exc:  # raised when that kernel is asked for: the rest loads
                self._launchers[q] = exc
        self._single: dict = {}

    @property
    def kernels(self) -> list[str]:
        """Each kernel's name: short where one file defines it, else "file.py:name"."""
        return sorted(k for kernel, qs in self._qualified.items() for k in ([kernel] if len(qs) == 1 else qs))

    def _find(self, name: str) -> Launcher:
        if ":" in name:
            file, _, kernel = name.rpartition(":")
            for q in (name, f"{file}.py:{kernel}"):
                if q in self._launchers:
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
        found = self._launchers[qualified]
        if isinstance(found, MetadataError):
            raise found
        return found

    def __getattr__(self, name):
        if self.__dict__.get("_launchers") is None or name.startswith("__"):
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
            match = [v for v in self.variants if v.variant == name]
            if not match:
                raise KeyError(f"no variant {name!r} in {self.lib_dir}; variants: "
                               f"{', '.join(v.variant for v in self.variants)}")
            single = Launcher(match[0].kernel, match, self._driver)
            self._single[name] = DescriptorLauncher(single, match[0].descriptors) if match[0].descriptors else single
        return self._single[name]

    def __repr__(self):
        return f"<ttbuild Library {self.lib_dir}: {len(self.variants)} variants of {self.kernels}>"


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
    """Read `<path>/lib/*.json` (or `<path>/*.json` when path is the lib folder itself).

    Nothing touches the GPU here: cubins load on the first launch of each variant, per CUDA
    context. `driver`: a Driver (see ttbuild.runtime.driver) to launch through; default CUDA.
    Raises MetadataError for a missing folder or a bad metadata file.
    """
    lib_dir = os.path.join(path, "lib")
    if not os.path.isdir(lib_dir) and os.path.isdir(path) and any(
            n.endswith(".json") for n in os.listdir(path)):
        lib_dir = path
    return Library(read_library(lib_dir), lib_dir, driver)
