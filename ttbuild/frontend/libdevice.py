"""`libdevice.<name>(...)`: the whole namespace of NVIDIA's libdevice, read from its bitcode, called as `tt.extern_elementwise` as Triton does.

Reached as triton.language.extra.libdevice or tl.extra.cuda.libdevice.

Triton's `triton/language/extra/cuda/libdevice.py` lists each function with its overloads
(argument dtypes -> `__nv_*` symbol). The same table comes here from the libdevice bitcode
ttbuild links (ttbuild.toolchain.libdevice_path): every `__nv_X` with scalar arguments is
callable as `X`, a float/double pair `__nv_Xf` / `__nv_X` (or `__nv_Xf` / `__nv_Xd`) as `X` on
fp32 / fp64, an int/long long pair `__nv_X` / `__nv_Xll` as `X` on int32 / int64. Arguments are
broadcast to one shape; their dtypes pick the overload (no implicit conversion, as in Triton:
an fp16 block must be cast first).
"""

from __future__ import annotations

import functools

from . import semantic as S
from . import types as T
from .irtext import Value
from .semantic import Constexpr, fail

# LLVM scalar type -> the dtype a kernel sees (signless integers match signed and unsigned)
_LLVM_DTYPE = {"float": "fp32", "double": "fp64", "half": "fp16", "i64": "int64", "i32": "int32",
               "i16": "int16", "i8": "int8", "i1": "int1"}


@functools.cache
def table() -> dict[str, dict[tuple[str, ...], tuple[str, str]]]:
    """name -> {argument dtypes: (symbol, result dtype)} for every libdevice function with
    scalar arguments and result."""
    import re

    import llvmlite.binding as llvm

    from ttbuild.toolchain import libdevice_path

    mod = llvm.parse_bitcode(libdevice_path().read_bytes())
    sigs = {}
    for f in mod.functions:
        if not f.name.startswith("__nv_"):
            continue
        m = re.fullmatch(r"(\S+) \((.*)\)", str(f.global_value_type))
        if not m:
            continue
        ret, params = m.group(1), [p.strip() for p in m.group(2).split(",") if p.strip()]
        if ret not in _LLVM_DTYPE or not all(p in _LLVM_DTYPE for p in params):
            continue  # pointer out-parameters (frexp, sincos...) and void: not elementwise
        sigs[f.name[len("__nv_"):]] = (tuple(_LLVM_DTYPE[p] for p in params), _LLVM_DTYPE[ret])
    out: dict[str, dict] = {}

    def add(name, sym):
        args, ret = sigs[sym]
        out.setdefault(name, {}).setdefault(args, (f"__nv_{sym}", ret))

    for sym in sigs:
        add(sym, sym)
        if sym.endswith("f") and (sym[:-1] in sigs or sym[:-1] + "d" in sigs):
            add(sym[:-1], sym)  # asinf -> asin (fp32), isnanf -> isnan
        if sym.endswith("d") and sym[:-1] + "f" in sigs:
            add(sym[:-1], sym)  # isnand -> isnan (fp64)
        if sym.endswith("ll") and sym[:-2] in sigs:
            add(sym[:-2], sym)  # clzll -> clz (int64)
    return out


def has(name: str) -> bool:
    try:
        return name in table()
    except Exception:  # no libdevice here: every name is unknown, and says so when called
        return False


def call(cx, name: str, args: list, kwargs: dict) -> Value:
    """`libdevice.<name>(*args)`: tt.extern_elementwise of the overload the argument dtypes
    pick, on their common shape. Raises CompilationError for keywords, a name libdevice does
    not have, or dtypes no overload takes (naming the ones it does)."""
    if kwargs:
        fail(cx, f"libdevice.{name} takes positional arguments only")
    overloads = table().get(name)
    if overloads is None:
        fail(cx, f"libdevice has no function {name!r}")
    first = next((a for a in args if isinstance(a, Value)), None)
    vals = []
    for a in args:
        if isinstance(a, Constexpr):
            dt = first.type.scalar if first is not None and isinstance(a.value, float) == first.type.scalar.is_float() \
                else None
            a = S.to_value(cx, a, dt)
        if not isinstance(a, Value):
            fail(cx, f"libdevice.{name} takes tensors and numbers, got {S.describe(a)}")
        vals.append(a)
    for i in range(1, len(vals)):  # one common shape (Triton broadcasts extern arguments)
        vals[0], vals[i] = S.broadcast_pair(cx, vals[0], vals[i])
    shape = tuple(vals[0].type.shape) if vals else ()
    vals = [v if tuple(v.type.shape) == shape else S.broadcast_to(cx, v, shape) for v in vals]
    key = tuple(str(_unsigned_as_signed(v.type.scalar)) for v in vals)
    hit = overloads.get(key)
    if hit is None:
        takes = "; ".join("(" + ", ".join(k) + ")" for k in sorted(overloads))
        fail(cx, f"libdevice.{name} takes {takes}, got ({', '.join(str(v.type.scalar) for v in vals)})")
    symbol, ret = hit
    props = {"libname": '""', "libpath": '""', "pure": "true", "symbol": f'"{symbol}"'}
    return cx.b.op1("tt.extern_elementwise", vals, S.with_shape(T.DTYPES[ret], shape), props)


def _unsigned_as_signed(dt):
    """uint32 -> int32 &c.: libdevice's integer arguments are signless."""
    return T.DTYPES[dt.name[1:]] if dt.name.startswith("uint") else dt
