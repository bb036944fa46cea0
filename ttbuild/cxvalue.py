"""A constexpr's value in its three spellings: variants.toml (`{ none = true }`, `{ dtype = "bf16" }`), the build's and metadata's JSON (null, {"dtype": "bf16"}), a live call's (None, tl.bfloat16).

Triton 3.6 passes a `None` argument and a `tl.constexpr` parameter given a `tl.dtype` to the
kernel as constexprs (python/triton/runtime/jit.py `create_function_from_signature`: a
constexpr parameter's key is the object itself; python/src/specialize.cc: None is
"constexpr"). TOML has no null, and a dtype name written as a plain string would read as the
string constexpr "bf16": both take an inline table in a row's `constexprs`. The build, the
stage keys and the metadata carry None as JSON null and a dtype as {"dtype": name} (Triton's
`dtype.name`, which `str(tl.int32)` prints: int32, uint8, fp16, bf16, fp32, ...; a row may also
write the signature's i32, u8, ...), so a string constexpr stays a string. Standard library only:
the runtime (no compiler) matches a call's values with `matches`, and gives a grid callable the
live object (`to_live`) that Triton would pass it.
"""

from __future__ import annotations

import sys

# Triton's dtype names (triton.language.core.dtype SINT_TYPES, UINT_TYPES, FP_TYPES, OTHER_TYPES).
DTYPE_NAMES = frozenset(("int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "fp8e4b15",
                         "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64", "void"))
# the signature grammar's integer names (ttbuild.signature.LANGUAGE_NAMES), read as Triton's
ALIASES = {"i1": "int1", **{f"i{b}": f"int{b}" for b in (8, 16, 32, 64)}, **{f"u{b}": f"uint{b}" for b in (8, 16, 32, 64)}}


def dtype_name(name) -> str | None:
    """Triton's name of a dtype name in either spelling ("i32" and "int32" -> "int32"), else None."""
    if not isinstance(name, str):
        return None
    name = ALIASES.get(name, name)
    return name if name in DTYPE_NAMES else None


def from_toml(value):
    """The build's value of a row's constexpr: `{ none = true }` -> None, `{ dtype = "bf16" }` ->
    {"dtype": "bf16"}, anything else as it is. Raises ValueError (the message names the forms)
    for any other table."""
    if not isinstance(value, dict):
        return value
    if value == {"none": True}:
        return None
    if set(value) == {"dtype"}:
        name = dtype_name(value["dtype"])
        if name is not None:
            return {"dtype": name}
        name = value["dtype"]
        raise ValueError(f"{{ dtype = {name!r} }}: not a Triton dtype name (one of {' '.join(sorted(DTYPE_NAMES))})")
    raise ValueError(f"{value!r}: a table value is {{ none = true }} (a None argument) or {{ dtype = \"bf16\" }} "
                     "(a tl.dtype constexpr)")


def to_toml(value):
    """A build value's row spelling (None -> {"none": True}); the inverse of from_toml."""
    return {"none": True} if value is None else value


def dtype_of(value) -> str | None:
    """The Triton name of a dtype value in any spelling ({"dtype": n}, a live tl.dtype, the
    runtime façade's, a tl.constexpr around one), else None. A live dtype is known by its
    class (or a base) being named `dtype` with a str `name`, as triton.language.core.dtype and
    ttbuild's façade are: the runtime never imports triton."""
    if isinstance(value, dict):
        return dtype_name(value.get("dtype")) if len(value) == 1 else None
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        value = value.value
    if any(c.__name__ == "dtype" for c in type(value).__mro__):
        return dtype_name(getattr(value, "name", None))
    return None


def to_json(value):
    """A live constexpr's JSON form for records and rows: a dtype as {"dtype": name}, a
    tl.constexpr unwrapped; other values as they are (json.dumps may still refuse them)."""
    name = dtype_of(value)
    if name is not None:
        return {"dtype": name}
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return value.value
    return value


# Triton's dtype name -> the `triton.language` attribute holding that dtype (triton/language/core.py)
_ATTRS = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8e4nv": "float8e4nv",
          "fp8e5": "float8e5", "fp8e4b15": "float8e4b15", "fp8e4b8": "float8e4b8", "fp8e5b16": "float8e5b16"}


def live_dtype(name: str):
    """The dtype object named `name` (Triton's name: "fp16", "int32") as kernel code sees it: the
    `triton.language` module's own (`tl.float16`), real Triton's or ttbuild's façade, when that
    module is imported; else ttbuild.language's (`ttbuild.language.float16`). Never imports triton."""
    for module in (sys.modules.get("triton.language"), sys.modules.get("ttbuild.language")):
        if module is None:
            continue
        found = getattr(module, _ATTRS.get(name, name), None)
        if dtype_of(found) == name:
            return found
        make = getattr(module, "dtype", None)
        if isinstance(make, type):
            return make(name)
    from . import language

    return language.dtype(name)


def to_live(value):
    """A build/metadata constexpr as a call passes it: {"dtype": name} -> live_dtype(name); any
    other value as it is (None, ints, floats, bools and strings are the same in both forms)."""
    if type(value) is dict:
        name = dtype_of(value)
        if name is not None:
            return live_dtype(name)
    return value


def matches(have, value) -> bool:
    """Whether a variant's constexpr `have` (build/metadata form) takes the call's `value`:
    None only None; a dtype the same dtype by name (a live tl.dtype, the façade's, or its JSON
    form); a bool only a bool (Triton keys a bool apart from an int); else equal."""
    if have is None:
        return value is None
    if isinstance(have, dict):
        name = dtype_of(have)
        return name is not None and dtype_of(value) == name
    if value is None or isinstance(value, dict):
        return False
    if type(have) is bool and type(value) is not bool:
        return False
    try:
        return bool(have == value)
    except Exception:  # an object whose == refuses a plain value (a tensor, say) is no match
        return False
