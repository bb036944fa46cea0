"""LLIR rule for `tt.elementwise_inline_asm`: the asm once per element (pack = 1), as LLVM inline asm with the op's constraints; side-effecting unless `pure`.

Triton's ElementwiseInlineAsmOpConversion (lib/Conversion/TritonGPUToLLVM/ElementwiseOpToLLVM.cpp)
does the same for pack = 1: the operands' elements at one index are the asm's inputs, its
outputs the results' elements there. A scalar op (no tensor operand or result: the PDL calls)
runs once per thread.
"""

from __future__ import annotations

from llvmlite import ir
from mlir import ir as mir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.llir.context import TensorVal, layout_of, llvm_type
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


@rule("tt.elementwise_inline_asm")
def elementwise_inline_asm(ctx, op, *operands):
    props = mu.props(op)
    if mu.int_attr(props["packed_element"]) != 1:
        raise NotSupportedYet("tt.elementwise_inline_asm with packed_element > 1", None, "llir")
    asm = mir.StringAttr(props["asm_string"]).value
    constraints = mir.StringAttr(props["constraints"]).value
    pure = mir.BoolAttr(props["pure"]).value
    b = ctx.builder
    rtypes = [llvm_type(mu.elem_str(r.type)) for r in op.results]
    ret = rtypes[0] if len(rtypes) == 1 else ir.LiteralStructType(rtypes)
    tensors = [o for o in operands if isinstance(o, TensorVal)]
    n = len(tensors[0].elems) if tensors else 1
    per_result = [[] for _ in rtypes]
    for k in range(n):
        args = [o.elems[k] if isinstance(o, TensorVal) else o for o in operands]
        out = b.asm(ir.FunctionType(ret, [a.type for a in args]), asm, constraints, args, side_effect=not pure)
        for i in range(len(rtypes)):
            per_result[i].append(out if len(rtypes) == 1 else b.extract_value(out, i))
    results = []
    for r, elems in zip(op.results, per_result):
        shape = mu.shape_of(r.type)
        results.append(TensorVal(elems, layout_of(r), shape) if shape else elems[0])
    return results[0] if len(results) == 1 else results
