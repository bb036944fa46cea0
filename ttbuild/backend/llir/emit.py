"""Drives TTGIR -> LLVM IR: one llvmlite function per tt.func, each op lowered by its registry rule."""

from __future__ import annotations

import gc

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import AxisAnalysis
from ttbuild.backend.diagnostics import at_op, internal_error
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.ir.optraits import DOT_OPS, TERMINATORS, walk
from ttbuild.backend.llir.context import GPTR, I32, Ctx, llvm_type
from ttbuild.backend.llir.control_flow import register_plan
from ttbuild.backend.llir.rules import RULES
from ttbuild.backend.nvptx import TRIPLE
from ttbuild.errors import CompilationError, NotSupportedYet, TTBuildError
from ttbuild.irattrs import module_attrs


def run_block(ctx: Ctx, block, args: list) -> list:
    """Lower the ops of an MLIR block with its arguments bound to `args`; returns the lowered
    operands of its terminator (scf.yield, tt.reduce.return, ...), or [] if it has none."""
    env = ctx.env
    for a, v in zip(block.arguments, args):
        env[a] = v
    for op in block.operations:
        opname = op.operation.name
        if opname in TERMINATORS:
            return [env[v] for v in op.operands]
        r = RULES.get(opname)
        if r is None:
            raise at_op(NotSupportedYet(opname, None, "llir"), op, "llir")
        # The choke point of the stage: whatever a rule raises leaves with this op's node id
        # (the build layer maps it to file:line:col), a non-deliberate error as "internal error".
        try:
            out = r(ctx, op, *(env[v] for v in op.operands))
        except CompilationError as err:
            raise at_op(err, op, "llir")  # noqa: B904  (re-raises err itself, now located)
        except TTBuildError:
            raise
        except Exception as exc:
            raise internal_error(exc, op, "llir", f"lowering {opname}") from exc
        results = list(op.results)
        if len(results) == 1:
            env[results[0]] = out
        elif results:
            env.update(zip(results, out))
    return []


def lower_function(module: ir.Module, func_op, num_warps: int, fp_fusion: bool,
                   global_scratch_size: int = 0, total_warps: int | None = None) -> ir.Function:
    """One kernel. `total_warps`: the warps launched when a `ttg.warp_specialize` op adds
    partitions to the kernel's `num_warps` (the module's `ttg.total-num-warps`). `global_scratch_size` > 0 (the module's `ttg.global_scratch_memory_size`): the
    kernel takes one more parameter after the tt.func's, `ptr addrspace(1)` `arg<N>` (N = the
    number of tt.func arguments), the base of the global scratch the runtime provides, of which
    each program owns `global_scratch_size` bytes (ttbuild.backend.llir.tensormap)."""
    p = mu.props(func_op)
    name = mu.ir.StringAttr(p["sym_name"]).value
    body = func_op.regions[0].blocks[0]
    params = [llvm_type(mu.elem_str(a.type)) for a in body.arguments]
    if global_scratch_size > 0:
        params.append(GPTR)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    fn.calling_convention = "ptx_kernel"
    fn.attributes.add("nounwind")
    for a, blk_arg in zip(fn.args, body.arguments):
        a.name = f"arg{blk_arg.arg_number}"
    scratch = None
    if global_scratch_size > 0:
        scratch = fn.args[len(body.arguments)]
        scratch.name = f"arg{len(body.arguments)}"
    # "entry" holds what every block may use (special registers, layout index math); code starts
    # in "start", so rules in loops can still add to the entry block.
    entry = fn.append_basic_block("entry")
    builder = ir.IRBuilder(fn.append_basic_block("start"))
    env = {blk_arg: a for blk_arg, a in zip(body.arguments, fn.args)}
    has_dot = any(op.name in DOT_OPS for op in walk(func_op))
    ctx = Ctx(builder, module, num_warps, AxisAnalysis(func_op), fp_fusion, env,
              lambda blk, args: run_block(ctx, blk, args), local_indices=has_dot,
              global_scratch=scratch, global_scratch_size=max(global_scratch_size, 0))
    run_block(ctx, body, list(fn.args))
    with builder.goto_block(entry):
        builder.branch(fn.basic_blocks[1])
    # maxntid: threads per CTA the kernel is compiled for (PTX ISA .maxntid; Triton uses reqntid).
    annotations = module.add_named_metadata("nvvm.annotations")
    # Kernels with tensor cores say reqntid, as Triton does: ptxas then budgets registers for
    # exactly that block size (a 64x64x32 w4 matmul: 230 -> 151 registers, no other change).
    ntid = "reqntidx" if has_dot else "maxntidx"
    total = total_warps or num_warps
    annotations.add(module.add_metadata([fn, ntid, ir.Constant(I32, 32 * total)]))
    # mma.sync tiles hold large accumulators: no cap, as Triton sets none (a w8 128x128 tile
    # spills under 128 registers). Partitions that move registers with setmaxnreg need the
    # CTA's share as the kernel's cap (PTX ISA 9.7.17.1: the block's registers are what
    # .maxnreg reserves; 168 for 384 threads, 128 for two CTAs of 256).
    cap = None if has_dot else max_registers(num_warps)
    plan = register_plan(num_warps, total)
    if plan is not None:
        cap = plan.cap
    if cap is not None:
        annotations.add(module.add_metadata([fn, "maxnreg", ir.Constant(I32, cap)]))
    return fn


def max_registers(num_warps: int) -> int | None:
    """Registers per thread for PTX `.maxnreg` (PTX ISA 11.4, performance-tuning directives), or
    None for no directive: room for two CTAs on an SM's 64K registers up to 8 warps (w1-w4:
    255, w8: 128), for three at 16 warps (40: Triton's own count for layer norm there), none
    from 32 warps.

    Why: without a register directive ptxas 13.0 keeps few loads in flight (layer norm at 4
    warps: 4 of its 8 16-byte loads per pass, 110 registers); with one it issues them all (8,
    128 registers) as it does for Triton's PTX. Measured on an H200 (benchmarks/RESULTS_backend.md):
    layer norm forward w4 0.82x -> 1.04x Triton, w8 1.02x -> 1.22x, backward dx w8 (166 -> 128
    registers, two CTAs per SM) 0.76x -> 0.96x, softmax unchanged. At 16 warps a cap of 64 let
    ptxas grow layer norm from 32 to 56 registers and halve the CTAs per SM (0.91x -> 0.81x);
    40 gives the 39 registers and 2/2/6 loads in flight of Triton's SASS (not measured yet).
    """
    return {1: 255, 2: 255, 4: 255, 8: 128, 16: 40}.get(num_warps)


def lower(ttgir: str | bytes, *, fp_fusion: bool = True) -> str:
    """TTGIR text -> unoptimized LLVM IR text (one kernel per tt.func). Raises CompilationError
    (parse errors, types) and NotSupportedYet (an op with no rule); every error raised while
    lowering an op carries that op's `node_id`, and an unexpected exception inside a rule
    becomes a CompilationError "internal error while lowering <op>" (cause: the original)."""
    # Python's cyclic collector off meanwhile: the llvmlite module (tens of thousands of objects
    # in reference cycles) lives until this returns, so collections while it grows find nothing
    # to free, promote it, and set off full collections (~100 ms each in a compiling process).
    # Three passes over seven library kernels to PTX: 229 -> 65 young and 20 -> 6 middle
    # collections a pass, 5 -> 2 full ones in all, GC time ~240 -> ~150 ms a pass (a loaded
    # machine); the module, garbage once this returns, goes in the next young collection.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _lower(ttgir, fp_fusion)
    finally:
        if enabled:
            gc.enable()


def _lower(ttgir: str | bytes, fp_fusion: bool) -> str:
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        mod = mu.parse_module(ttgir, ctx, "ttgir")
        attrs = module_attrs(ttgir)  # the one reader of module attributes (ttbuild.irattrs)
        if "ttg.num-warps" not in attrs:
            raise CompilationError("TTGIR module has no ttg.num-warps attribute (the ttgir stage sets it)", stage="llir")
        num_warps = int(attrs["ttg.num-warps"])
        if attrs.get("ttg.num-ctas", 1) != 1:  # absent: one CTA per program, as Triton reads it
            raise CompilationError("num-ctas > 1 is not supported yet", stage="llir")
        scratch = attrs.get("ttg.global_scratch_memory_size", 0)
        if not isinstance(scratch, int) or scratch < 0:
            raise CompilationError(f"ttg.global_scratch_memory_size = {scratch!r}: not a byte count", stage="llir")
        module = ir.Module(name="ttbuild")
        module.triple = TRIPLE
        # libdevice's __nvvm_reflect("__CUDA_FTZ") answers 1, as Triton sets it (llvm.set_nvvm_reflect_ftz):
        # its math then takes the same flush-to-zero paths and rounds bit for bit as Triton's.
        module.add_named_metadata("llvm.module.flags").add(
            module.add_metadata([ir.Constant(I32, 4), "nvvm-reflect-ftz", ir.Constant(I32, 1)]))
        for op in mod.body.operations:
            if op.operation.name != TT.FUNC:
                raise at_op(NotSupportedYet(op.operation.name, None, "llir"), op, "llir")
            # Errors outside any op's rule (arguments, analyses) point at the function.
            try:
                lower_function(module, op, num_warps, fp_fusion, scratch, attrs.get("ttg.total-num-warps"))
            except CompilationError as err:
                raise at_op(err, op, "llir")  # noqa: B904  (re-raises err itself, now located)
            except TTBuildError:
                raise
            except Exception as exc:
                raise internal_error(exc, op, "llir", "lowering the function") from exc
        return str(module)
