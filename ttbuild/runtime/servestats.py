"""`ttbuild serve --summary` / TTBUILD_SERVE_SUMMARY=1: at exit, one line on stderr: launches served, misses, and the kernels Triton compiled in the process.

The compile count is Triton 3.6's `knobs.compilation.listener` (compiler/compiler.py `compile`
calls it once per kernel it compiles or loads from its cache, `cache_hit` telling which; an
existing listener is chained). It is the in-process check of a zero-JIT run; Triton's cache
directory staying empty is the external one.
"""

from __future__ import annotations

import atexit
import sys

SUMMARY_ENV = "TTBUILD_SERVE_SUMMARY"
_registered: list = []


def enable(server) -> None:
    """Count Triton's compiles once Triton is imported and print `summary_line` at exit."""
    from ..postimport import when_imported

    server.compiles = None  # [compiled, loaded from Triton's cache] once a real Triton is imported
    when_imported("triton", lambda triton: count_compiles(server, triton))
    if not _registered:
        _registered.append(True)
        atexit.register(_print_active)


def count_compiles(server, triton) -> None:
    """Chain a compilation listener counting into `server.compiles` (real Triton only)."""
    knobs = sys.modules.get(triton.__name__ + ".knobs") or getattr(triton, "knobs", None)
    compilation = getattr(knobs, "compilation", None)
    if getattr(triton, "__ttbuild_facade__", False) or compilation is None:
        return
    counts = server.compiles = [0, 0]
    previous = compilation.listener

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        counts[1 if cache_hit else 0] += 1
        if previous is not None:
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)

    compilation.listener = listener


def summary_line(server) -> str:
    """'ttbuild serve: N launches served, M missed (policy P); Triton compiled C kernels (H from its cache)'."""
    served = server.calls - (server.misses - server.warmup_misses)
    line = f"ttbuild serve: {served} launches served, {server.misses} missed (policy {server.policy})"
    compiles = getattr(server, "compiles", None)
    if compiles is None:
        return line + "; Triton not loaded (none compiled)"
    return line + f"; Triton compiled {compiles[0]} kernels ({compiles[1]} more from its cache)"


def _print_active() -> None:
    from .serve import _active

    if _active and getattr(_active[0], "compiles", False) is not False:
        print(summary_line(_active[0]), file=sys.stderr, flush=True)
