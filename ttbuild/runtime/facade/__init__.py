"""Opt-in minimal `triton` for runtime-only installs: `enable()` puts pkg/ on sys.path, only when no real Triton is installed.

pkg/ is a `triton` package of jit, autotune, heuristics, Config, cdiv, next_power_of_2, constexpr_function, the
language's dtypes and constexpr.
"""

from __future__ import annotations

import importlib.util
import os
import sys

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkg")


def real_triton_installed() -> bool:
    """Whether an importable `triton` other than the façade exists."""
    mod = sys.modules.get("triton")
    if mod is not None:
        return not getattr(mod, "__ttbuild_facade__", False)
    rest = [p for p in sys.path if os.path.abspath(p or ".") != PKG]
    return importlib.machinery.PathFinder.find_spec("triton", rest) is not None


def enable() -> bool:
    """Make `import triton` load the façade; returns False (and changes nothing) when a real
    Triton is installed, so the façade never shadows one."""
    if real_triton_installed():
        return False
    if PKG not in sys.path:
        sys.path.append(PKG)  # last: anything installed later still wins
    return True


__all__ = ["enable", "real_triton_installed", "PKG"]
del importlib
import importlib.machinery  # noqa: E402  (real_triton_installed needs the submodule loaded)
