"""Where backend errors get their source location: one choke point per stage attaches the failing op's node id.

The choke points are the LLIR op loop and the TTGIR pass driver: they attach the failing op's node
id to any CompilationError, and turn an unexpected exception into an "internal error"
CompilationError at that op.

Triton's model is `CodeGenerator.visit` in the frontend: every error raised while visiting a node
leaves with that node's position. Here the position is the op's `loc("n17")` node id, set as
`CompilationError.node_id`; the build layer maps it to file:line:col with a caret through the
parse stage's loc table (ttbuild.locs.locate, docs/CONTRACTS.md "IR locations").
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.errors import CompilationError


def node_id(op) -> int | None:
    """The AST node id of an op's `loc("n17")` location (17), or None."""
    name = mu.loc_name(op)
    return int(name[1:]) if name else None


def at_op(err: CompilationError, op, stage: str) -> CompilationError:
    """`err` with the node id of `op` unless it already points somewhere (the innermost op
    wins: nested blocks run their own choke point first) and its stage when it has none."""
    if err.node_id is None and err.loc is None:
        err.node_id = node_id(op)
    if err.stage is None:
        err.stage = stage
        err.args = (err.render(),)
    return err


def internal_error(exc: BaseException, op, stage: str, what: str) -> CompilationError:
    """A CompilationError for an exception no rule meant to raise (a compiler bug), pointing
    at `op`: "internal error while <what>: <Type>: <text>". The caller raises it `from exc`, so
    the original traceback stays in `__cause__` for a developer."""
    err = CompilationError(f"internal error while {what}: {type(exc).__name__}: {exc}", stage=stage)
    return at_op(err, op, stage)

