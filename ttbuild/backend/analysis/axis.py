"""Axis analysis: per value and dimension, contiguity, divisibility and constancy (Triton's AxisInfo).

- contiguity[d]: elements come in runs of this length that increase by 1 along d;
- divisibility[d]: the first element of every such run (every element when contiguity is 1) is a
  multiple of this (for pointers: in bytes);
- constancy[d]: elements come in runs of this length that are equal along d.
Source of the rules: Triton lib/Analysis/AxisInfo.cpp (same definitions, a subset of the ops).
Unknown ops give the pessimistic answer (1, 1, 1), never a wrong one.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from math import gcd

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.layout import trans_order
from ttbuild.backend.ir.ops import ARITH, ATTR, MATH, SCF, TT, TTG
from ttbuild.registry import Registry, RuleSet, build

MAX_DIV = 1 << 30  # what "divisible by everything" (the value 0) is capped to


def pow2_div(v: int) -> int:
    """Largest power of two dividing v (0 -> MAX_DIV)."""
    v = abs(int(v))
    return MAX_DIV if v == 0 else min(MAX_DIV, v & -v)


@dataclass(frozen=True)
class AxisInfo:
    """Per-dimension facts about a value (Triton's AxisInfo): runs of `contiguity` consecutive
    integers, `divisibility` of the first of each run, blocks of `constancy` equal elements;
    `value` when it is a known constant."""
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    value: int | None = None  # known constant (scalar or splat)

    @classmethod
    def unknown(cls, rank: int) -> "AxisInfo":
        """Nothing known about a value of `rank` dimensions (all 1)."""
        return cls((1,) * max(rank, 1), (1,) * max(rank, 1), (1,) * max(rank, 1))


MAX_ROUNDS = 32


def join(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds for a value that is either `a` or `b` (Triton AxisInfo::join): gcd per dimension,
    the constant only when both agree."""
    g = lambda x, y: tuple(gcd(p, q) for p, q in zip(x, y))
    return AxisInfo(g(a.contiguity, b.contiguity), g(a.divisibility, b.divisibility),
                    g(a.constancy, b.constancy), a.value if a.value == b.value else None)


def _shape(v):
    s = mu.shape_of(v.type)
    return s if s else (1,)


def vector_elems(ptr_value, axis: AxisAnalysis, order0: int) -> int:
    """Elements per 16-byte-or-smaller access that the pointer tensor's axis info allows."""
    elem = mu.pointee(mu.elem_str(ptr_value.type))
    ebytes = mu.elem_bits(elem) // 8
    info = axis.info(ptr_value)
    align_elems = max(1, info.divisibility[order0] // ebytes)
    return max(1, min(16 // ebytes, info.contiguity[order0], align_elems))


class AxisAnalysis:
    """Runs once over a function body in program order, nested regions included; `info(value)`
    answers. The induction variable of `scf.for lb, ub, step` is divisible by gcd(div(lb),
    div(step)); a loop-carried value (scf.for iter_arg, and the loop's result) gets the join of its
    initial value and what the body yields, iterated to a fixpoint (Triton's AxisInfoAnalysis is
    a dataflow analysis that joins them the same way), so `ptrs += BLOCK_K * stride` keeps the
    contiguity and divisibility of the initial pointers."""

    def __init__(self, func_op):
        self._info: dict = {}
        p = mu.props(func_op)
        arg_attrs = list(p["arg_attrs"]) if "arg_attrs" in p else []
        block = func_op.regions[0].blocks[0]
        for i, arg in enumerate(block.arguments):
            div = 1
            if i < len(arg_attrs):
                d = mu.ir.DictAttr(arg_attrs[i])
                if ATTR.DIVISIBILITY in d:
                    div = mu.int_attr(d[ATTR.DIVISIBILITY])
            self._info[self._key(arg)] = AxisInfo((1,), (div,), (1,))
        self._walk(block)

    def _walk(self, block):
        # A structured walk, not optraits.walk: a loop body is re-walked until its iter_args'
        # info reaches a fixpoint (_for), which a flat pre-order list cannot express.
        for op in block.operations:
            self._visit(op)
            if op.operation.name == SCF.FOR and len(op.regions[0].blocks):
                self._for(op)
                continue
            for region in op.regions:
                for blk in region.blocks:
                    self._walk(blk)

    def _for(self, op):
        """Body of an scf.for walked until its iter_args' info stops changing (each round can
        only lower contiguity/divisibility/constancy, so a few rounds do; after MAX_ROUNDS the
        iter_args fall back to unknown), then the loop results get the iter_args' info."""
        body = op.regions[0].blocks[0]
        iv, args = body.arguments[0], list(body.arguments)[1:]
        lb, step = self.info(op.operands[0]), self.info(op.operands[2])
        self._set(iv, AxisInfo((1,), (gcd(lb.divisibility[0], step.divisibility[0]),), (1,)))
        cur = [self.info(x) for x in list(op.operands)[3:]]
        for _ in range(MAX_ROUNDS):
            for a, i in zip(args, cur):
                self._set(a, i)
            self._walk(body)
            yielded = list(list(body.operations)[-1].operands)
            new = [join(c, self.info(y)) for c, y in zip(cur, yielded)]
            if new == cur:
                break
            cur = new
        else:
            cur = [AxisInfo.unknown(len(_shape(a))) for a in args]
            for a, i in zip(args, cur):
                self._set(a, i)
            self._walk(body)
        for r, i in zip(op.results, cur):
            self._set(r, i)

    @staticmethod
    def _key(v):
        return v  # ir.Value hashes and compares by the underlying SSA value

    def info(self, v) -> AxisInfo:
        """The AxisInfo of value v (unknown for values the analysis did not reach)."""
        return self._info.get(self._key(v)) or AxisInfo.unknown(len(_shape(v)))

    def _set(self, v, info: AxisInfo):
        self._info[self._key(v)] = info

    def _visit(self, op):
        name = op.operation.name
        if len(op.results) != 1:
            return  # multi-result ops (loops, reductions) stay unknown
        res = op.results[0]
        shape = _shape(res)
        rank = len(shape)
        ins = [self.info(x) for x in op.operands]
        fn = TABLE.get(name)
        out = fn(op, shape, ins) if fn else None
        out = out or AxisInfo.unknown(rank)
        attrs = op.operation.attributes
        if ATTR.DIVISIBILITY in attrs or ATTR.CONTIGUITY in attrs or ATTR.CONSTANCY in attrs:
            out = with_hints(out, attrs)
        self._set(res, out)


def with_hints(info: AxisInfo, attrs) -> AxisInfo:
    """`info` with the hints `tl.multiple_of` / `max_contiguous` / `max_constancy` left on the op
    (`tt.divisibility` / `tt.contiguity` / `tt.constancy`, one i32 per dimension) in place of what
    was derived: Triton's AxisInfoAnalysis overrides its result with them ("override with hint",
    lib/Analysis/AxisInfo.cpp)."""
    def read(name, current):
        if name not in attrs:
            return current
        attr = attrs[name]
        try:
            vals = tuple(int(x) for x in mu.ir.DenseIntElementsAttr(attr))
        except (TypeError, ValueError):
            vals = (mu.int_attr(attr),)
        if len(vals) == 1 and len(current) > 1:
            vals = vals * len(current)
        return vals if len(vals) == len(current) else current
    return AxisInfo(read(ATTR.CONTIGUITY, info.contiguity), read(ATTR.DIVISIBILITY, info.divisibility),
                    read(ATTR.CONSTANCY, info.constancy), info.value)


RULES = RuleSet()  # per-op rules `fn(op, shape, ins) -> AxisInfo | None`; TABLE below is built from them
_rule = RULES.rule


def _elem_bytes_of_ptr(op) -> int:
    return mu.elem_bits(mu.pointee(mu.elem_str(op.results[0].type))) // 8


@_rule(ARITH.CONSTANT)
def _constant(op, shape, ins):
    attr = op.attributes["value"]
    try:
        if isinstance(attr, mu.ir.DenseElementsAttr) or "dense" in str(attr):
            dense = mu.ir.DenseIntElementsAttr(attr)
            if not dense.is_splat:
                return None
            v = dense.get_splat_value().value
        else:
            v = mu.ir.IntegerAttr(attr).value
    except (ValueError, TypeError):
        return AxisInfo((1,) * len(shape), (1,) * len(shape), tuple(shape))
    return AxisInfo((1,) * len(shape), (pow2_div(v),) * len(shape), tuple(shape), v)


@_rule(TT.MAKE_RANGE)
def _make_range(op, shape, ins):
    p = mu.props(op)
    start, end = mu.int_attr(p["start"]), mu.int_attr(p["end"])
    return AxisInfo((end - start,), (pow2_div(start),), (1,))


@_rule(TT.SPLAT)
def _splat(op, shape, ins):
    s = ins[0]
    return AxisInfo((1,) * len(shape), (s.divisibility[0],) * len(shape), tuple(shape), s.value)


def _add_like(op, shape, ins, rhs_scale=1):
    a, b = ins
    rank = len(shape)
    contig = tuple(max(gcd(a.contiguity[d], b.constancy[d]), gcd(a.constancy[d], b.contiguity[d]))
                   for d in range(rank))
    div = tuple(gcd(a.divisibility[d], b.divisibility[d] * rhs_scale) for d in range(rank))
    const = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    value = None
    if a.value is not None and b.value is not None and op.operation.name == ARITH.ADDI:
        value = a.value + b.value
    return AxisInfo(contig, div, const, value)


@_rule(ARITH.ADDI)
def _addi(op, shape, ins):
    return _add_like(op, shape, ins)


@_rule(TT.ADDPTR)
def _addptr(op, shape, ins):
    return _add_like(op, shape, ins, _elem_bytes_of_ptr(op))


@_rule(ARITH.SUBI)
def _subi(op, shape, ins):
    a, b = ins
    rank = len(shape)
    # x - c keeps x's runs; c - x reverses them (not contiguous in Triton's sense).
    contig = tuple(gcd(a.contiguity[d], b.constancy[d]) for d in range(rank))
    div = tuple(gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank))
    const = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    return AxisInfo(contig, div, const)


@_rule(ARITH.MULI)
def _muli(op, shape, ins):
    a, b = ins
    rank = len(shape)
    if b.value == 1 or a.value == 1:
        return a if b.value == 1 else b  # x * 1 is x (a unit stride keeps the pointer runs)
    # Only every element's divisibility multiplies: a run's later elements break the rule.
    da = [a.divisibility[d] if a.contiguity[d] == 1 else 1 for d in range(rank)]
    db = [b.divisibility[d] if b.contiguity[d] == 1 else 1 for d in range(rank)]
    contig = tuple(a.contiguity[d] if b.value == 1 else b.contiguity[d] if a.value == 1 else 1
                   for d in range(rank))
    div = tuple(min(MAX_DIV, da[d] * db[d]) for d in range(rank))
    const = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    value = a.value * b.value if a.value is not None and b.value is not None else None
    return AxisInfo(contig, div, const, value)


@_rule(ARITH.REMSI, ARITH.REMUI)
def _rem(op, shape, ins):
    """x % c with c the same along d (a splat): a run of x whose start is a multiple of g =
    gcd(div x, div c) can only wrap at a multiple of c, hence of g, so runs of gcd(run, g) stay
    contiguous, and their starts multiples of g (Triton's RemOp rule; offsets are taken as
    non-negative, as Triton does: `(pid * BN + arange(0, BN)) % N`)."""
    a, b = ins
    rank = len(shape)
    contig, div = [], []
    for d in range(rank):
        g = gcd(a.divisibility[d], b.divisibility[d])
        contig.append(gcd(a.contiguity[d], g) if b.constancy[d] == shape[d] else 1)
        div.append(g)
    const = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    return AxisInfo(tuple(contig), tuple(div), const)


@_rule(ARITH.CMPI, ARITH.CMPF)
def _cmp(op, shape, ins):
    a, b = ins
    rank = len(shape)
    const = []
    for d in range(rank):
        c = gcd(a.constancy[d], b.constancy[d])
        # A run [k*D, k*D + C) compared with a splat that is a multiple of D is constant over
        # chunks of gcd(C, D): the comparison can only flip at a multiple of D.
        if a.contiguity[d] > 1 and b.constancy[d] == shape[d] and op.operation.name == ARITH.CMPI:
            c = max(c, gcd(a.contiguity[d], gcd(a.divisibility[d], b.divisibility[d])))
        if b.contiguity[d] > 1 and a.constancy[d] == shape[d] and op.operation.name == ARITH.CMPI:
            c = max(c, gcd(b.contiguity[d], gcd(a.divisibility[d], b.divisibility[d])))
        const.append(c)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(const))


@_rule(ARITH.SELECT)
def _select(op, shape, ins):
    """Triton 3.6's SelectOpAxisInfoVisitor (lib/Analysis/AxisInfo.cpp): a constant condition
    (`tl.where(CONSTEXPR == 1, a, b)`) gives the chosen operand's info; a scalar i1 condition
    picks a whole operand, so the minimum of both; a tensor condition mixes them elementwise."""
    cond, a, b = ins
    if cond.value is not None:
        return a if cond.value else b
    rank = len(shape)
    if not mu.shape_of(op.operands[0].type):
        return AxisInfo(tuple(min(a.contiguity[d], b.contiguity[d]) for d in range(rank)),
                        tuple(min(a.divisibility[d], b.divisibility[d]) for d in range(rank)),
                        tuple(min(a.constancy[d], b.constancy[d]) for d in range(rank)))
    return AxisInfo(tuple(gcd(gcd(a.contiguity[d], cond.constancy[d]), gcd(b.contiguity[d], cond.constancy[d]))
                          for d in range(rank)),
                    tuple(gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank)),
                    tuple(gcd(gcd(a.constancy[d], b.constancy[d]), cond.constancy[d]) for d in range(rank)))


@_rule(ARITH.ANDI, ARITH.ORI, ARITH.XORI, ARITH.ADDF, ARITH.SUBF,
       ARITH.MULF, ARITH.DIVF, ARITH.EXTF, ARITH.TRUNCF, ARITH.SITOFP, ARITH.FPTOSI,
       ARITH.UITOFP, ARITH.FPTOUI, ARITH.NEGF, ARITH.MAXIMUMF, ARITH.MINIMUMF,
       ARITH.MAXNUMF, ARITH.MINNUMF,
       ARITH.BITCAST, MATH.EXP, MATH.LOG, MATH.SQRT, MATH.ABSF)
def _elementwise(op, shape, ins):
    rank = len(shape)
    const = tuple(shape)
    for i in ins:
        const = tuple(gcd(const[d], i.constancy[d]) for d in range(rank))
    return AxisInfo((1,) * rank, (1,) * rank, const)


@_rule(TT.EXPAND_DIMS)
def _expand_dims(op, shape, ins):
    a = ins[0]
    d = mu.int_attr(mu.props(op)["axis"])
    # The new size-1 dimension: every element stands alone, so its divisibility is that of every
    # element (the run start's only when runs have length 1).
    every = min(a.divisibility[k] if a.contiguity[k] == 1 else 1 for k in range(len(a.contiguity)))
    ins_ = lambda t, v: t[:d] + (v,) + t[d:]
    return AxisInfo(ins_(a.contiguity, 1), ins_(a.divisibility, every), ins_(a.constancy, 1), a.value)


@_rule(TT.BROADCAST)
def _broadcast(op, shape, ins):
    a = ins[0]
    src = _shape(op.operands[0])
    contig, div, const = list(a.contiguity), list(a.divisibility), list(a.constancy)
    for d in range(len(shape)):
        if src[d] == 1 and shape[d] != 1:
            contig[d], const[d] = 1, shape[d]
    return AxisInfo(tuple(contig), tuple(div), tuple(const), a.value)


@_rule(TT.TRANS)
def _trans(op, shape, ins):
    """Result dimension k is operand dimension order[k]: every field permuted (Triton's
    TransOpAxisInfoVisitor)."""
    a, order = ins[0], trans_order(op)
    perm = lambda t: tuple(t[o] for o in order)
    return AxisInfo(perm(a.contiguity), perm(a.divisibility), perm(a.constancy), a.value)


@_rule(TTG.CONVERT_LAYOUT, ARITH.EXTSI, ARITH.EXTUI, ARITH.TRUNCI)
def _convert(op, shape, ins):
    """Integer casts keep runs and divisibility (Triton's CastOpAxisInfoVisitor): block
    pointers index in i64 from i32 ranges."""
    return ins[0]


# This module is its own (one-module) list of rule modules.
TABLE: Registry = build({"default": Registry("axis-info rule")}, [sys.modules[__name__]])["default"]
