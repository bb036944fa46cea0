"""Stage ttgir: TTIR -> TTGIR, giving every tensor a `#ttg.blocked`/`#ttg.slice` encoding (converts where needed), tt.dot tensor-core encodings (`#ttg.nvidia_mma` v2 with `#ttg.dot_op` / `#ttg.swizzled_shared` operands, or v3 with `ttng.warp_group_dot` on `#ttg.nvmma_shared` tiles), pipelining `tl.range(num_stages=S)` loops, and the module its ttg attributes."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 30  # 30: a stored vector that its layout replicates (attention forward's rows of M) is re-laid in the 1-D blocked layout, computed on its inputs' layout and converted once, as Triton; rank-3 FMA dots get their operand layouts; 29: a multi-reader ring only where its contiguous dimension is the load's; 28: a load several wgmma operands read, some through tt.trans, is pipelined once, the transposed readers taking ttg.memdesc_trans views of its ring slot (attention backward's qT and dO); the loads of a dot loop that feed a dot through other ops (M, Delta) are pipelined, as Triton's AssignLatencies; 27: a #mma -> #blocked conversion whose slice ends narrower (an epilogue divide or activation then .to(fp16)) moves past the narrowing, as Triton; 26: tt.descriptor_reduce as ttng.async_tma_reduce of a shared tile, tensormaps made in the kernel take the integer signedness of their descriptor (.u32 / .u64); 25: 25: a subtiled epilogue (halves of one accumulator by reshape, permute, split) TMA-stores sub-tiles of one shared tile; 24: descriptor stores as TMA stores (a shared tile written from the value's own layout, async_tma_copy_local_to_global, async_tma_store_wait); 23: TMA for host descriptors on sm_90 (tt.descriptor_load -> async_tma_copy_global_to_local rings with mbarriers, tma_lowering, the ttb.tma record), mbarriers 8-byte and unswizzled TMA buffers 128-byte aligned, buffers read by a local_load into registers live until that load; 22: 22: fp16-accumulator dots on wgmma (.f16 D, packed pairs); 21: broadcasts split by operand group (a group broadcast to several shapes no longer ties their tiles); 20: chained dots on wgmma (attention: P as the RS operand in registers, the P.V group kept in flight and tied through the next QK wait), the proxy fence right after each register-written tile, fp8 wgmma with Triton's maxNumImpreciseAcc default (2**30); 19: wgmma on sm_90 (ttng.warp_group_dot on #ttg.nvmma_shared tiles, #ttg.nvidia_mma v3, S-slot rings with one group in flight; option disable_mma_v3), buffers above only the scratch live with them; 18: the 16-bit mma accumulator converts through packed, padded rows (convert_bytes); 17: a dot operand tt.trans(tt.load) is loaded through transposed pointers (transpose_loads), pipelined; 16: tt.join / tt.split get the layouts Triton infers for each other (register renamings); 15: tl.multiple_of / max_contiguous / max_constancy hints read by the axis analysis (as Triton); 9: tensor cores (mma.sync, dot pipelining); 10-14: softmax on the mma layout, P as an mma -> dot_op register conversion (remove_layout_conversions), splat constants and multi-shape broadcasts no longer tie layout groups (coalesce), vector conversions of dot kernels rebuilt, liveness-based shared memory for register-staged operands, loop-carried and round-trip slices carried in #mma; 14: atomics reserve shared memory only when their old values cross threads


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
    from ttbuild.backend.ttgir.passes import run_passes
    from ttbuild.errors import CompilationError
    from ttbuild.options import stage_options

    opts = stage_options("ttgir", options)  # absent options take the one set of defaults
    num_warps, num_ctas, target = opts.num_warps, opts.num_ctas, opts.target
    if num_ctas != 1:
        raise CompilationError(f"num_ctas={num_ctas}: only 1 CTA per program is supported yet", stage="ttgir")
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        module = mu.parse_module(inputs["ttir"], ctx, "ttir")
        shared = run_passes(module, opts)  # coalesce, accelerate_matmul, pipeline, then allocation
        limit = opts.target_info.max_shared_bytes
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
