"""Drives TTGIR -> LLVM IR: one llvmlite function per tt.func, each op lowered by its registry rule."""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.axis import AxisAnalysis
from ttbuild.backend.llir import memory, rules_arith, rules_tt, rules_scf, rules_reduce, rules_misc, rules_atomic, rules_shape, rules_scan  # noqa: F401  (fill the registry)
from ttbuild.backend.llir.context import Ctx, I32, llvm_type
from ttbuild.backend.llir.registry import RULES
from ttbuild.backend.nvptx import TRIPLE
from ttbuild.errors import CompilationError, NotSupportedYet


def _module_int(module, name: str, default: int) -> int:
    attrs = module.operation.attributes
    return mu.int_attr(attrs[name]) if name in attrs else default


TERMINATORS = ("scf.yield", "tt.reduce.return", "tt.scan.return", "scf.condition")


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
            err = NotSupportedYet(opname, None, "llir")
            err.node = mu.loc_name(op)  # the build layer maps node ids to file:line:col
            raise err
        try:
            out = r(ctx, op, *(env[v] for v in op.operands))
        except NotSupportedYet as err:
            if getattr(err, "node", None) is None:
                err.node = mu.loc_name(op)
            raise
        results = list(op.results)
        if len(results) == 1:
            env[results[0]] = out
        elif results:
            env.update(zip(results, out))
    return []


def lower_function(module: ir.Module, func_op, num_warps: int, fp_fusion: bool) -> ir.Function:
    p = mu.props(func_op)
    name = mu.ir.StringAttr(p["sym_name"]).value
    body = func_op.regions[0].blocks[0]
    params = [llvm_type(mu.elem_str(a.type)) for a in body.arguments]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    fn.calling_convention = "ptx_kernel"
    fn.attributes.add("nounwind")
    for a, blk_arg in zip(fn.args, body.arguments):
        a.name = f"arg{blk_arg.arg_number}"
    # "entry" holds what every block may use (special registers, layout index math); code starts
    # in "start", so rules in loops can still add to the entry block.
    entry = fn.append_basic_block("entry")
    builder = ir.IRBuilder(fn.append_basic_block("start"))
    env = {blk_arg: a for blk_arg, a in zip(body.arguments, fn.args)}
    ctx = Ctx(builder, module, num_warps, AxisAnalysis(func_op), fp_fusion, env,
              lambda blk, args: run_block(ctx, blk, args))
    run_block(ctx, body, list(fn.args))
    with builder.goto_block(entry):
        builder.branch(fn.basic_blocks[1])
    # maxntid: threads per CTA the kernel is compiled for (PTX ISA .maxntid; Triton uses reqntid).
    md = module.add_metadata([fn, "maxntidx", ir.Constant(I32, 32 * num_warps)])
    module.add_named_metadata("nvvm.annotations").add(md)
    return fn


def lower(ttgir: str | bytes, *, fp_fusion: bool = True) -> str:
    """TTGIR text -> unoptimized LLVM IR text (one kernel per tt.func). Raises CompilationError
    (parse errors, types) and NotSupportedYet (an op with no rule; `.node` = its node id)."""
    ctx = mu.new_context()
    with ctx, mu.ir.Location.unknown(ctx):
        mod = mu.parse_module(ttgir, ctx, "ttgir")
        num_warps = _module_int(mod, "ttg.num-warps", 4)
        if _module_int(mod, "ttg.num-ctas", 1) != 1:
            raise CompilationError("num-ctas > 1 is not supported yet", stage="llir")
        module = ir.Module(name="ttbuild")
        module.triple = TRIPLE
        for op in mod.body.operations:
            if op.operation.name == "tt.func":
                lower_function(module, op, num_warps, fp_fusion)
            else:
                raise NotSupportedYet(op.operation.name, None, "llir")
        return str(module)
