"""Lowering rules for block-shaped `tl` builtins: expand_dims, broadcast, trans, reshape, dot (tt.dot).

Collected in this module's RULES (tables: builtin_table); semantics from Triton 3.6
`triton/language/{core,standard,semantic}.py`.
"""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval, dtype_arg, shape_arg, tensor
from .irtext import Value
from .semantic import Constexpr, fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


@builtin("expand_dims", method="expand_dims")
def expand_dims(cx, input, axis):
    """`tl.expand_dims(input, axis)`: size-1 dimensions inserted at `axis` (an int or a sequence, inserted in
    ascending order, Triton 3.6 core.expand_dims)."""
    v = tensor(cx, input, "input")
    axes = cval(cx, axis, "axis")
    for a in ([axes] if isinstance(axes, int) else sorted(axes)):
        v = S.expand_dims(cx, v, a)
    return v


@builtin("broadcast_to", method="broadcast_to")
def broadcast_to(cx, input, *shape):
    """`tl.broadcast_to(input, shape)`: `input` broadcast to `shape` (a sequence or the dimensions as arguments;
    powers of two). Fails when the shapes do not broadcast."""
    dims = shape[0] if len(shape) == 1 else Constexpr(tuple(cval(cx, d, "shape") for d in shape))
    return S.broadcast_to(cx, tensor(cx, input, "input"), shape_arg(cx, dims))


@builtin("broadcast")
def broadcast(cx, input, other):
    """`tl.broadcast(input, other)`: both broadcast to their common shape; returns `input`'s, as Triton 3.6's rule
    for a single result."""
    a, b = S.broadcast_pair(cx, tensor(cx, input, "input"), tensor(cx, other, "other"))
    return a


_PRECISION = {"tf32": 0, "tf32x3": 1, "ieee": 2}  # triton::InputPrecision (I32EnumAttr)


@builtin("dot")
def dot(cx, input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=T.fp32):
    """`tl.dot` → tt.dot (Triton `semantic.dot`): 2-D or 3-D blocks of one dtype, K matching;
    fp16/fp8 accumulate in `out_dtype`, fp32/bf16 in fp32, int8 in int32; default precision tf32."""
    a, b = tensor(cx, input, "input"), tensor(cx, other, "other")
    if len(a.type.shape) not in (2, 3) or len(a.type.shape) != len(b.type.shape):
        fail(cx, f"tl.dot needs two 2-D (or 3-D) blocks, got shapes {list(a.type.shape)} and {list(b.type.shape)}")
    if a.type.shape[-1] != b.type.shape[-2]:
        fail(cx, f"tl.dot shapes {list(a.type.shape)} and {list(b.type.shape)} do not match in K")
    sa, sb = a.type.scalar, b.type.scalar
    if not (sa.is_fp8() and sb.is_fp8()) and sa != sb:
        fail(cx, f"tl.dot operands must have the same dtype, got {sa} and {sb}")
    if min(a.type.shape[-2], a.type.shape[-1], b.type.shape[-1]) < 16:
        fail(cx, f"tl.dot needs M, N, K >= 16, got shapes {list(a.type.shape)} and {list(b.type.shape)}")
    od = dtype_arg(cx, out_dtype, "out_dtype")
    if sa.is_int():
        if sa.name != "int8":
            fail(cx, "tl.dot supports int8 integer operands only")
        rt = T.int32
    elif od == T.bf16:
        fail(cx, "out_dtype=bfloat16 is unsupported: use float32/float16 and cast with .to(tl.bfloat16)")
    elif sa in (T.fp32, T.bf16):
        rt = T.fp32
    elif sa == T.fp64:
        rt = T.fp64
    else:
        rt = od
    prec = cval(cx, input_precision, "input_precision")
    tf32 = cval(cx, allow_tf32, "allow_tf32")
    if prec is None:
        prec = "tf32" if tf32 is None or tf32 else "ieee"
    if prec not in _PRECISION:
        fail(cx, f"input_precision must be one of {sorted(_PRECISION)}, got {prec!r}")
    shape = a.type.shape[:-1] + b.type.shape[-1:]
    rty = T.BlockType(rt, shape)
    if acc is None or (isinstance(acc, Constexpr) and acc.value is None):
        c = cx.b.constant(0, rty)
    else:
        c = tensor(cx, acc, "acc")
        if c.type != rty:
            fail(cx, f"tl.dot accumulator must be {rty}, got {c.type}")
    imprecise = cval(cx, max_num_imprecise_acc, "max_num_imprecise_acc")
    return cx.b.op1("tt.dot", [a, b, c], rty, {"inputPrecision": f"{_PRECISION[prec]} : i32",
                                                 "maxNumImpreciseAcc": f"{imprecise or 0} : i32"})


def _need_tensor(cx, input, what: str) -> Value:
    if not isinstance(input, Value):
        fail(cx, f"tl.{what} needs a tensor, got {S.describe(input)}")
    return input


@builtin("trans", "permute", method="trans")
def trans(cx, input, *dims):
    """`tl.trans(x)` swaps the two dims of a 2-D block; `tl.trans(x, 1, 0, 2)` / `tl.permute`
    take an explicit order → tt.trans <{order = array<i32: ...>}>."""
    v = _need_tensor(cx, input, "trans")
    rank = len(v.type.shape)
    if len(dims) == 1 and isinstance(cval(cx, dims[0], "dims"), (tuple, list)):
        order = tuple(cval(cx, dims[0], "dims"))
    elif dims:
        order = tuple(cval(cx, d, "dims") for d in dims)
    elif rank == 2:
        order = (1, 0)
    else:
        fail(cx, f"tl.trans of a rank-{rank} block needs an explicit order")
    if sorted(order) != list(range(rank)):
        fail(cx, f"tl.trans order {list(order)} is not a permutation of {rank} dims")
    shape = tuple(v.type.shape[i] for i in order)
    return cx.b.op1("tt.trans", [v], T.BlockType(v.type.scalar, shape),
                    {"order": "array<i32: " + ", ".join(map(str, order)) + ">"})


@builtin("reshape", method="reshape")
def reshape(cx, input, *shape, can_reorder=False):
    """`tl.reshape(x, shape)` → tt.reshape; element count must match (Triton `semantic.reshape`)."""
    v = _need_tensor(cx, input, "reshape")
    if not v.type.shape:  # Triton 3.6 fails reading `.numel` of the scalar type (an AttributeError)
        fail(cx, f"tl.reshape needs a block, got a scalar of type {v.type}")
    dims = shape[0] if len(shape) == 1 else Constexpr(tuple(cval(cx, d, "shape") for d in shape))
    new = shape_arg(cx, dims)
    n_old = n_new = 1
    for d in v.type.shape:
        n_old *= d
    for d in new:
        n_new *= d
    if n_old != n_new:
        fail(cx, f"cannot reshape a block of {n_old} elements {list(v.type.shape)} to {list(new)}")
    props = {"allow_reorder": "true"} if cval(cx, can_reorder, "can_reorder") else None
    return cx.b.op1("tt.reshape", [v], T.BlockType(v.type.scalar, new), props)


@builtin("view", method="view")
def view(cx, input, *shape):
    """`tl.view(x, shape)` / `x.view(shape)`: Triton 3.6 `core.view` warns that it is deprecated,
    then reshapes with can_reorder=True."""
    S.warn(cx, "view is deprecated, please use reshape with can_reorder being true.")
    return reshape(cx, input, *shape, can_reorder=True)


@builtin("ravel", method="ravel")
def ravel(cx, x, can_reorder=False):
    """`tl.ravel(x)`: x reshaped to 1-D (Triton `standard.ravel`: reshape to [x.numel])."""
    v = _need_tensor(cx, x, "ravel")
    n = 1
    for d in v.type.shape:
        n *= d
    return reshape(cx, v, Constexpr((n,)), can_reorder=can_reorder)
