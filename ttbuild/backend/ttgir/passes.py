"""The TTGIR pass driver: runs the transforms in order (layout assignment, pipelining) and the shared-memory allocation, and is the stage's one choke point for error locations.

A CompilationError a pass raises without a location gets the node id of the kernel function
(`tt.func`, whose `loc("n0")` is its `def` line); any other exception becomes a CompilationError
"internal error while running <pass>" there, with the original as `__cause__`
(ttbuild.backend.diagnostics). A pass that knows the failing op attaches that op's node id
itself, and the driver keeps it.
"""

from __future__ import annotations

from ttbuild.backend.analysis.allocation import allocate
from ttbuild.backend.diagnostics import at_op, internal_error
from ttbuild.backend.ttgir.coalesce import assign
from ttbuild.backend.ttgir.pipeline import pipeline
from ttbuild.errors import CompilationError, TTBuildError

# (name, fn(module, num_warps)): in the order the ttgir stage runs them.
PASSES = (
    ("coalesce", lambda module, num_warps: assign(module, num_warps)),
    ("pipeline", lambda module, num_warps: pipeline(module)),
)


def _kernel(module):
    """The module's first tt.func (ttbuild compiles one kernel per module), else the module."""
    for op in module.body.operations:
        if op.operation.name == "tt.func":
            return op
    return module.operation


def _run(name: str, fn, module, num_warps: int):
    try:
        return fn(module, num_warps)
    except CompilationError as err:
        raise at_op(err, _kernel(module), "ttgir")
    except TTBuildError:
        raise
    except Exception as exc:
        raise internal_error(exc, _kernel(module), "ttgir", f"running {name}") from exc


def run_passes(module, num_warps: int) -> int:
    """Run PASSES on `module` (a TTIR module being turned into TTGIR, in place), then place its
    shared memory; returns `ttg.shared` in bytes (ttbuild.backend.analysis.allocation.allocate).
    Raises CompilationError (with a node id) for anything that goes wrong."""
    for name, fn in PASSES:
        _run(name, fn, module, num_warps)
    return _run("allocation", allocate, module, num_warps)
