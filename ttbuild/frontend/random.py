"""Philox 4x32 as Triton 3.6 `triton/language/random.py` computes it: `tl.rand`, `randn`, `randint`, their 4x forms, and the helpers philox, philox_impl, uint_to_uniform_float, pair_uniform_to_normal.

Same constants, rounds, seed split, `uint_to_uniform_float` and Box–Muller as Triton's @jit library
functions, each step typed by the same promotion rules (`semantic.binary`), so a kernel gets the
bit patterns Triton's kernel gets for the same seed and offsets. Only the 32-bit Philox is reachable
from these entry points: `randint4x` always narrows offsets to uint32 first (tl.philox with 64-bit
counters is refused as not supported yet).
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, NotSupportedFrontend, cval, tensor
from .builtins import MATH_UNARY, maximum, where
from .extra import umulhi
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin

N_ROUNDS_DEFAULT = 10
# Philox 4x32 constants (Salmon et al. 2011; Triton `philox_impl`, uint32 branch).
PHILOX_KEY_A, PHILOX_KEY_B = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUND_A, PHILOX_ROUND_B = 0xD2511F53, 0xCD9E8D57
# Largest scale with (2**31 - 1) * scale < 1.0 in fp32 (Triton `uint_to_uniform_float`).
UNIFORM_SCALE = 4.6566127342e-10
UNIFORM_SCALE_64 = 1.0842020432385337e-19  # its 64-bit branch


def _c(v) -> Constexpr:
    return Constexpr(v)


def _rounds(cx, n_rounds) -> int:
    n = cval(cx, n_rounds, "n_rounds")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        fail(cx, f"n_rounds must be a non-negative integer constexpr, got {n!r}")
    return n


def philox_impl(cx, c0, c1, c2, c3, k0, k1, n_rounds: int):
    """`n_rounds` Philox rounds on counters (c0..c3) with key (k0, k1), all uint32.
    The key bump after the last round feeds nothing, so it is not emitted."""
    for i in range(n_rounds):
        _c0, _c2 = c0, c2
        c0 = S.binary(cx, "^", S.binary(cx, "^", umulhi(cx, _c(PHILOX_ROUND_B), _c2), c1), k0)
        c2 = S.binary(cx, "^", S.binary(cx, "^", umulhi(cx, _c(PHILOX_ROUND_A), _c0), c3), k1)
        c1 = S.binary(cx, "*", _c(PHILOX_ROUND_B), _c2)
        c3 = S.binary(cx, "*", _c(PHILOX_ROUND_A), _c0)
        if i + 1 < n_rounds:
            k0 = S.binary(cx, "+", k0, _c(PHILOX_KEY_A))
            k1 = S.binary(cx, "+", k1, _c(PHILOX_KEY_B))
    return c0, c1, c2, c3


def philox(cx, seed, c0, c1, c2, c3, n_rounds: int):
    """Triton `philox`: the seed (any integer, widened to uint64 by its own signedness) splits
    into key words hi/lo; 32-bit counters only."""
    seed = tensor(cx, seed, "seed")
    if not seed.type.scalar.is_int() or seed.type.scalar.is_bool():
        fail(cx, f"the Philox seed must be an integer, got {seed.type}")
    seed = S.cast(cx, seed, T.uint64)
    seed_hi = S.cast(cx, S.binary(cx, "&", S.binary(cx, ">>", seed, _c(32)), _c(0xFFFFFFFF)), T.uint32)
    seed_lo = S.cast(cx, S.binary(cx, "&", seed, _c(0xFFFFFFFF)), T.uint32)
    c0, c1, c2, c3 = (S.cast(cx, c, T.uint32, bitcast=True) for c in (c0, c1, c2, c3))
    return philox_impl(cx, c0, c1, c2, c3, seed_lo, seed_hi, n_rounds)


def _offset(cx, offset) -> Value:
    off = tensor(cx, offset, "offset")
    if not off.type.scalar.is_int() or off.type.scalar.is_bool():
        fail(cx, f"random offsets must be integers, got {off.type}")
    return off


@builtin("randint4x")
def randint4x(cx, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """Four uint32 blocks shaped like `offset` (Triton returns uint32, despite its docstring's int32).
    Offsets wider than 32 bits feed their high word (arithmetic shift) into the second counter."""
    n = _rounds(cx, n_rounds)
    off = _offset(cx, offset)
    offset_lo = S.cast(cx, off, T.uint32)
    zero = S.binary(cx, "*", offset_lo, _c(0))
    offset_hi = S.cast(cx, S.binary(cx, ">>", off, _c(32)), T.uint32) if off.type.scalar.bits > 32 else zero
    return philox(cx, seed, offset_lo, offset_hi, zero, zero, n)


@builtin("randint")
def randint(cx, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """`tl.randint(seed, offset, n_rounds)`: the first of Philox 4x32's four uint32 outputs (Triton's
    random.randint)."""
    return randint4x(cx, seed, offset, n_rounds)[0]


@builtin("uint_to_uniform_float")
def uint_to_uniform_float(cx, x) -> Value:
    """A random 32- or 64-bit integer as an fp32 in [0, 1): |x| folded onto the non-negatives as
    `x < 0 ? -x - 1 : x`, then scaled (Triton `uint_to_uniform_float`)."""
    x = tensor(cx, x, "x")
    wide = x.type.scalar in (T.DTYPES["uint64"], T.int64)
    if x.type.scalar not in (T.uint32, T.int32) and not wide:
        fail(cx, "static_assert failed: uint_to_uniform_float takes (u)int32 or (u)int64, "
                 f"got {x.type.scalar}")
    x = S.cast(cx, x, T.int64 if wide else T.int32, bitcast=True)
    # a plain assignment in Triton: an fp32 scalar tensor
    scale = S.to_value(cx, _c(UNIFORM_SCALE_64 if wide else UNIFORM_SCALE))
    neg = S.binary(cx, "-", S.unary(cx, "-", x), _c(1))
    x = where(cx, S.binary(cx, "<", x, _c(0)), neg, x)
    return S.binary(cx, "*", x, scale)


@builtin("rand")
def rand(cx, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """An fp32 block in U(0, 1) shaped like `offset`."""
    return uint_to_uniform_float(cx, randint(cx, seed, offset, n_rounds))


@builtin("rand4x")
def rand4x(cx, seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    """`tl.rand4x`: four fp32 blocks uniform in [0, 1) from one Philox call (random.uint_to_uniform_float)."""
    return tuple(uint_to_uniform_float(cx, i) for i in randint4x(cx, seed, offsets, n_rounds))


def pair_uniform_to_normal(cx, u1: Value, u2: Value, both: bool = True):
    """Box–Muller: (r cos θ, r sin θ) with r = sqrt(-2 ln max(1e-7, u1)), θ = 2π u2; with
    `both=False` only r cos θ (the sin would be dead code)."""
    u1 = maximum(cx, _c(1.0e-7), u1)
    th = S.binary(cx, "*", _c(6.283185307179586), u2)
    r = MATH_UNARY["sqrt"](cx, S.binary(cx, "*", _c(-2.0), MATH_UNARY["log"](cx, u1)))
    n1 = S.binary(cx, "*", r, MATH_UNARY["cos"](cx, th))
    return (n1, S.binary(cx, "*", r, MATH_UNARY["sin"](cx, th))) if both else (n1,)


@builtin("pair_uniform_to_normal")
def pair_uniform_to_normal_(cx, u1, u2):
    """`tl.pair_uniform_to_normal(u1, u2)`: two N(0, 1) blocks from two U(0, 1) ones (Box–Muller)."""
    return pair_uniform_to_normal(cx, u1, u2)


def _philox_words(cx, words, what: str):
    vs = [tensor(cx, w, what) for w in words]
    if vs[0].type.scalar.bits == 64:
        fail(cx, f"tl.{what} with 64-bit counters is not supported yet by the ttbuild frontend",
             cls=NotSupportedFrontend)
    return vs


@builtin("philox")
def philox_(cx, seed, c0, c1, c2, c3, n_rounds=N_ROUNDS_DEFAULT):
    """`tl.philox(seed, c0, c1, c2, c3)`: four uint32 blocks, Philox 4x32 of the counters (bitcast
    to uint32) keyed by the seed's two 32-bit halves."""
    c0, c1, c2, c3 = _philox_words(cx, (c0, c1, c2, c3), "philox")
    if c0.type.scalar.bits != 32:
        fail(cx, "static_assert failed: bitwidth not supported in philox")
    return philox(cx, seed, c0, c1, c2, c3, _rounds(cx, n_rounds))


@builtin("philox_impl")
def philox_impl_(cx, c0, c1, c2, c3, k0, k1, n_rounds=N_ROUNDS_DEFAULT):
    """`tl.philox_impl(c0, c1, c2, c3, k0, k1)`: Philox rounds on uint32 counters and key words."""
    words = _philox_words(cx, (c0, c1, c2, c3, k0, k1), "philox_impl")
    if words[0].type.scalar != T.uint32:
        fail(cx, "static_assert failed: dtype not supported in philox_impl")
    return philox_impl(cx, *words, _rounds(cx, n_rounds))


@builtin("randn")
def randn(cx, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """An fp32 block from N(0, 1) shaped like `offset` (first Box–Muller output of counters 0, 1)."""
    i1, i2, _, _ = randint4x(cx, seed, offset, n_rounds)
    u1, u2 = uint_to_uniform_float(cx, i1), uint_to_uniform_float(cx, i2)
    return pair_uniform_to_normal(cx, u1, u2, both=False)[0]


@builtin("randn4x")
def randn4x(cx, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """`tl.randn4x`: four fp32 blocks of standard normals, two Box-Muller pairs over rand4x (Triton's
    random.pair_uniform_to_normal)."""
    u1, u2, u3, u4 = rand4x(cx, seed, offset, n_rounds)
    return pair_uniform_to_normal(cx, u1, u2) + pair_uniform_to_normal(cx, u3, u4)
