"""Lowering rules for `tl.atomic_*`: tt.atomic_rmw and tt.atomic_cas, with Triton 3.6's type checks and defaults (acq_rel, gpu scope)."""

from __future__ import annotations

from . import semantic as S
from . import types as T
from .args import BuiltinRules, cval, mask_other, pointer_arg
from .irtext import Value
from .semantic import fail

RULES = BuiltinRules()  # this module's rules; ttbuild.frontend.builtin_table builds the tables
builtin = RULES.builtin


# triton::RMWOp, MemSemantic, MemSyncScope (I32EnumAttr values, TritonAttrDefs.td).
_RMW = {"and": 1, "or": 2, "xor": 3, "add": 4, "fadd": 5, "max": 6, "min": 7, "umax": 8, "umin": 9, "xchg": 10}
_SEM = {"relaxed": 1, "acquire": 2, "release": 3, "acq_rel": 4}
_SCOPE = {"gpu": 1, "cta": 2, "sys": 3}


def atomic_rmw(cx, op: str, pointer, val, mask, sem, scope):
    """tt.atomic_rmw with Triton 3.6's checks (`semantic.atom_red_typechecking_impl`): no int1/
    int8/int16/uint16 elements, fp16 and bf16 only for add; value cast to the element type; mask
    defaults to all. Raises CompileError at the call otherwise."""
    ptr = pointer_arg(cx, pointer, f"tl.atomic_{op}")
    elt = ptr.type.scalar.element
    if elt in (T.DTYPES["int16"], T.DTYPES["uint16"]) or elt.bits < 16 or (elt in (T.fp16, T.bf16) and op != "add"):
        fail(cx, f"atomic_{op} does not support {elt}")
    shape = ptr.type.shape
    v = S.broadcast_to(cx, S.cast(cx, val, elt) if isinstance(val, Value) else S.to_value(cx, val, elt), shape)
    m, _ = mask_other(cx, ptr, mask, None)
    if m is None:
        m = cx.b.constant(True, S.with_shape(T.int1, shape))
    s, sc = cval(cx, sem, "sem") or "acq_rel", cval(cx, scope, "scope") or "gpu"
    if s not in _SEM or sc not in _SCOPE:
        fail(cx, f"unknown memory semantic {s!r} or scope {sc!r}")
    if op in ("max", "min"):
        if elt.is_float():
            return _float_minmax(cx, op, ptr, v, m, s, sc)
        op = ("u" + op) if elt.is_unsigned() else op
    elif op == "add" and elt.is_float():
        op = "fadd"
    return _rmw(cx, op, ptr, v, m, s, sc)


def _rmw(cx, op, ptr, v, m, s, sc):
    return cx.b.op1("tt.atomic_rmw", [ptr, v, m], v.type,
                    {"atomic_rmw_op": f"{_RMW[op]} : i32", "sem": f"{_SEM[s]} : i32", "scope": f"{_SCOPE[sc]} : i32"})


def _float_minmax(cx, op, ptr, v, m, s, sc):
    """Triton 3.6 `semantic.atomic_max/min` on fp32/fp64 through integer atomics: IEEE floats
    with the sign bit clear order like their bits as signed integers, those with it set in
    reverse as unsigned ones. max: signed MAX where the value's sign bit is clear, unsigned MIN
    where it is set (min: signed MIN, unsigned MAX); the old value is the one of the atomic that
    ran, bits back as the float."""
    elt = v.type.scalar
    if elt not in (T.fp32, T.fp64):
        fail(cx, f"atomic_{op} not supported for dtype {elt}")
    bits = elt.bits
    ity, uty = T.DTYPES[f"int{bits}"], T.DTYPES[f"uint{bits}"]
    i_val, u_val = S.cast(cx, v, ity, bitcast=True), S.cast(cx, v, uty, bitcast=True)
    i_ptr = S.cast(cx, ptr, T.PointerType(ity), bitcast=True)
    u_ptr = S.cast(cx, ptr, T.PointerType(uty), bitcast=True)
    neg = S.compare(cx, "<", i_val, cx.b.constant(0, i_val.type))   # the sign bit (Triton _signbit)
    pos = S.compare(cx, ">=", i_val, cx.b.constant(0, i_val.type))
    pos_old = _rmw(cx, op, i_ptr, i_val, S.binary(cx, "&", m, pos), s, sc)
    neg_old = _rmw(cx, "umin" if op == "max" else "umax", u_ptr, u_val, S.binary(cx, "&", m, neg), s, sc)
    a, b = S.cast(cx, pos_old, elt, bitcast=True), S.cast(cx, neg_old, elt, bitcast=True)
    return cx.b.op1("arith.select", [pos, a, b], v.type)




for _op in ("add", "max", "min", "and", "or", "xor", "xchg"):
    def _rule(cx, pointer, val, mask=None, sem=None, scope=None, _op=_op):
        return atomic_rmw(cx, _op, pointer, val, mask, sem, scope)
    builtin(f"atomic_{_op}")(_rule)


@builtin("atomic_cas")
def atomic_cas(cx, pointer, cmp, val, sem=None, scope=None):
    ptr = pointer_arg(cx, pointer, "tl.atomic_cas")
    elt = ptr.type.scalar.element
    if elt.bits not in (16, 32, 64) or elt == T.bf16:
        fail(cx, f"atomic_cas does not support {elt}")
    shape = ptr.type.shape
    c, v = (S.broadcast_to(cx, S.cast(cx, x, elt) if isinstance(x, Value) else S.to_value(cx, x, elt), shape)
            for x in (cmp, val))
    s, sc = cval(cx, sem, "sem") or "acq_rel", cval(cx, scope, "scope") or "gpu"
    return cx.b.op1("tt.atomic_cas", [ptr, c, v], S.with_shape(elt, shape),
                    {"sem": f"{_SEM[s]} : i32", "scope": f"{_SCOPE[sc]} : i32"})
