"""Stage ttgir: TTIR -> TTGIR: layout encodings on every tensor, tensor-core encodings for tt.dot, pipelined loops, the module's ttg attributes.

Every tensor gets a `#ttg.blocked`/`#ttg.slice` encoding (converts where needed); tt.dot gets `#ttg.nvidia_mma` v2 with
`#ttg.dot_op` / `#ttg.swizzled_shared` operands, or v3 with `ttng.warp_group_dot` on `#ttg.nvmma_shared` tiles;
`tl.range(num_stages=S)` loops are pipelined.
"""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 47  # the producer is always a warpgroup: blocks of whole warpgroups (a 5-warp block ran 0.78x)


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ttir": generic-form TTIR}; options: num_warps, num_ctas, num_stages, target
    ("cuda:90"). Returns {"ttgir": generic-form TTGIR} (docs/CONTRACTS.md, "TTIR and TTGIR").

    Every tt.dot gets mma.sync encodings (ttbuild.backend.ttgir.accelerate_matmul) or, where no mma
    shape applies (fp64, fp32 with input_precision="ieee"), FMA operand encodings.
    Loops that carry `tt.num_stages` (from `tl.range(..., num_stages=S)`) get their global loads
    pipelined through cp.async (ttbuild.backend.ttgir.pipeline). The `num_stages` option is, as in
    Triton, the default for loops holding a `tt.dot`: their operand loads go through cp.async
    into (num_stages - 1)-slot swizzled rings that the dot operands' local_loads read.

    Raises CompilationError when the TTIR does not parse, an option is invalid
    (`ttbuild.options.Options`) or num_ctas != 1 (not supported yet).
    """
    from ttbuild.backend import mlir_util as mu
    from ttbuild.backend.analysis.allocation import allocate
    from ttbuild.backend.analysis.fma_staging import turn_off
    from ttbuild.backend.ttgir.passes import run_passes
    from ttbuild.errors import CompilationError
    from ttbuild.stages import declared_options

    opts = declared_options("ttgir", options)  # absent options take the one set of defaults
    num_warps, num_ctas, target = opts.num_warps, opts.num_ctas, opts.target
    if num_ctas != 1:
        raise CompilationError(f"num_ctas={num_ctas}: only 1 CTA per program is supported yet", stage="ttgir")
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        module = mu.parse_module(inputs["ttir"], ctx, "ttir")
        shared = run_passes(module, opts)  # coalesce, accelerate_matmul, pipeline, then allocation
        limit = opts.target_info.max_shared_bytes
        if shared > limit and turn_off(module):  # FMA operand tiles one at a time (analysis.fma_staging)
            shared = allocate(module, num_warps)
        if shared > limit:  # Triton's OutOfResources text, at build time rather than at load
            from ttbuild.backend.diagnostics import at_op
            err = CompilationError(f"out of resource: shared memory, Required: {shared}, Hardware limit: {limit} "
                                   f"({target}). Reducing block sizes or `num_stages` may help.", stage="ttgir")
            func = next((op for op in module.body.operations if op.operation.name == "tt.func"), None)
            raise at_op(err, func, "ttgir") if func is not None else err
        i32 = mu.ir.IntegerType.get_signless(32)
        attrs = module.operation.attributes
        attrs["ttg.num-ctas"] = mu.ir.IntegerAttr.get(i32, num_ctas)
        attrs["ttg.num-warps"] = mu.ir.IntegerAttr.get(i32, num_warps)
        attrs["ttg.shared"] = mu.ir.IntegerAttr.get(i32, shared)
        attrs["ttg.target"] = mu.ir.StringAttr.get(target)
        attrs["ttg.threads-per-warp"] = mu.ir.IntegerAttr.get(i32, 32)
        return {"ttgir": mu.print_module(module)}
