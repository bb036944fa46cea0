"""Loads prebuilt kernels from `artifacts/lib` and launches them like Triton: `load("artifacts").add_kernel[grid](x, y, out, n)`.

Imports only the standard library at import time; `cuda.bindings` is imported on the first
launch (through `ttbuild.runtime.driver.default_driver`). Never imports the compiler.
"""

from __future__ import annotations

import os

from .driver import CtypesCudaDriver, CudaDriver, CudaError, Driver, default_driver
from .interop import InteropError
from .launcher import Launcher, LaunchError
from .metadata import MetadataError, Param, Variant, read_library
from .select import NoMatchingVariant
from .torchop import TorchOpError, torch_op

__all__ = ["load", "Library", "Launcher", "Variant", "Param", "Driver", "CudaDriver", "CtypesCudaDriver",
           "CudaError", "MetadataError", "NoMatchingVariant", "LaunchError", "InteropError", "TorchOpError",
           "default_driver", "torch_op"]


class Library:
    """The kernels of one artifacts directory: `lib.<kernel>` is a Launcher over its variants
    (library order = JSON file names sorted), `lib.variant(name)` a Launcher over one variant."""

    def __init__(self, variants: list[Variant], lib_dir: str, driver=None):
        self.lib_dir = lib_dir
        self.variants = list(variants)
        self._driver = driver
        by_kernel: dict = {}
        for v in self.variants:
            by_kernel.setdefault(v.kernel, []).append(v)
        self._launchers = {k: Launcher(k, vs, driver) for k, vs in by_kernel.items()}
        self._single: dict = {}

    @property
    def kernels(self) -> list[str]:
        return sorted(self._launchers)

    def __getattr__(self, name):
        launchers = self.__dict__.get("_launchers")
        if launchers is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            return launchers[name]
        except KeyError:
            raise AttributeError(
                f"no kernel {name!r} in {self.lib_dir}; kernels: {', '.join(self.kernels) or 'none'}"
            ) from None

    def __getitem__(self, name) -> Launcher:
        return getattr(self, name)

    def __contains__(self, name) -> bool:
        return name in self._launchers

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._launchers))

    def variant(self, name: str) -> Launcher:
        """A Launcher restricted to the variant named `name` (its JSON's "variant")."""
        if name not in self._single:
            match = [v for v in self.variants if v.variant == name]
            if not match:
                raise KeyError(f"no variant {name!r} in {self.lib_dir}; variants: "
                               f"{', '.join(v.variant for v in self.variants)}")
            self._single[name] = Launcher(match[0].kernel, match, self._driver)
        return self._single[name]

    def __repr__(self):
        return f"<ttbuild Library {self.lib_dir}: {len(self.variants)} variants of {self.kernels}>"


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
