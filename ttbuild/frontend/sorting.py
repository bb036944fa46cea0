"""Bitonic networks on blocks: tl.sort, tl.topk, tl.bitonic_merge and tl.flip, lowered as Triton 3.6's standard library lowers them (reshape to a 2x2x...x2 hypercube, xor_sum, where).

Each function here follows its namesake in Triton 3.6 `triton/language/standard.py` op for op
(`sort_impl`, `_bitonic_merge_hypercube`, `_compare_and_swap`, `_indicator`, `flip`), so the TTIR
is the TTIR Triton makes after inlining: no dedicated sort op exists in TTIR. Sizes along the
sorted dimension and the block's element count must be powers of two; only the last dimension
sorts (Triton: "only minor dimension is currently supported").
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval
from .blockops import reshape
from .builtins import arange, static_assert, where
from .irtext import Value
from .reductions import _max_min, xor_sum
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


def _log2(i: int) -> int:
    """Triton `standard._log2`: floor(log2(i)), 0 for i <= 1."""
    n = 0
    while i > 1:
        i >>= 1
        n += 1
    return n


def _numel(v: Value) -> int:
    n = 1
    for d in v.type.shape:
        n *= d
    return n


def _int_dtype(cx, st: T.Scalar) -> T.DType:
    """Triton `core.get_int_dtype(primitive_bitwidth, signed=True)`: the signed integer of `st`'s width."""
    name = {1: "int1", 8: "int8", 16: "int16", 32: "int32", 64: "int64"}.get(st.bits)
    if name is None:
        fail(cx, f"Unsupported bitwidth {st.bits} for {st}")
    return T.DTYPES[name]


def _block(cx, x, what: str) -> Value:
    if not isinstance(x, Value) or not x.type.shape:
        fail(cx, f"tl.{what} needs a block, got {S.describe(x)}")
    if x.type.scalar.is_ptr():
        fail(cx, f"tl.{what} of a block of pointers is not supported")
    return x


def _pow2(cx, n: int, what: str, where_: str) -> None:
    # Triton fails later, in a reshape to [2] * log2(numel) whose element count differs.
    if n & (n - 1):
        fail(cx, f"tl.{what} needs a power-of-two {where_}, got {n}")


def _indicator(cx, n_dims: int, j: int) -> Value:
    """Triton `_indicator`: arange(0, 2) shaped [1]*(n_dims-j-1) + [2] + [1]*j (1 on the right half of dim j)."""
    ar = arange(cx, Constexpr(0), Constexpr(2))
    return reshape(cx, ar, Constexpr(tuple([1] * (n_dims - j - 1) + [2] + [1] * j)))


def _compare_and_swap(cx, x: Value, flip, i: int) -> Value:
    """Triton `_compare_and_swap`: compare-and-swap across the i-th innermost hypercube dimension;
    the partner is `x ^ xor_sum(x, dim)` on the bits; `flip` (constexpr 0/1 or an indicator block)
    picks descending pairs."""
    n_dims = _log2(_numel(x))
    ix = S.cast(cx, x, _int_dtype(cx, x.type.scalar), bitcast=True)
    iy = S.binary(cx, "^", ix, xor_sum(cx, ix, Constexpr(n_dims - 1 - i), Constexpr(True)))
    y = S.cast(cx, iy, x.type.scalar, bitcast=True)
    is_right = _indicator(cx, n_dims, i)
    swap = S.compare(cx, "!=", S.compare(cx, ">", x, y), S.binary(cx, "^", flip, is_right))
    return where(cx, swap, y, x)


def _merge_hypercube(cx, x: Value, stage: int, order: int) -> Value:
    """Triton `_bitonic_merge_hypercube`: order 0 ascending, 1 descending, 2 alternating by `stage`."""
    flip = _indicator(cx, _log2(_numel(x)), stage) if order == 2 else Constexpr(order)
    for i in range(stage):
        x = _compare_and_swap(cx, x, flip, stage - 1 - i)
    return x


def _minor_dim(cx, x: Value, dim, what: str) -> int:
    d = cval(cx, dim, "dim")
    rank = len(x.type.shape)
    d = rank - 1 if d is None else d
    static_assert(cx, Constexpr(d == rank - 1), Constexpr("only minor dimension is currently supported"))
    return d


def _order(cx, descending) -> int:
    d = cval(cx, descending, "descending")
    if not isinstance(d, (bool, int)):
        fail(cx, f"descending must be a constexpr bool, got {d!r}")
    return d


def sort_impl(cx, x, k=None, dim=None, descending=False, what="sort") -> Value:
    """Triton `sort_impl`: the first log2(k) bitonic stages, then halve with max/min (top-k)."""
    x = _block(cx, x, what)
    d = _minor_dim(cx, x, dim, what)
    desc = _order(cx, descending)
    _pow2(cx, x.type.shape[d], what, "size along the sorted dimension")
    _pow2(cx, _numel(x), what, "number of elements")
    log_n = _log2(x.type.shape[d])
    kv = cval(cx, k, "k")
    if kv is not None:
        if not isinstance(kv, int) or isinstance(kv, bool) or kv < 1:
            fail(cx, f"tl.{what}: k must be a positive constexpr integer, got {kv!r}")
        _pow2(cx, kv, what, "k")
        if kv > x.type.shape[d]:
            fail(cx, f"tl.{what}: k={kv} is larger than the dimension's size {x.type.shape[d]}")
    log_k = log_n if kv is None else _log2(kv)
    n_dims = _log2(_numel(x))
    h = reshape(cx, x, Constexpr(tuple([2] * n_dims) if n_dims else (1,)))
    for i in range(1, log_k + 1):
        h = _merge_hypercube(cx, h, i, 2 if i < log_n else desc)
    for i in range(log_k + 1, log_n + 1):
        ax = Constexpr(_log2(_numel(h)) - 1 - log_k)
        h = _max_min(bool(desc), "max" if desc else "min")(cx, h, ax)
        h = _merge_hypercube(cx, h, log_k, 2 if i < log_n else desc)
    return reshape(cx, h, Constexpr(tuple(x.type.shape[:-1]) + (2 ** log_k,)))


@builtin("sort")
def sort(cx, x, dim=None, descending=False):
    """`tl.sort(x, dim=None, descending=False)`: `x` sorted along its last dimension (a bitonic
    network); same shape and dtype. Floats compare with `>` as in Triton's network, so NaNs end
    where Triton's kernel puts them (not necessarily last)."""
    return sort_impl(cx, x, None, dim, descending, "sort")


@builtin("topk")
def topk(cx, x, k, dim=None):
    """`tl.topk(x, k)`: the k largest along the last dimension, in descending order; shape
    x.shape[:-1] + [k]; the dtype widens as tl.max widens (fp16/bf16 to fp32, small ints to int32)
    when k < size."""
    return sort_impl(cx, x, k, dim, True, "topk")


@builtin("bitonic_merge")
def bitonic_merge(cx, x, dim=None, descending=False):
    """`tl.bitonic_merge(x)`: merge a bitonic sequence along the last dimension into sorted order
    (Triton `bitonic_merge` -> `_bitonic_merge`)."""
    x = _block(cx, x, "bitonic_merge")
    _minor_dim(cx, x, dim, "bitonic_merge")
    desc = _order(cx, descending)
    _pow2(cx, x.type.shape[-1], "bitonic_merge", "size along the merged dimension")
    _pow2(cx, _numel(x), "bitonic_merge", "number of elements")
    h = reshape(cx, x, Constexpr(tuple([2] * _log2(_numel(x)))))
    h = _merge_hypercube(cx, h, _log2(x.type.shape[-1]), desc)
    return reshape(cx, h, Constexpr(tuple(x.type.shape)))


@builtin("flip", method="flip")
def flip(cx, x, dim=None):
    """`tl.flip(x, dim)`: `x` reversed along `dim` (a power-of-two size): xor of the bit pattern with
    its xor_sum over each halving dimension (Triton `standard.flip`). Triton 3.6 compares `dim` with
    the rank before defaulting it, so `dim=None` is refused there and here."""
    x = _block(cx, x, "flip")
    rank = len(x.type.shape)
    d = cval(cx, dim, "dim")
    if not isinstance(d, int) or isinstance(d, bool):
        fail(cx, f"tl.flip: dim must be a constexpr integer, got {d!r}")
    static_assert(cx, Constexpr(-rank <= d < rank), Constexpr(""))
    d = d + rank if d < 0 else d
    n = x.type.shape[d]
    static_assert(cx, Constexpr(n > 0 and n & (n - 1) == 0), Constexpr(""))
    steps = _log2(n)
    shape = tuple(x.type.shape)
    y = reshape(cx, S.cast(cx, x, _int_dtype(cx, x.type.scalar), bitcast=True),
                Constexpr(shape[:d] + (2,) * steps + shape[d + 1:]))
    for i in range(steps):
        y = S.binary(cx, "^", y, xor_sum(cx, y, Constexpr(d + i), Constexpr(True)))
    return S.cast(cx, reshape(cx, y, Constexpr(shape)), x.type.scalar, bitcast=True)
