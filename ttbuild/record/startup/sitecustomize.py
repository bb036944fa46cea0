"""Startup hook `ttbuild record` / `ttbuild serve` put on PYTHONPATH: TTBUILD_RECORD=DIR records, TTBUILD_SERVE=ARTIFACTS serves.

Recording starts once the process (or a child) imports triton; serving uses the miss policy
$TTBUILD_SERVE_MISS (default error).
"""

import importlib.machinery
import os
import sys


def _start():
    library = os.environ.get("TTBUILD_SERVE")
    if library:
        from ttbuild.runtime.serve import serve

        serve(library, miss=os.environ.get("TTBUILD_SERVE_MISS", "error"), facade=os.environ.get("TTBUILD_SERVE_FACADE") == "1")
    directory = os.environ.get("TTBUILD_RECORD")
    if directory:
        from ttbuild.postimport import when_imported

        def on_triton(_module):
            from ttbuild.record.hook import install

            install(directory)

        when_imported("triton", on_triton)


def _chain():
    """Run the sitecustomize this one shadows, if any further down sys.path."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _start()
except Exception as exc:  # never break the recorded program's start
    print(f"ttbuild record: startup hook failed: {type(exc).__name__}: {exc}", file=sys.stderr)
import importlib.util  # noqa: E402  (after _start: the chained hook may need it)

_chain()
