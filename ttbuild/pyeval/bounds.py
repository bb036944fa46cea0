"""The cost bounds of ttbuild's static Python evaluator: what one operation may build (integer bits, sequence lengths, range sizes) and how many steps one evaluation may take; standard library only.

Python's own operators are unbounded: `9**9**9**9`, `1 << 10**10` and `[0] * 10**9` run for
minutes or exhaust memory, `0.5 in range(10**15)` scans the range. Every arithmetic operation
of the evaluator (build time) and of a compiled heuristic (launch time, ttbuild.runtime) goes
through `binop` / `contains`, which check the cost before doing the work.
"""

from __future__ import annotations

import operator

__all__ = ["MAX_STEPS", "MAX_INT_BITS", "MAX_ITEMS", "MAX_CALL_DEPTH", "MAX_SECONDS", "MAX_CONFIGS",
           "BoundError", "binop", "contains", "check_items"]

# Evaluation steps (nodes evaluated, loop iterations, list elements built) before giving up.
MAX_STEPS = 100_000
# Wall-clock seconds one evaluation may take (each step is cheap; this catches what slips by).
MAX_SECONDS = 10.0
MAX_CALL_DEPTH = 64
# Bits of an integer result: constexprs are 64-bit at most, and 4096 leaves room for arithmetic.
MAX_INT_BITS = 4096
# Elements of one sequence built by repetition or held by a range that is scanned.
MAX_ITEMS = 1_000_000
# Configs one @triton.autotune may expand into (each is a variant, so a build of its own).
MAX_CONFIGS = 1024

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
        "%": operator.mod, "**": operator.pow, "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_,
        "|": operator.or_, "^": operator.xor}


class BoundError(ValueError):
    """An operation whose result would exceed a bound: `message` says which and why."""


def _bits(value) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _length(value) -> int | None:
    return len(value) if isinstance(value, (list, tuple, str, bytes)) else None


def check_items(n: int, what: str) -> None:
    """Refuse building or scanning `n` elements when n > MAX_ITEMS (BoundError)."""
    if n > MAX_ITEMS:
        raise BoundError(f"{what} has {n} elements, more than the {MAX_ITEMS} ttbuild evaluates")


def binop(symbol: str, left, right):
    """`left <symbol> right` (symbol one of + - * / // % ** << >> & | ^) after checking its cost:
    an int result over MAX_INT_BITS bits, a sequence repeated past MAX_ITEMS elements, raise
    BoundError before any work is done; Python's own errors (TypeError, ZeroDivisionError,
    OverflowError, ValueError) propagate."""
    if symbol == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
        if right > MAX_INT_BITS or right * (_bits(left) - 1) > MAX_INT_BITS:
            raise BoundError(f"the power has more than {MAX_INT_BITS} bits")
    elif symbol == "<<" and isinstance(left, int) and isinstance(right, int) and left and right > 0:
        if right + _bits(left) > MAX_INT_BITS:
            raise BoundError(f"the shift has more than {MAX_INT_BITS} bits")
    elif symbol == "*" and isinstance(left, int) and isinstance(right, int):
        if _bits(left) + _bits(right) > MAX_INT_BITS + 1:
            raise BoundError(f"the product has more than {MAX_INT_BITS} bits")
    elif symbol == "*" and (_length(left) is not None or _length(right) is not None):
        seq, times = (left, right) if _length(left) is not None else (right, left)
        if isinstance(times, int) and times > 0:
            check_items(len(seq) * times, "the repeated sequence")
    elif symbol == "+" and _length(left) is not None and _length(right) is not None:
        check_items(len(left) + len(right), "the joined sequence")
    value = _OPS[symbol](left, right)
    if isinstance(value, int) and _bits(value) > MAX_INT_BITS:
        raise BoundError(f"the result has more than {MAX_INT_BITS} bits")
    return value


def contains(item, container) -> bool:
    """`item in container`, refusing a scan of more than MAX_ITEMS elements (a range tests an int
    in constant time, as Python does, but anything else by scanning it)."""
    if isinstance(container, range) and not (type(item) is int or type(item) is bool):
        check_items(len(container), "the range scanned by `in`")
    elif isinstance(container, (list, tuple)):
        check_items(len(container), "the sequence scanned by `in`")
    return item in container
