"""LLIR of `tt.dot` on the FMA path: fused multiply-adds over K per output element; operands staged in shared memory are loaded K step by K step.

Operands `#ttg.dot_op<{opIdx, parent = #blocked}>`, result #blocked (Triton's FMADotOpToLLVM).
Register operands: per output element a K-long chain, k ascending (Triton's order). Staged
operands (`StagedOperand`, from a conversion that only stored its tile: analysis.fma_staging):
k outermost, four K steps at a time, each step's A and B elements loaded right before the FMAs
that use them, so a thread holds its accumulators and four K steps of operands, not all of K.
Every accumulator still sums k ascending, so both orders give the same bits.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.encodings import Blocked, FmaOperand
from ttbuild.backend.llir.context import I32, TensorVal
from ttbuild.backend.llir.smem import linear, smem_load
from ttbuild.errors import NotSupportedYet

_FLOAT = {"f64": "f64", "f32": "f32", "f16": "f16", "bf16": "bf16"}
K_STEP = 4  # K steps loaded together: 16 bytes of 32-bit slots along K, one ld.shared.v4 for A


class StagedOperand(TensorVal):
    """An FMA dot operand whose tile lies in shared memory at byte `base` (one `slot`-byte word
    per element, row-major); `load(j)` reads this thread's element j (layout.local_offsets order)."""

    def __init__(self, ctx, base: int, slot: int, ety, layout, shape):
        super().__init__([], layout, shape)
        self.ctx, self.base, self.slot, self.ety = ctx, base, slot, ety
        self._idx = None

    def load(self, j: int):
        """Element j, loaded from the scratch where the builder is now."""
        b = self.ctx.builder
        if self._idx is None:
            self._idx = self.ctx.indices(self.layout, self.shape)
        at = b.mul(linear(b, self._idx[j], self.shape), ir.Constant(I32, self.slot))
        return smem_load(self.ctx, b.add(ir.Constant(I32, self.base), at), self.ety)


def _steps(ctx, op, ct, ec):
    """(step(acc, x, y) -> acc + x * y, in the accumulator's type `ct`) for element type `ec`:
    llvm.fmuladd for floats (operands widened by fpext), mul + add for integers (sext)."""
    b = ctx.builder
    if ec in _FLOAT:
        fn = ctx.intrinsic(f"llvm.fmuladd.{_FLOAT[ec]}", ct, [ct, ct, ct])

        def step(acc, x, y):
            """acc + x * y by llvm.fmuladd (Triton's FMA dot)."""
            return b.call(fn, [x if x.type == ct else b.fpext(x, ct), y if y.type == ct else b.fpext(y, ct), acc])
        return step

    def istep(acc, x, y):
        """acc + x * y in integers (mul, add)."""
        x = x if x.type == ct else b.sext(x, ct)
        y = y if y.type == ct else b.sext(y, ct)
        return b.add(acc, b.mul(x, y))
    return istep


def fma_dot(ctx, op, a: TensorVal, b_: TensorVal, c: TensorVal) -> TensorVal:
    """D[..., m, n] = C[..., m, n] + sum_k A[..., m, k] B[..., k, n] (rank 2, or 3 with a leading
    batch dimension): floats through llvm.fmuladd in the
    accumulator's type (operands widened), integers as mul + add."""
    la, lb, lc = a.layout, b_.layout, c.layout
    if not (isinstance(la, FmaOperand) and isinstance(lb, FmaOperand) and isinstance(lc, Blocked)):
        raise NotSupportedYet(f"tt.dot with operand layouts {type(la).__name__}/{type(lb).__name__}", None, "llir")
    K = a.shape[-1]
    am = {o: i for i, o in enumerate(la.local_offsets(a.shape))}
    bn = {o: i for i, o in enumerate(lb.local_offsets(b_.shape))}
    step = _steps(ctx, op, c.elems[0].type, mu.elem_str(op.operands[2].type))
    offs = lc.local_offsets(c.shape)
    out = list(c.elems)
    if isinstance(a, StagedOperand) or isinstance(b_, StagedOperand):
        for k0 in range(0, K, K_STEP):
            ks = range(k0, min(K, k0 + K_STEP))
            # A row by row, then B K step by K step: neighbouring words, which LLVM's
            # load/store vectorizer joins into ld.shared.v4
            av = _fetch(a, am, [(*o[:-2], o[-2], k) for o in offs for k in ks])
            bv = _fetch(b_, bn, [(*o[:-2], k, o[-1]) for k in ks for o in offs])
            for k in ks:
                for j, (*batch, m, n) in enumerate(offs):
                    out[j] = step(out[j], av[(*batch, m, k)], bv[(*batch, k, n)])
        ctx.after_smem_read()
        return TensorVal(out, lc, c.shape)
    for j, (*batch, m, n) in enumerate(offs):
        for k in range(K):
            out[j] = step(out[j], a.elems[am[(*batch, m, k)]], b_.elems[bn[(*batch, k, n)]])
    return TensorVal(out, lc, c.shape)


def _fetch(x: TensorVal, pos: dict, keys) -> dict:
    """Operand elements at `keys` (index tuples, first-seen order): loaded now from a staged
    operand, else its registers."""
    got = {}
    for key in keys:
        if key not in got:
            got[key] = x.load(pos[key]) if isinstance(x, StagedOperand) else x.elems[pos[key]]
    return got
