"""Elementwise lowering shared by the arith, math and cast rules: apply a scalar emitter per element, reusing results over runs the axis analysis proves constant."""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.layout import constant_groups
from ttbuild.backend.llir.context import TensorVal, llvm_type
from ttbuild.registry import RuleSet


def result_type(op):
    """The LLVM type of one element of op's first result."""
    return llvm_type(mu.elem_str(op.results[0].type))


def map_elements(op, fn, *operands, ctx=None):
    """Apply fn(*scalars) per element (tensors) or once (scalars); splat scalars share one value.

    Where the axis analysis proves the result constant over aligned blocks, one element per
    block is computed and reused in every layout (Triton's maybeDeduplicate;
    ttbuild.backend.analysis.layout.constant_groups): e.g. `cols < N` with N % 16 == 0 costs
    one compare per 8 fp16 elements, not eight."""
    tensors = [x for x in operands if isinstance(x, TensorVal)]
    if not tensors:
        return fn(*operands)
    t0 = tensors[0]
    n = len(t0.elems)
    cols = [x.elems if isinstance(x, TensorVal) else [x] * n for x in operands]
    groups = None
    if ctx is not None and len(op.results) == 1:
        constancy = tuple(min(c, s) for c, s in zip(ctx.axis.info(op.results[0]).constancy, t0.shape))
        groups = constant_groups(t0.layout, tuple(t0.shape), constancy, 32 * ctx.num_warps)
    out = []
    for j, row in enumerate(zip(*cols)):
        out.append(out[groups[j]] if groups is not None and groups[j] != j else fn(*row))
    return TensorVal(out, t0.layout, t0.shape)


def elementwise(rules: RuleSet, names, make):
    """Add to `rules`, for each op name, the rule applying `make(ctx, op) -> fn(*scalars)` per
    element (map_elements)."""
    for name in names:
        def r(ctx, op, *operands, _make=make):
            return map_elements(op, _make(ctx, op), *operands, ctx=ctx)
        rules.rule(name)(r)
