"""ttbuild's façade of `triton` for runtime-only installs (ttbuild.runtime.facade): kernels defined with it launch the prebuilt variants that ttbuild.runtime.serve serves; nothing here compiles."""

from . import knobs, language
from .runtime import Autotuner, Config, Heuristics, JITFunction, KernelInterface, autotune, heuristics, jit

__ttbuild_facade__ = True
__version__ = "3.6.0+ttbuild.facade"


def cdiv(x, y):
    """ceil(x / y) for integers, as triton.cdiv."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1), as triton.next_power_of_2."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def constexpr_function(fn):
    """Host-side: the function itself (its constexpr use happens only when compiling)."""
    return fn


__all__ = ["knobs", "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "constexpr_function", "language",
           "JITFunction", "Autotuner", "Heuristics", "KernelInterface"]
