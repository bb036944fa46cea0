"""Stage ttgir: TTIR -> TTGIR, giving every tensor a `#ttg.blocked`/`#ttg.slice` encoding (converts where needed), tt.dot tensor-core encodings (`#ttg.nvidia_mma` v2, `#ttg.dot_op`, `#ttg.swizzled_shared`), pipelining `tl.range(num_stages=S)` loops, and the module its ttg attributes."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 8


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ttir": generic-form TTIR}; options: num_warps, num_ctas, num_stages, target
    ("cuda:90"). Returns {"ttgir": generic-form TTGIR} (docs/CONTRACTS.md, "TTIR and TTGIR").

    Every tt.dot gets mma.sync encodings (ttbuild.backend.accelerate_matmul) or, where no mma
    shape applies (fp64, fp32 with input_precision="ieee"), FMA operand encodings.
    Loops that carry `tt.num_stages` (from `tl.range(..., num_stages=S)`) get their global loads
    pipelined through cp.async (ttbuild.backend.pipeline). The `num_stages` option is, as in
    Triton, the default for loops holding a `tt.dot`: their operand loads go through cp.async
    into (num_stages - 1)-slot swizzled rings that the dot operands' local_loads read.

    Raises CompilationError when the TTIR does not parse or num_ctas != 1 (not supported yet).
    """
    from ttbuild.backend import mlir_util as mu
    from ttbuild.backend.accelerate_matmul import accelerate
    from ttbuild.backend.coalesce import assign
    from ttbuild.backend.pipeline import pipeline
    from ttbuild.backend.smem import allocate
    from ttbuild.errors import CompilationError

    num_warps = int(options.get("num_warps", 4))
    num_ctas = int(options.get("num_ctas", 1))
    target = str(options.get("target", "cuda:90"))
    if num_warps < 1 or num_warps & (num_warps - 1):
        raise CompilationError(f"num_warps must be a power of two, got {num_warps}", stage="ttgir")
    if num_ctas != 1:
        raise CompilationError(f"num_ctas={num_ctas}: only 1 CTA per program is supported yet", stage="ttgir")
    ctx = mu.new_context()
    with ctx, mu.ir.Location.unknown(ctx):
        module = mu.parse_module(inputs["ttir"], ctx, "ttir")
        assign(module, num_warps)
        accelerate(module, num_warps, int(target.partition(":")[2] or 90))
        pipeline(module, int(options.get("num_stages", 3)))
        i32 = mu.ir.IntegerType.get_signless(32)
        attrs = module.operation.attributes
        attrs["ttg.num-ctas"] = mu.ir.IntegerAttr.get(i32, num_ctas)
        attrs["ttg.num-warps"] = mu.ir.IntegerAttr.get(i32, num_warps)
        attrs["ttg.shared"] = mu.ir.IntegerAttr.get(i32, allocate(module, num_warps))
        attrs["ttg.target"] = mu.ir.StringAttr.get(target)
        attrs["ttg.threads-per-warp"] = mu.ir.IntegerAttr.get(i32, 32)
        return {"ttgir": mu.print_module(module)}
