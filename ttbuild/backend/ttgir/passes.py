"""The TTGIR pass driver: runs PASSES in order, then the shared-memory allocation; the stage's one choke point for error locations.

PASSES: loops over-full of accumulators split by rows, dot-operand loads transposed, layout assignment, tensor-core layouts, conversions removed,
warp specialization of marked TMA loops, pipelining, TMA lowering, loops fenced in kernels of several accumulation phases.

A CompilationError a pass raises without a location gets the node id of the kernel function
(`tt.func`, whose `loc("n0")` is its `def` line); any other exception becomes a CompilationError
"internal error while running <pass>" there, with the original as `__cause__`
(ttbuild.backend.diagnostics). A pass that knows the failing op attaches that op's node id
itself, and the driver keeps it.
"""

from __future__ import annotations

from ttbuild.backend.analysis.allocation import allocate
from ttbuild.backend.diagnostics import at_op, internal_error
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.ttgir.accelerate_matmul import accelerate
from ttbuild.backend.ttgir.coalesce import assign
from ttbuild.backend.ttgir.loop_fences import fence_loops
from ttbuild.backend.ttgir.pipeline import pipeline
from ttbuild.backend.ttgir.remove_layout_conversions import remove_layout_conversions
from ttbuild.backend.ttgir.sink_operand_tiles import sink_operand_tiles
from ttbuild.backend.ttgir.split_rows import split_rows
from ttbuild.backend.ttgir.tma_lowering import lower_tma
from ttbuild.backend.ttgir.transpose_loads import transpose_loads
from ttbuild.backend.ttgir.warp_specialize import warp_specialize
from ttbuild.errors import CompilationError, TTBuildError
from ttbuild.options import Options

# (name, fn(module, options)): in the order the ttgir stage runs them (Triton's make_ttgir:
# coalesce, accelerate_matmul, remove_layout_conversions, ..., pipeline, tma_lowering; split_rows and transpose_loads are ours).
PASSES = (
    ("split_rows", lambda module, o: split_rows(module, o.num_warps)),
    ("transpose_loads", lambda module, o: transpose_loads(module)),
    ("coalesce", lambda module, o: assign(module, o.num_warps)),
    ("accelerate_matmul", lambda module, o: accelerate(module, o.num_warps, o.target_info.capability,
                                                       wgmma=not o.disable_mma_v3)),
    ("remove_layout_conversions", lambda module, o: remove_layout_conversions(module, o.num_warps)),
    ("warp_specialize", lambda module, o: warp_specialize(module, o.num_stages, o.num_warps,
                                                          o.target_info.capability, not o.disable_mma_v3)),
    ("pipeline", lambda module, o: pipeline(module, o.num_stages, o.num_warps)),
    ("sink_operand_tiles", lambda module, o: sink_operand_tiles(module)),
    ("tma_lowering", lambda module, o: lower_tma(module, o.num_stages)),
    ("loop_fences", lambda module, o: fence_loops(module, o.num_warps)),
)


def _kernel(module):
    """The module's first tt.func (ttbuild compiles one kernel per module), else the module."""
    for op in module.body.operations:
        if op.operation.name == TT.FUNC:
            return op
    return module.operation


def _run(name: str, fn, module, arg):
    try:
        return fn(module, arg)
    except CompilationError as err:
        raise at_op(err, _kernel(module), "ttgir")  # noqa: B904  (re-raises err itself, now located)
    except TTBuildError:
        raise
    except Exception as exc:
        raise internal_error(exc, _kernel(module), "ttgir", f"running {name}") from exc


def run_passes(module, options: Options) -> int:
    """Run PASSES on `module` (a TTIR module being turned into TTGIR, in place) with the
    variant's options (num_warps, num_stages, target), then place its shared memory; returns
    `ttg.shared` in bytes (ttbuild.backend.analysis.allocation.allocate). Raises
    CompilationError (with a node id) for anything that goes wrong."""
    for name, fn in PASSES:
        _run(name, fn, module, options)
    return _run("allocation", allocate, module, options.num_warps)
