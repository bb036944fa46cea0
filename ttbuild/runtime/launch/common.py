"""What every part of the launcher shares: its error and the bound on its caches."""

from __future__ import annotations

from ...errors import TTBuildError

# Bounds on the per-launcher caches (grid -> bound launch function, fast key -> launch state):
# a program that launches with ever-new grids or alignments must not grow without limit.
MAX_CACHED = 4096


class LaunchError(TTBuildError, TypeError):
    """A launch the runtime refuses before reaching the driver: bad grid, missing argument."""
