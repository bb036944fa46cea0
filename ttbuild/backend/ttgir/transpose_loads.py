"""TTGIR pass: a dot operand that is `tt.trans` of a `tt.load` is loaded transposed instead (the pointers, mask and `other` go through the tt.trans), so the dot reads a plain load.

`tl.dot(a, b.T)` with `b` an N x K tile (K contiguous: a linear layer's weight, tutorial 09's
`b_desc.load(...).T`) is, after this pass, a load of the K x N tile through transposed pointers,
dimension 0 contiguous: the form of a column-major B (`dot_*_cc` test kernels), which the
pipeliner (ttbuild.backend.ttgir.pipeline) streams through `cp.async` rings and ldmatrix reads
without `.trans`. Left as it was, the loaded tile would cross registers and be transposed and
stored to shared memory every iteration, unpipelined. The same bytes reach the same shared
tile; Triton gets there differently, staging the load and viewing it with `ttg.memdesc_trans`
(TritonGPU MemDescTransOp), which this backend does not model.

Applies when the load has no other user and its operands are tensors (a block pointer load is
lowered to pointers by the frontend before this). Runs before coalesce, on TTIR without
encodings; the axis analysis permutes contiguity through tt.trans (ttbuild.backend.analysis.axis).
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.layout import trans_order
from ttbuild.backend.ir.ops import ARITH, TT
from ttbuild.backend.ir.optraits import walk


def _transposed(trans, x):
    """`x` transposed as `trans` does, before `trans`: a splat constant (the usual `other`) as a
    splat of the new shape, which the pipeliner recognises as a zero fill; else a clone of
    `trans` (its order property) applied to `x`."""
    t = mu.ir.RankedTensorType(x.type)
    order = trans_order(trans)
    new_t = mu.ir.RankedTensorType.get([t.shape[o] for o in order], t.element_type)
    if isinstance(x, mu.ir.OpResult) and x.owner.name == ARITH.CONSTANT:
        value = x.owner.attributes["value"]
        if isinstance(value, mu.ir.DenseElementsAttr) and value.is_splat:
            c = x.owner.clone(mu.ir.InsertionPoint(trans))
            c.attributes["value"] = mu.ir.DenseElementsAttr.get_splat(new_t, value.get_splat_value())
            c.results[0].set_type(new_t)
            return c.results[0]
    new = trans.clone(mu.ir.InsertionPoint(trans))
    new.operands[0] = x
    new.results[0].set_type(new_t)
    return new.results[0]


def transpose_loads(module) -> int:
    """Rewrite every `tt.dot` operand `tt.trans(tt.load(p, m, o))` (the load used only there) as
    `tt.load(tt.trans(p), tt.trans(m), tt.trans(o))`; returns how many."""
    n = 0
    for op in walk(module.operation):
        if op.name != TT.DOT:
            continue
        for i in (0, 1):
            trans = op.operands[i].owner
            if not isinstance(op.operands[i], mu.ir.OpResult) or trans.name != TT.TRANS:
                continue
            src = trans.operands[0]
            load = src.owner
            if not isinstance(src, mu.ir.OpResult) or load.name != TT.LOAD or len(list(src.uses)) != 1:
                continue
            if not all(isinstance(x.type, mu.ir.RankedTensorType) for x in load.operands):
                continue
            operands = [_transposed(trans, x) for x in load.operands]
            new = load.clone(mu.ir.InsertionPoint(trans))
            for k, x in enumerate(operands):
                new.operands[k] = x
            new.results[0].set_type(trans.results[0].type)
            trans.results[0].replace_all_uses_with(new.results[0])
            trans.erase()
            load.erase()
            n += 1
    return n
