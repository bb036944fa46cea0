"""Startup hook `ttbuild record` / `ttbuild serve` put on PYTHONPATH: TTBUILD_RECORD=DIR records, TTBUILD_SERVE=ARTIFACTS serves.

Recording starts once the process (or a child) imports triton; serving uses the miss policy
$TTBUILD_SERVE_MISS (default error).
"""

import importlib.machinery
import os
import sys


def _chain():
    """Run the sitecustomize this one shadows, if any further down sys.path."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    from ttbuild.record.envstart import start_from_environment

    start_from_environment()
except Exception as exc:  # never break the recorded program's start
    print(f"ttbuild record: startup hook failed: {type(exc).__name__}: {exc}", file=sys.stderr)
import importlib.util  # noqa: E402  (after the start: the chained hook may need it)

_chain()
