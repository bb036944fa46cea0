"""`tl.dot_scaled`: the product of two microscaled blocks, decomposed into an upcast and `tt.dot` as Triton does without native microscaled dots.

Formats: OCP MX (e2m1 packed two per byte, e4m3, e5m2, bf16, fp16) with one e8m0 scale per 32 elements along K, or NVFP4's e4m3 scale per 16.

The decomposition (Triton 3.6: python/triton/language/semantic.py `dot_scaled`, the checks;
lib/Dialect/TritonGPU/Transforms/DecomposeScaledBlocked.cpp, the rewrite):
- the compute type is fp16 when either format is fp16, else bf16;
- e2m1 bytes hold two elements along K, the first in the low nibble; each nibble's value is
  sign x (exponent 0: mantissa / 2; else (1 + mantissa / 2) x 2^(exponent - 1));
- an e8m0 scale `s` is 2^(s - 127); `lhs_scale` is [M, K/32] and `rhs_scale` [N, K/32] (not
  transposed); each element is multiplied by its group's scale in fp32 (exact: MX elements and
  powers of two), and s = 255 gives NaN unless `fast_math`; an fp8 e4m3 scale (NVFP4: [M, K/16]
  and [N, K/16]) is multiplied as its value;
- `tt.dot` of the upcast blocks with an fp32 (or `out_dtype`) accumulator.
e2m1 packed along M (lhs) or N (rhs) with `lhs_k_pack` / `rhs_k_pack` False is unpacked along
that axis the same way. Rank-3 blocks are batched: one dot per leading index, the scales shared.
"""

from __future__ import annotations

from . import blockops, builtins
from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin

FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
_TYPED = {"e4m3": "fp8e4nv", "e5m2": "fp8e5", "bf16": "bf16", "fp16": "fp16"}
_BITS = {"e4m3": "uint8", "e5m2": "uint8", "bf16": "uint16", "fp16": "uint16"}
GROUP = 32  # elements per e8m0 scale (OCP MX)
E4M3_GROUP = 16  # elements per e4m3 scale (NVFP4)


def _const(cx, value, like: Value) -> Value:
    return cx.b.constant(value, like.type)


def _as_format(cx, v: Value, fmt: str, side: str) -> Value:
    """Triton's `_bitcast_to_fp_type`: the block as its float format (an unsigned block of the
    same width is bitcast); e2m1 must come as uint8."""
    if fmt == "e2m1":
        if v.type.scalar != T.DTYPES["uint8"]:
            fail(cx, f"e2m1 format must be packed as uint8. Got {v.type.scalar} for {side}")
        return v
    want = T.DTYPES[_TYPED[fmt]]
    if v.type.scalar == want:
        return v
    if v.type.scalar != T.DTYPES[_BITS[fmt]]:
        fail(cx, f"Unexpected dtype for {fmt}. Got {v.type.scalar} for {side}")
    return S.cast(cx, v, want, bitcast=True)


def _e2m1_nibbles(cx, packed: Value, k_axis: int) -> Value:
    """uint8 [..] with two e2m1 per byte along `k_axis` -> fp32 with that axis doubled (first
    element from the low nibble). Each byte is repeated along K (expand, broadcast, reshape) and
    element k takes nibble k % 2: no tt.join, whose layout rule (two elements per thread in the
    new dimension) Triton's verifier holds the block to."""
    shape = list(packed.type.shape)
    rank = len(shape)
    twice = blockops.expand_dims(cx, S.cast(cx, packed, T.int32), k_axis + 1)
    wide = shape[:k_axis + 1] + [2] + shape[k_axis + 1:]
    twice = blockops.broadcast_to(cx, twice, Constexpr(tuple(wide)))
    shape[k_axis] *= 2
    x = blockops.reshape(cx, twice, Constexpr(tuple(shape)))
    # the nibble of element k: (k % 2) * 4 bits up, along K
    k = builtins.arange(cx, Constexpr(0), Constexpr(shape[k_axis]))
    shift = S.binary(cx, "*", S.binary(cx, "&", k, Constexpr(1)), Constexpr(4))
    for axis in range(rank):
        if axis != k_axis:
            shift = blockops.expand_dims(cx, shift, axis)
    n = S.binary(cx, "&", S.binary(cx, ">>", x, shift), _const(cx, 15, x))
    e = S.binary(cx, "&", S.binary(cx, ">>", n, _const(cx, 1, n)), _const(cx, 3, n))
    m = S.cast(cx, S.binary(cx, "&", n, _const(cx, 1, n)), T.fp32)
    pow2 = S.cast(cx, S.binary(cx, "<<", _const(cx, 1, e), e), T.fp32)  # 2^e
    normal = S.binary(cx, "*", S.binary(cx, "+", m, _const(cx, 2.0, m)), S.binary(cx, "*", pow2, _const(cx, 0.25, m)))
    sub = S.binary(cx, "*", m, _const(cx, 0.5, m))
    mag = builtins.where(cx, S.compare(cx, "==", e, _const(cx, 0, e)), sub, normal)
    neg = S.compare(cx, "!=", S.binary(cx, "&", n, _const(cx, 8, n)), _const(cx, 0, n))
    return builtins.where(cx, neg, S.unary(cx, "-", mag), mag)


def _scaled(cx, v: Value, scale, k_axis: int, fast_math: bool, side: str) -> Value:
    """fp32 `v` ([rows, K] or [K, rows], with a leading batch dimension for rank 3) times its
    group's scale along `k_axis`: an e8m0 scale (uint8, [rows, K/32]) is 2^(scale - 127), NaN for
    255 unless fast_math; an e4m3 scale (fp8e4nv, [rows, K/16]: NVFP4, tutorial 10's default) is
    its fp8 value, as Triton's decomposition upcasts it. A rank-3 block's scale is one [rows,
    K/group] block for every batch, the shape Triton 3.6's verify_scaled_shape takes."""
    if scale is None or (isinstance(scale, Constexpr) and scale.value is None):
        return v
    e4m3 = isinstance(scale, Value) and scale.type.scalar == T.DTYPES["fp8e4nv"]
    if not isinstance(scale, Value) or not (e4m3 or scale.type.scalar in (T.DTYPES["uint8"], T.DTYPES["int8"])):
        fail(cx, f"a dot_scaled scale must be a uint8 (e8m0) or float8e4nv (e4m3) block, got {S.describe(scale)}")
    group = E4M3_GROUP if e4m3 else GROUP
    shape = v.type.shape
    rank = len(shape)
    rows = shape[2 * rank - 3 - k_axis]  # the other of the last two dimensions
    k = shape[k_axis]
    if tuple(scale.type.shape) != (rows, k // group):
        fail(cx, f"{side}_scale must be a tensor of shape [{rows}, {k // group}]. Got {list(scale.type.shape)}")
    if e4m3:
        f = S.cast(cx, scale, T.fp32)
    else:
        s = S.cast(cx, S.cast(cx, scale, T.DTYPES["uint8"], bitcast=True), T.int32)
        f = S.cast(cx, S.binary(cx, "<<", s, _const(cx, 23, s)), T.fp32, bitcast=True)   # 2^(s - 127)
        if not fast_math:
            nan = cx.b.constant(float("nan"), f.type)
            f = builtins.where(cx, S.compare(cx, "==", s, _const(cx, 255, s)), nan, f)
    f = blockops.expand_dims(cx, f, 2)
    f = blockops.broadcast_to(cx, f, Constexpr((rows, k // group, group)))
    f = blockops.reshape(cx, f, Constexpr((rows, k)))
    if k_axis == rank - 2:
        f = blockops.trans(cx, f)
    if rank == 3:
        f = blockops.broadcast_to(cx, blockops.expand_dims(cx, f, 0), Constexpr(tuple(shape)))
    return S.binary(cx, "*", v, f)


@builtin("dot_scaled")
def dot_scaled(cx, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None, fast_math=False,
               lhs_k_pack=True, rhs_k_pack=True, out_dtype=T.fp32):
    """`tl.dot_scaled` (module docstring): lhs [M, K] and rhs [K, N] blocks, or [B, M, K] and
    [B, K, N]; returns `out_dtype` [M, N] (or [B, M, N]). A packed e2m1 block holds two elements
    per byte along K, or along M (lhs) / N (rhs) with `*_k_pack=False`."""
    fa, fb = cval(cx, lhs_format, "lhs_format"), cval(cx, rhs_format, "rhs_format")
    for side, fmt in (("lhs", fa), ("rhs", fb)):
        if fmt not in FORMATS:
            fail(cx, f"NYI: {side}_format {fmt}")
    if not (isinstance(lhs, Value) and isinstance(rhs, Value) and lhs.type.shape and rhs.type.shape):
        fail(cx, "tl.dot_scaled needs two blocks")
    rank = len(lhs.type.shape)
    if rank != len(rhs.type.shape) or rank not in (2, 3):
        fail(cx, f"Both inputs must be either 2D or 3D; (lhs: {list(lhs.type.shape)} vs rhs: {list(rhs.type.shape)})")
    packs = []
    for side, fmt, pack in (("lhs", fa, lhs_k_pack), ("rhs", fb, rhs_k_pack)):
        k_pack = bool(cval(cx, pack, f"{side}_k_pack"))
        if not k_pack and fmt != "e2m1":
            fail(cx, "only mxfp4 inputs can be packed along a dimension different than K")
        packs.append(k_pack)
    a, b = _as_format(cx, lhs, fa, "lhs"), _as_format(cx, rhs, fb, "rhs")
    ka = a.type.shape[-1] * (2 if fa == "e2m1" and packs[0] else 1)
    kb = b.type.shape[-2] * (2 if fb == "e2m1" and packs[1] else 1)
    if ka != kb:
        fail(cx, f"Reduction dimension should pack the same number of elements; (lhs: {list(lhs.type.shape)} "
                 f"vs rhs: {list(rhs.type.shape)})")
    fast = bool(cval(cx, fast_math, "fast_math"))
    compute = T.fp16 if "fp16" in (fa, fb) else T.bf16
    ops = []
    # (block, format, scale, its K axis, the axis its e2m1 bytes pack along, side)
    for v, fmt, scale, k_axis, pack_axis, side in ((a, fa, lhs_scale, rank - 1, rank - 1 if packs[0] else rank - 2, "lhs"),
                                                   (b, fb, rhs_scale, rank - 2, rank - 2 if packs[1] else rank - 1, "rhs")):
        x = _e2m1_nibbles(cx, v, pack_axis) if fmt == "e2m1" else S.cast(cx, v, T.fp32)
        ops.append(S.cast(cx, _scaled(cx, x, scale, k_axis, fast, side), compute))
    return blockops.dot(cx, ops[0], ops[1], acc, None, None, None, out_dtype)
