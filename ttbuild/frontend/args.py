"""What the `tl.*` rule modules share: argument checks (constexpr values, dtypes, shapes, tensors, pointers, mask/other), the rule collector, and NotSupportedFrontend."""

from __future__ import annotations

import inspect

from ttbuild.errors import CompilationError, NotSupportedYet
from ttbuild.registry import RuleSet

from . import semantic as S
from . import types as T
from .irtext import Value
from .semantic import Constexpr, Ctx, fail


class NotSupportedFrontend(NotSupportedYet):
    """Something Triton accepts that this frontend cannot lower yet; raised like any ttir error
    (with `node_id`, no `loc`), so NotSupportedYet's Loc-taking constructor is bypassed."""

    def __init__(self, message, loc=None, *, stage=None, node_id=None, op=""):
        CompilationError.__init__(self, message, loc, stage=stage, node_id=node_id)
        self.op = op


class BuiltinRules(RuleSet):
    """A frontend rule module's rules: `builtin(*names, method=None)` files a rule under
    `tl.<name>` (table "builtin") and as tensor method `x.<method>(...)` (table "method"), and
    keeps its signature for `builtin_table.call` to bind arguments against."""

    def builtin(self, *names: str, method: str | None = None):
        """Decorator: file the rule under each `tl.<name>` of `names` (table "builtin") and as tensor method
        `x.<method>()` when given, keeping its signature to bind call arguments against."""
        def deco(fn):
            """Register `fn` (see builtin) and return it unchanged."""
            fn.signature = inspect.signature(fn)
            for n in names:
                self.add(n, fn, "builtin")
            if method:
                self.add(method, fn, "method")
            return fn
        return deco


def cval(cx: Ctx, v, what: str):
    """The Python value of a constexpr argument; an IR value here is an error naming `what`."""
    if isinstance(v, Constexpr):
        return v.value
    if isinstance(v, Value):
        fail(cx, f"{what} must be a constexpr, got a runtime value of type {v.type}")
    return v


def dtype_arg(cx: Ctx, v, what: str = "dtype") -> T.DType:
    """The constexpr `v` as a tl dtype (DType). Fails (CompileError) for anything else, naming the argument `what`."""
    d = cval(cx, v, what)
    if isinstance(d, T.DType):
        return d
    fail(cx, f"{what} must be a tl dtype (e.g. tl.float32), got {d!r}")


def tensor(cx: Ctx, v, what: str) -> Value:
    """`v` as a tensor Value: a Python number becomes a scalar of its default dtype (int32 / int64 by value, fp32,
    int1). Fails for other values."""
    if isinstance(v, Value):
        return v
    if S.is_number(v):
        return S.to_value(cx, v)
    fail(cx, f"{what} must be a tensor, got {S.describe(v)}")


def shape_arg(cx: Ctx, v) -> tuple[int, ...]:
    """A shape argument (an int or a sequence of them) as a tuple of ints, each a power of two as Triton requires of
    block dimensions. Fails otherwise."""
    s = cval(cx, v, "shape")
    s = (s,) if isinstance(s, int) else tuple(s)
    if not all(isinstance(d, int) and d > 0 and d & (d - 1) == 0 for d in s):
        fail(cx, f"shape {list(s)} must be a list of powers of two")
    return s


def mask_other(cx, ptr: Value, mask, other):
    """tl.load's `mask` (cast to int1) and `other` (cast to the pointer's element type) broadcast to the pointer's
    shape, each None when not given. Fails for `other` without `mask`, as Triton 3.6 semantic.load does."""
    shape = ptr.type.shape
    if mask is not None and not (isinstance(mask, Constexpr) and mask.value is None):
        m = tensor(cx, mask, "mask")
        if not m.type.scalar.is_bool():
            m = S.cast(cx, m, T.int1)
        mask = S.broadcast_to(cx, m, shape)
    else:
        mask = None
    if other is not None and not (isinstance(other, Constexpr) and other.value is None):
        if mask is None:
            fail(cx, "`other` given without a `mask`")
        elt = ptr.type.scalar.element
        if isinstance(other, Constexpr):
            if not S.is_number(other):
                fail(cx, f"other must be a number or a tensor, got {other.value!r}")
            other = cx.b.constant(other.value, S.with_shape(elt, shape))
        else:
            other = S.broadcast_to(cx, S.cast(cx, other, elt), shape)
    else:
        other = None
    return mask, other


def pointer_arg(cx, pointer, what) -> Value:
    """`pointer` when it is a pointer or a block of pointers. Fails, naming the call `what`, otherwise."""
    if not (isinstance(pointer, Value) and pointer.type.scalar.is_ptr()):
        fail(cx, f"{what} needs a pointer (or a block of pointers), got {S.describe(pointer)}")
    return pointer
