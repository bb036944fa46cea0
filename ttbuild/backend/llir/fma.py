"""LLIR of `tt.dot` on the FMA path: per output element, a K-long chain of fused multiply-adds, k ascending.

Operands `#ttg.dot_op<{opIdx, parent = #blocked}>`, result #blocked (Triton's FMADotOpToLLVM).
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.encodings import Blocked, FmaOperand
from ttbuild.backend.llir.context import TensorVal
from ttbuild.errors import NotSupportedYet

_FLOAT = {"f64": "f64", "f32": "f32", "f16": "f16", "bf16": "bf16"}


def fma_dot(ctx, op, a: TensorVal, b_: TensorVal, c: TensorVal) -> TensorVal:
    """D[..., m, n] = C[..., m, n] + sum_k A[..., m, k] B[..., k, n] (rank 2, or 3 with a leading
    batch dimension): floats through llvm.fmuladd in the
    accumulator's type (operands widened), integers as mul + add."""
    b = ctx.builder
    la, lb, lc = a.layout, b_.layout, c.layout
    if not (isinstance(la, FmaOperand) and isinstance(lb, FmaOperand) and isinstance(lc, Blocked)):
        raise NotSupportedYet(f"tt.dot with operand layouts {type(la).__name__}/{type(lb).__name__}", None, "llir")
    ec = mu.elem_str(op.operands[2].type)
    K = a.shape[-1]
    am = {o: i for i, o in enumerate(la.local_offsets(a.shape))}
    bn = {o: i for i, o in enumerate(lb.local_offsets(b_.shape))}
    ct = c.elems[0].type
    if ec in _FLOAT:
        fn = ctx.intrinsic(f"llvm.fmuladd.{_FLOAT[ec]}", ct, [ct, ct, ct])

        def widen(x):
            """A float operand widened to the accumulator's type (fpext), as-is when equal."""
            return x if x.type == ct else b.fpext(x, ct)

        def step(acc, x, y):
            """acc + x * y by llvm.fmuladd (Triton's FMA dot)."""
            return b.call(fn, [widen(x), widen(y), acc])
    else:
        def widen(x):
            """An integer operand sign-extended to the accumulator's type, as-is when equal."""
            return x if x.type == ct else b.sext(x, ct)

        def step(acc, x, y):
            """acc + x * y in integers (mul, add)."""
            return b.add(acc, b.mul(widen(x), widen(y)))
    out = []
    for j, off in enumerate(lc.local_offsets(c.shape)):
        *batch, m, n = off
        acc = c.elems[j]
        for k in range(K):
            acc = step(acc, a.elems[am[(*batch, m, k)]], b_.elems[bn[(*batch, k, n)]])
        out.append(acc)
    return TensorVal(out, lc, c.shape)
