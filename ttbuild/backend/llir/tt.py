"""LLIR rules for Triton's structural ops: program ids, ranges, splats, pointer arithmetic, return."""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

_AXES = "xyz"


@rule(TT.GET_PROGRAM_ID)
def get_program_id(ctx, op):
    """`tt.get_program_id`: %ctaid along its axis."""
    return ctx.sreg(f"ctaid.{_AXES[mu.int_attr(mu.props(op)['axis'])]}")


@rule(TT.GET_NUM_PROGRAMS)
def get_num_programs(ctx, op):
    """tt.get_num_programs: %nctaid.x / .y / .z, the grid's size along the op's axis (i32)."""
    return ctx.sreg(f"nctaid.{_AXES[mu.int_attr(mu.props(op)['axis'])]}")


@rule(TT.MAKE_RANGE)
def make_range(ctx, op):
    """Element i of the range is start + i (Triton semantics: `tl.arange(start, end)`, i32)."""
    res = op.results[0]
    layout, shape = layout_of(res), mu.shape_of(res.type)
    start = mu.int_attr(mu.props(op)["start"])
    b = ctx.builder
    elems = [b.add(idx[0], ir.Constant(I32, start)) if start else idx[0]
             for idx in ctx.indices(layout, shape)]
    return TensorVal(elems, layout, shape)


@rule(TT.SPLAT)
def splat(ctx, op, src):
    """tt.splat: every element of the result's layout is the scalar `src` (no instruction)."""
    res = op.results[0]
    layout, shape = layout_of(res), mu.shape_of(res.type)
    return TensorVal([src] * layout.elems_per_thread(shape), layout, shape)


@rule(TT.ADDPTR)
def addptr(ctx, op, ptr, offset):
    """ptr + offset elements of the pointee type; i32 offsets are signed (Triton semantics)."""
    ety = llvm_type(mu.pointee(mu.elem_str(op.results[0].type)))
    b = ctx.builder

    def one(p, o):
        """getelementptr of one pointer `p` by `o` elements of the pointee type."""
        return b.gep(p, [o], source_etype=ety)

    if isinstance(ptr, TensorVal):
        return TensorVal([one(p, o) for p, o in zip(ptr.elems, offset.elems)], ptr.layout, ptr.shape)
    return one(ptr, offset)


@rule(TT.RETURN)
def ret(ctx, op, *values):
    """tt.return of a kernel: ret void."""
    ctx.builder.ret_void()
