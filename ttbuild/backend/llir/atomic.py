"""LLIR rules for tt.atomic_rmw / tt.atomic_cas: `atom.global` with sem, scope and mask, once per element.

PTX ISA 9.7.13.5 (atom): `@p atom{.sem}{.scope}.global.op.type d, [a], b{, c};`. Triton's enums
(TritonAttrDefs.td): RMWOp AND=1 OR=2 XOR=3 ADD=4 FADD=5 MAX=6 MIN=7 UMAX=8 UMIN=9 XCHG=10;
MemSemantic RELAXED=1 ACQUIRE=2 RELEASE=3 ACQUIRE_RELEASE=4; MemSyncScope GPU=1 CTA=2 SYSTEM=3.
Threads that hold a duplicate of an element (broadcast layouts) and, for scalar atomics, every
thread but thread 0, skip the access; the old values then reach them through shared memory.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import round4
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, TensorVal, llvm_type
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

SEM = {1: ".relaxed", 2: ".acquire", 3: ".release", 4: ".acq_rel"}
SCOPE = {1: ".gpu", 2: ".cta", 3: ".sys"}
OPS = {1: ("and", "b"), 2: ("or", "b"), 3: ("xor", "b"), 4: ("add", "u"), 5: ("add", "f"),
       6: ("max", "s"), 7: ("min", "s"), 8: ("max", "u"), 9: ("min", "u"), 10: ("exch", "b")}


def _ptx_type(kind: str, elem: str) -> str:
    """The atom's type suffix. fp16/bf16 only add (the frontend refuses other ops, as Triton does):
    `.noftz.f16` (sm_70+), `.noftz.bf16` (sm_90+; PTX ISA 9.7.13.5), one element per atom."""
    bits = mu.elem_bits(elem)
    if elem in ("f16", "bf16") and kind == "f":
        return f".noftz.{elem}"
    if bits not in (32, 64):
        raise NotSupportedYet(f"atomics on {elem}", None, "llir")
    if kind == "f":
        return f".f{bits}"
    if kind == "u" and elem.startswith("f"):
        return f".f{bits}"
    return f".{kind}{bits}"


def _atom(ctx, text_op: str, ptr, vals, pred, ety):
    """One predicated atom; returns the old value (0 where the predicate is off)."""
    b = ctx.builder
    bits = ety.width if isinstance(ety, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ety)]
    it = ir.IntType(bits)
    r = {16: "h", 32: "r", 64: "l"}[bits]
    words = [v if isinstance(v.type, ir.IntType) else b.bitcast(v, it) for v in vals]
    n = len(words)
    args = [ptr] + words
    cons = [f"={r}", "l"] + [r] * n
    operands = ", ".join(f"${2 + i}" for i in range(n))
    guard = ""
    if pred is not None:
        args.append(pred)
        cons.append("b")
        guard = f"@${2 + n} "
    text = f"mov.b{bits} $0, 0;\n\t{guard}{text_op} $0, [$1], {operands};"
    ftype = ir.FunctionType(it, [a.type for a in args])
    old = b.asm(ftype, text, ",".join(cons), args, side_effect=True)
    return old if isinstance(ety, ir.IntType) else b.bitcast(old, ety)


def _run(ctx, op, opname: str, ptr, operands, mask):
    """Issue `opname` per element (tensors) or once (scalars, by thread 0); returns old values."""
    b = ctx.builder
    res = op.results[0]
    elem = mu.elem_str(res.type)
    ety = llvm_type(elem)
    used = any(True for _ in res.uses)  # unused old values need no broadcast (nor its barrier)
    if not isinstance(ptr, TensorVal):
        top_level = op.operation.parent.name == TT.FUNC
        if top_level and any(k in opname for k in (".release", ".acq_rel")):
            # thread 0 releases for the CTA: the other threads' writes must precede it
            # (a lock released after every thread stored its partial sums, as in Triton's
            # layer norm backward). Not inside scf regions: their conditions need not be
            # uniform, and a barrier there could hang the CTA.
            ctx.barrier()
        tid = ctx.sreg("tid.x")
        first = b.icmp_unsigned("==", tid, ir.Constant(I32, 0))
        pred = first if mask is None else b.and_(first, mask)
        if used:
            # The barrier that guards the broadcast slot (shared memory read since the last one)
            # goes before the atom, not between it and the slot's write (Triton's order): a lock
            # taken by `while atomic_cas(...)` is then taken once every warp has arrived, not
            # held while the slowest warp finishes the work before the loop. (No change measured
            # on layer norm backward on an H200: 117.5-117.8 us either way.)
            ctx.before_smem_write()
        old = _atom(ctx, opname, ptr, operands, pred, ety)
        if not used:
            return old
        return _share(ctx, [old], [ir.Constant(I32, 0)], [first], ety)[0]
    n = len(ptr.elems)
    cols = [o.elems if isinstance(o, TensorVal) else [o] * n for o in operands]
    masks = mask.elems if isinstance(mask, TensorVal) else [mask] * n
    own = ctx.owned(ptr.layout, ptr.shape)
    olds = []
    for j in range(n):
        pred = masks[j]
        if own is not None:
            pred = own[j] if pred is None else b.and_(pred, own[j])
        olds.append(_atom(ctx, opname, ptr.elems[j], [c[j] for c in cols], pred, ety))
    if own is not None and used:
        idx = ctx.indices(ptr.layout, ptr.shape)
        lins = [linear(b, ix, ptr.shape) for ix in idx]
        olds = _share(ctx, olds, lins, own, ety)
    return TensorVal(olds, ptr.layout, ptr.shape)


def _share(ctx, values, lins, owners, ety):
    """Owners write their values to shared memory slot `lin`; after a barrier, every thread reads
    the slot of each of its elements (so duplicates see the owner's old value)."""
    b = ctx.builder
    bits = ety.width if isinstance(ety, ir.IntType) else {"float": 32, "double": 64}[str(ety)]
    slot = ir.Constant(I32, round4(bits // 8))
    ctx.before_smem_write()
    for v, lin, own in zip(values, lins, owners):
        with b.if_then(own):
            smem_store(ctx, b.mul(lin, slot), v)
    ctx.barrier()
    out = [smem_load(ctx, b.mul(lin, slot), ety) for lin in lins]
    ctx.after_smem_read()
    return out


def _sem_scope(op):
    p = mu.props(op)
    sem = SEM[mu.int_attr(p["sem"])] if "sem" in p else ".acq_rel"
    scope = SCOPE[mu.int_attr(p["scope"])] if "scope" in p else ".gpu"
    return sem, scope


@rule(TT.ATOMIC_RMW)
def atomic_rmw(ctx, op, ptr, val, mask=None):
    p = mu.props(op)
    kind_op, kind = OPS[mu.int_attr(p["atomic_rmw_op"])]
    elem = mu.elem_str(op.results[0].type)
    sem, scope = _sem_scope(op)
    text = f"atom{sem}{scope}.global.{kind_op}{_ptx_type(kind, elem)}"
    return _run(ctx, op, text, ptr, [val], mask)


@rule(TT.ATOMIC_CAS)
def atomic_cas(ctx, op, ptr, cmp, val):
    elem = mu.elem_str(op.results[0].type)
    sem, scope = _sem_scope(op)
    text = f"atom{sem}{scope}.global.cas{_ptx_type('b', elem)}"
    return _run(ctx, op, text, ptr, [cmp, val], None)
