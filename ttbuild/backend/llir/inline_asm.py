"""LLIR rule for `tt.elementwise_inline_asm`: the asm once per `packed_element` elements of each thread, as LLVM inline asm with the op's constraints; side-effecting unless `pure`.

As Triton's ElementwiseInlineAsmOpConversion (lib/Conversion/TritonGPUToLLVM/
ElementwiseOpToLLVM.cpp): consecutive elements of a thread form a pack; an operand or result
narrower than 32 bits travels as vectors filling 32-bit registers (4 x i8, 2 x f16), wider
ones one register per element; several results come back as one struct. A scalar op (no
tensor operand or result: the PDL calls) runs once per thread.
"""

from __future__ import annotations

from llvmlite import ir
from mlir import ir as mir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import TensorVal, layout_of, llvm_type
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _per_reg(t: ir.Type, pack: int) -> int:
    """Elements of type `t` that share one 32-bit register in a pack (Triton's packOperands)."""
    bits = t.width if isinstance(t, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}.get(str(t), 64)
    return min(32 // bits if bits < 32 else 1, pack)


@rule(TT.ELEMENTWISE_INLINE_ASM)
def elementwise_inline_asm(ctx, op, *operands):
    props = mu.props(op)
    pack = mu.int_attr(props["packed_element"])
    asm = mir.StringAttr(props["asm_string"]).value
    constraints = mir.StringAttr(props["constraints"]).value
    pure = mir.BoolAttr(props["pure"]).value
    b = ctx.builder
    rtypes = [llvm_type(mu.elem_str(r.type)) for r in op.results]
    tensors = [o for o in operands if isinstance(o, TensorVal)]
    n = len(tensors[0].elems) if tensors else 1
    if tensors and n % pack:
        raise NotSupportedYet(f"tt.elementwise_inline_asm with packed_element = {pack} on {n} elements "
                              "per thread (the pack must divide them)", None, "llir")
    # the asm's result registers: per result, pack / per-register of them (vectors below 32 bits)
    slots = []
    for t in rtypes:
        k = _per_reg(t, pack)
        slots += [(ir.VectorType(t, k) if k > 1 else t, k)] * (pack // k)
    ret = slots[0][0] if len(slots) == 1 else ir.LiteralStructType([t for t, _ in slots])
    per_result = [[] for _ in rtypes]
    for start in range(0, n, pack):
        args = []
        for o in operands:
            if not isinstance(o, TensorVal):
                args.append(o)
                continue
            elems = o.elems[start:start + pack]
            k = _per_reg(elems[0].type, pack)
            for j in range(0, pack, k):
                if k == 1:
                    args.append(elems[j])
                    continue
                vec = ir.Constant(ir.VectorType(elems[0].type, k), ir.Undefined)
                for m in range(k):
                    vec = b.insert_element(vec, elems[j + m], ir.Constant(ir.IntType(32), m))
                args.append(vec)
        out = b.asm(ir.FunctionType(ret, [a.type for a in args]), asm, constraints, args, side_effect=not pure)
        values = [out] if len(slots) == 1 else [b.extract_value(out, i) for i in range(len(slots))]
        i = 0
        for r in range(len(rtypes)):
            got = 0
            while got < pack:
                v, k = values[i], slots[i][1]
                i += 1
                if k == 1:
                    per_result[r].append(v)
                else:
                    per_result[r] += [b.extract_element(v, ir.Constant(ir.IntType(32), m)) for m in range(k)]
                got += k
    results = []
    for r, elems in zip(op.results, per_result):
        shape = mu.shape_of(r.type)
        results.append(TensorVal(elems, layout_of(r), shape) if shape else elems[0])
    return results[0] if len(results) == 1 else results
