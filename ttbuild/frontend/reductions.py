"""Reductions and scans: tt.reduce (sum, max, min, argmax, argmin, xor_sum, reduce_or, tl.reduce with a @jit combine_fn) and tt.scan (cumsum, cumprod, associative_scan).

Dtype rules from Triton 3.6 `triton/language/standard.py`: sum widens integers under 32 bits to
(u)int32; max/min widen every float under 32 bits to fp32 and integers to int32; argmax/argmin
reduce (value, index) pairs and break ties toward the lower index.
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


def _need_tensor(cx, input, what: str) -> Value:
    # Triton reductions read `input.dtype`: a Python number is an error, not a 0-d tensor.
    if not isinstance(input, Value):
        fail(cx, f"tl.{what} needs a tensor, got {S.describe(input)}")
    return input


def _flatten(cx, v: Value) -> Value:
    n = 1
    for d in v.type.shape:
        n *= d
    return cx.b.op1("tt.reshape", [v], T.BlockType(v.type.scalar, (n,))) if len(v.type.shape) > 1 else v


def _axis(cx, axis, shape, what) -> int:
    ax = cval(cx, axis, "axis")
    if not isinstance(ax, int) or isinstance(ax, bool) or not -len(shape) <= ax < len(shape):
        fail(cx, f"tl.{what}: axis {ax!r} out of range for a block of rank {len(shape)}")
    return ax % len(shape)


def _region(cx, elts, combine, terminator: str) -> str:
    """The combine region: block args (lhs..., rhs...), `combine(cx, lhs, rhs)`, terminator."""
    b = cx.b
    b.open_block()
    lhs = [b.fresh(t) for t in elts]
    rhs = [b.fresh(t) for t in elts]
    out = combine(cx, lhs, rhs)
    out = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(out) != len(elts):
        fail(cx, f"combine_fn returned {len(out)} values for {len(elts)} operands")
    outs = []
    for v, t in zip(out, elts):
        v = S.to_value(cx, v, t) if isinstance(v, Constexpr) else v
        if v.type != t:
            fail(cx, f"combine_fn must return {t}, got {v.type}")
        outs.append(v)
    b.op(terminator, outs, [])
    return b.close_block(lhs + rhs)


def reduce_values(cx, values: list[Value], axis, keep_dims, combine, what: str) -> list[Value]:
    """tt.reduce over same-shaped blocks `values` along `axis` (None: all dims, flattened)."""
    for v in values:
        if not v.type.shape:
            fail(cx, f"tl.{what} needs a block, got a scalar of type {v.type}")
    if cval(cx, axis, "axis") is None:
        values = [_flatten(cx, v) for v in values]
        axis = Constexpr(0)
    shape = values[0].type.shape
    ax = _axis(cx, axis, shape, what)
    elts = [v.type.scalar for v in values]
    region = _region(cx, elts, combine, "tt.reduce.return")
    rshape = shape[:ax] + shape[ax + 1:]
    res = cx.b.op("tt.reduce", values, [S.with_shape(e, rshape) for e in elts], {"axis": f"{ax} : i32"},
                  regions=[region])
    if cval(cx, keep_dims, "keep_dims"):
        res = [S.expand_dims(cx, r, ax) if rshape else S.splat(cx, r, (1,)) for r in res]
    return res


def _one(f):
    return lambda cx, lhs, rhs: f(cx, lhs[0], rhs[0])


def _accumulate_as(cx, v, dtype):
    """`v` cast to the type a sum or cumulative op accumulates in: `dtype` when given, else int32 /
    uint32 for integers narrower than 32 bits (Triton 3.6 core.sum and core.cumsum), else `v`."""
    d = cval(cx, dtype, "dtype")
    st = v.type.scalar
    if d is None and st.is_int() and st.bits < 32:
        d = T.uint32 if st.is_unsigned() else T.int32
    return S.cast(cx, v, d) if d is not None else v


@builtin("sum", method="sum")
def sum_(cx, input, axis=None, keep_dims=False, dtype=None):
    """`tl.sum(input, axis, keep_dims, dtype)`: integers narrower than 32 bits accumulate in int32 / uint32 unless
    `dtype` says otherwise (Triton 3.6 core.sum), then a tt.reduce with arith.add; axis None reduces every
    dimension to a scalar."""
    v = _accumulate_as(cx, _need_tensor(cx, input, "sum"), dtype)
    return reduce_values(cx, [v], axis, keep_dims, _one(lambda c, a, b: S.binary(c, "+", a, b)), "sum")[0]


def _widen(cx, v):
    """tl.max/tl.min widen first (Triton `standard.max`): bf16 and every float under 32 bits to
    fp32, every integer under 32 bits (bool included) to int32."""
    st = v.type.scalar
    if st.is_float() and st.bits < 32:
        return S.cast(cx, v, T.fp32)
    if st.is_int() and st.bits < 32:
        return S.cast(cx, v, T.int32)
    return v


def _arg_combine(is_max: bool, tie_break_left: bool):
    """Triton `_argmax_combine`: keep (value, index) whose value wins; ties keep the lower index."""
    def combine(cx, lhs, rhs):
        """The argmax / argmin combine: keeps (value, index) of the larger (smaller) value, the lower index on a tie
        when tie_break_left."""
        (v1, i1), (v2, i2) = lhs, rhs
        gt = S.compare(cx, ">" if is_max else "<", v1, v2)
        if tie_break_left:
            tie = S.binary(cx, "&", S.compare(cx, "==", v1, v2), S.compare(cx, "<", i1, i2))
            gt = S.binary(cx, "|", gt, tie)
        return (cx.b.op1("arith.select", [gt, v1, v2], v1.type), cx.b.op1("arith.select", [gt, i1, i2], i1.type))
    return combine


def _with_indices(cx, v, axis, keep_dims, is_max, tie_break_left, what):
    if cval(cx, axis, "axis") is None:
        v, axis = _flatten(cx, v), Constexpr(0)
    ax = _axis(cx, axis, v.type.shape, what)
    n = v.type.shape[ax]
    idx = cx.b.op1("tt.make_range", [], T.BlockType(T.int32, (n,)), {"start": "0 : i32", "end": f"{n} : i32"})
    for d in range(len(v.type.shape)):
        if d != ax:
            idx = S.expand_dims(cx, idx, d)
    idx = S.broadcast_to(cx, idx, v.type.shape)
    return reduce_values(cx, [v, idx], Constexpr(ax), keep_dims,
                         _arg_combine(is_max, cval(cx, tie_break_left, "tie_break_left")), what)


def _max_min(is_max: bool, what: str):
    def rule(cx, input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
        """`tl.max` / `tl.min`: bf16 computes in fp32, small integers widen; with return_indices, also the int32
        index of the extremum (ties by return_indices_tie_break_left)."""
        v = _need_tensor(cx, input, what)
        if v.type.scalar == T.bf16:
            v = S.cast(cx, v, T.fp32)
        if cval(cx, return_indices, "return_indices"):
            return tuple(_with_indices(cx, v, axis, keep_dims, is_max, return_indices_tie_break_left, what))
        v = _widen(cx, v)
        return reduce_values(cx, [v], axis, keep_dims, _one(lambda c, a, b: S.minmax(c, a, b, is_max)), what)[0]
    return rule


builtin("max", method="max")(_max_min(True, "max"))
builtin("min", method="min")(_max_min(False, "min"))


@builtin("argmax", method="argmax")
def argmax(cx, input, axis, tie_break_left=True, keep_dims=False):
    """`tl.argmax(input, axis)`: int32 index of the maximum along `axis`; ties go to the lower index when
    `tie_break_left` (Triton 3.6 core._argmax_combine)."""
    return _max_min(True, "argmax")(cx, input, axis, True, tie_break_left, keep_dims)[1]


@builtin("argmin", method="argmin")
def argmin(cx, input, axis, tie_break_left=True, keep_dims=False):
    """`tl.argmin(input, axis)`: int32 index of the minimum along `axis`, ties as tl.argmax."""
    return _max_min(False, "argmin")(cx, input, axis, True, tie_break_left, keep_dims)[1]


@builtin("reduce", method="reduce")
def reduce(cx, input, axis, combine_fn, keep_dims=False):
    """`tl.reduce(x, axis, combine_fn)` / `tl.reduce((x, y), axis, fn)` with a @jit combine_fn
    inlined into the tt.reduce region."""
    values = list(input) if isinstance(input, tuple) else [input]
    values = [_need_tensor(cx, v, "reduce") for v in values]
    res = reduce_values(cx, values, axis, keep_dims, lambda c, l, r: c.call(combine_fn, l + r), "reduce")
    return tuple(res) if isinstance(input, tuple) else res[0]


def scan_values(cx, values: list[Value], axis, reverse, combine, what: str) -> list[Value]:
    """tt.scan (inclusive prefix combine) of same-shaped blocks along `axis`."""
    for v in values:
        if not v.type.shape:
            fail(cx, f"tl.{what} needs a block, got a scalar of type {v.type}")
    ax = _axis(cx, axis, values[0].type.shape, what)
    region = _region(cx, [v.type.scalar for v in values], combine, "tt.scan.return")
    rev = "true" if cval(cx, reverse, "reverse") else "false"
    return cx.b.op("tt.scan", values, [v.type for v in values], {"axis": f"{ax} : i32", "reverse": rev},
                   regions=[region])


@builtin("associative_scan", method="associative_scan")
def associative_scan(cx, input, axis, combine_fn, reverse=False):
    """`tl.associative_scan(input, axis, combine_fn, reverse)`: tt.scan of one tensor or a tuple of them with the
    @jit `combine_fn` inlined as its body; returns the scanned value(s), same shapes."""
    values = list(input) if isinstance(input, tuple) else [input]
    values = [_need_tensor(cx, v, "associative_scan") for v in values]
    res = scan_values(cx, values, axis, reverse, lambda c, l, r: c.call(combine_fn, l + r), "associative_scan")
    return tuple(res) if isinstance(input, tuple) else res[0]


def _cum(op: str, what: str):
    def rule(cx, input, axis=0, reverse=False, dtype=None):
        """`tl.cumsum` / `tl.cumprod`: tt.scan along `axis` (reversed when asked), integers narrower than 32 bits
        accumulating in int32 / uint32 unless `dtype` is given (Triton 3.6 core.cumsum)."""
        v = _accumulate_as(cx, _need_tensor(cx, input, what), dtype)
        return scan_values(cx, [v], axis, reverse, _one(lambda c, a, b: S.binary(c, op, a, b)), what)[0]
    return rule


builtin("cumsum", method="cumsum")(_cum("+", "cumsum"))
builtin("cumprod", method="cumprod")(_cum("*", "cumprod"))


@builtin("xor_sum", method="xor_sum")
def xor_sum(cx, input, axis=None, keep_dims=False):
    """Triton `standard.xor_sum`: integers only, no widening (a reduce with `^`)."""
    v = _need_tensor(cx, input, "xor_sum")
    if not v.type.scalar.is_int():
        fail(cx, "xor_sum only supported for integers")
    return reduce_values(cx, [v], axis, keep_dims, _one(lambda c, a, b: S.binary(c, "^", a, b)), "xor_sum")[0]


@builtin("reduce_or", method="reduce_or")
def reduce_or(cx, input, axis, keep_dims=False):
    """Triton `standard.reduce_or`: integers only, no widening (a reduce with `|`)."""
    v = _need_tensor(cx, input, "reduce_or")
    if not v.type.scalar.is_int():
        fail(cx, "reduce_or only supported for integers")
    return reduce_values(cx, [v], axis, keep_dims, _one(lambda c, a, b: S.binary(c, "|", a, b)), "reduce_or")[0]


@builtin("softmax", method="softmax")
def softmax(cx, x, dim=None, keep_dims=False, ieee_rounding=False):
    """Triton `standard.softmax`: exp(x - max) / sum along `dim` (0 when None), through tl.max
    (which widens fp16/bf16 to fp32), tl.exp, tl.sum and tl.fdiv, as written there."""
    from . import builtins, extra

    v = _need_tensor(cx, x, "softmax")
    d = cval(cx, dim, "dim")
    ax = Constexpr(0 if d is None else d)
    z = S.binary(cx, "-", v, _max_min(True, "softmax")(cx, v, ax, False, True, keep_dims))
    num = builtins.MATH_UNARY["exp"](cx, z)
    den = sum_(cx, num, ax, keep_dims)
    return extra.fdiv(cx, num, den, ieee_rounding)
