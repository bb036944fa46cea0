"""Signature strings in Triton's AOT type syntax (`*fp32:16,i32`; constant values go in `constexprs`, not inline): the one grammar, parsed into typed entries or ValueError; stdlib only.

The types and `:16` hints are Triton's (triton.language.str_to_ty, tools/compile.py). What
tools/compile.py also takes, and this grammar does not: inline constant values (`1024`,
`i32:1`); a row gives those in its `constexprs` table, by name.

Used by the variant list (graph/variants.py), the frontend (frontend/codegen.py) and the
runtime's metadata checks (runtime/metadata.py), so all three agree on what is valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttbuild.errors import TTBuildError

# Dtype names as Triton spells them in signatures (triton/compiler/code_generator.py,
# triton/tools/compile.py), with their size in bytes; docs/CONTRACTS.md lists the same set.
DTYPE_BYTES = {
    "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
    "u8": 1, "u16": 2, "u32": 4, "u64": 8,
    "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "fp8e4nv": 1, "fp8e5": 1,
}
DTYPES = frozenset(DTYPE_BYTES)

# Other spellings Triton accepts (triton.language.str_to_ty: `u1` is int1), read as the
# canonical name: a parsed entry always prints canonically, so metadata and keys see one spelling.
ALIASES = {"u1": "i1"}
# Spellings Triton refuses (str_to_ty has no `f16`), named with Triton's word in the error.
MISSPELLED = {"f16": "fp16", "f32": "fp32", "f64": "fp64", "bfloat16": "bf16", "float16": "fp16",
              "float32": "fp32", "int32": "i32", "int64": "i64"}

# Triton's frontend dtype name of each signature dtype (triton.language: int32, uint8, ...).
LANGUAGE_NAMES = {"i1": "int1", **{f"i{b}": f"int{b}" for b in (8, 16, 32, 64)},
                  **{f"u{b}": f"uint{b}" for b in (8, 16, 32, 64)},
                  **{n: n for n in ("fp8e4nv", "fp8e5", "fp16", "bf16", "fp32", "fp64")}}

# Triton specialises on 16: an address or integer value that is a multiple of 16
# (`tt.divisibility = 16`). 1 means "nothing known" and is the default.
DIVISIBILITIES = (1, 16)


class SignatureError(TTBuildError, ValueError):
    """A signature entry the compiler cannot use; `field` is "dtype", "divisibility" or "entry"."""

    def __init__(self, message: str, field: str = "entry"):
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class SigEntry:
    """One non-constexpr kernel parameter: `kind` is "pointer", "scalar" or "tensordesc",
    `dtype` a Triton signature dtype name (the pointee for pointers and descriptors; canonical,
    see DTYPES), `divisibility` 1 or 16 (bytes for pointers, value for integers),
    `block_shape` a descriptor's block (`tensordesc<fp16[64, 64]>`; () otherwise)."""

    kind: str
    dtype: str
    divisibility: int = 1
    block_shape: tuple[int, ...] = ()

    @property
    def is_pointer(self) -> bool:
        """A pointer parameter (`*fp16`)."""
        return self.kind == "pointer"

    @property
    def is_descriptor(self) -> bool:
        """A tensor descriptor parameter (`tensordesc<fp16[64, 64]>`), passed expanded
        (ttbuild.frontend.abi.runtime_params: the kernel ABI)."""
        return self.kind == "tensordesc"

    @property
    def language_dtype(self) -> str:
        """The dtype's triton.language name: "i32" -> "int32", "fp16" -> "fp16"."""
        return LANGUAGE_NAMES[self.dtype]

    def __str__(self) -> str:
        if self.is_descriptor:
            div = f":{self.divisibility}" if self.divisibility != 1 else ""
            return f"tensordesc<{self.dtype}[{', '.join(map(str, self.block_shape))}]>{div}"
        star = "*" if self.is_pointer else ""
        div = f":{self.divisibility}" if self.divisibility != 1 else ""
        return f"{star}{self.dtype}{div}"


def parse_entry(text: str) -> SigEntry:
    """Parse one entry: `*fp32:16`, `i32`, `fp16`, `*u8`, `i64:16` (Triton's alias `u1` read as
    `i1`; `f16`, `f32`, which Triton refuses, are refused naming Triton's spelling).

    Raises SignatureError (a ValueError; `field` says which part is wrong) for an empty entry,
    an unknown dtype, a divisibility other than 1 or 16, a divisibility on a float scalar. A
    tensor descriptor is `tensordesc<fp16[64, 64]>` (Triton's spelling of a host
    TensorDescriptor parameter): 1 to 5 block dimensions, each a power of two, at least 16
    bytes in the last (python/triton/language/semantic.py, make_tensor_descriptor).
    """
    if text.strip().startswith("tensordesc"):
        return _descriptor(text.strip())
    item = text.strip() if isinstance(text, str) else ""
    if not item:
        raise SignatureError("entry is empty (stray comma?)")
    pointer = item.startswith("*")
    body = item[1:] if pointer else item
    dtype, sep, div_text = body.partition(":")
    dtype = ALIASES.get(dtype, dtype)
    if dtype in MISSPELLED:
        raise SignatureError(f"unknown dtype {dtype!r}: Triton's signature spells it {MISSPELLED[dtype]!r}", "dtype")
    if dtype not in DTYPES:
        hint = (" (a constant value, which Triton's tools/compile.py takes inline, goes in `constexprs`)"
                if dtype.lstrip("-").replace(".", "", 1).isdigit() else "")
        raise SignatureError(f"unknown dtype {body.partition(':')[0]!r}{hint}; "
                             f"expected one of {' '.join(sorted(DTYPES))}", "dtype")
    divisibility = 1
    if sep:
        if div_text.strip() == "1":  # tools/compile.py: `i32:1` is the constant 1, not "no hint"
            raise SignatureError("':1' makes the parameter the constant 1 in Triton's tools/compile.py: give it in "
                                 "`constexprs`, or drop ':1' (no divisibility hint)", "divisibility")
        if not div_text.isdigit() or int(div_text) not in DIVISIBILITIES:
            raise SignatureError(f"divisibility must be 16, got {div_text!r}", "divisibility")
        divisibility = int(div_text)
        if not pointer and not dtype.startswith(("i", "u")):
            raise SignatureError("only pointers and integers take a divisibility", "divisibility")
    return SigEntry("pointer" if pointer else "scalar", dtype, divisibility)


_DESC = re.compile(r"tensordesc<\s*(\w+)\s*\[([^\]]*)\]\s*(?:,[^>]*)?>(?::(\d+))?\Z")


def _descriptor(text: str) -> SigEntry:
    m = _DESC.match(text)
    if not m:
        raise SignatureError(f"{text!r} is not a tensor descriptor entry like tensordesc<fp16[64, 64]>", "dtype")
    dtype = ALIASES.get(m.group(1), m.group(1))
    if dtype in MISSPELLED:
        raise SignatureError(f"unknown dtype {dtype!r} in {text!r}: Triton spells it {MISSPELLED[dtype]!r}", "dtype")
    if dtype not in DTYPES:
        raise SignatureError(f"unknown dtype {m.group(1)!r} in {text!r}; expected one of {' '.join(sorted(DTYPES))}",
                             "dtype")
    try:
        block = tuple(int(x) for x in m.group(2).split(",") if x.strip())
    except ValueError:
        raise SignatureError(f"{text!r}: the block shape must be integers", "dtype") from None
    if not 1 <= len(block) <= 5 or not all(d > 0 and d & (d - 1) == 0 for d in block):
        raise SignatureError(f"{text!r}: a descriptor block has 1 to 5 dimensions, each a power of two", "dtype")
    if block[-1] * DTYPE_BYTES[dtype] < 16:
        raise SignatureError(f"{text!r}: Descriptor block shape must have at least 16 bytes in the last "
                             f"dimension, but got {block[-1]} * {DTYPE_BYTES[dtype]} = "
                             f"{block[-1] * DTYPE_BYTES[dtype]} bytes", "dtype")
    div = int(m.group(3) or 1)
    if div not in DIVISIBILITIES:
        raise SignatureError(f"{text!r}: divisibility must be 16, got {div}", "divisibility")
    return SigEntry("tensordesc", dtype, div, block)


def split_entries(text: str) -> list[str]:
    """The entries of a signature, split at the commas outside brackets: a tensor descriptor
    entry (`tensordesc<fp16[64, 64]>`) stays whole. The same split serves IR and PTX operand
    lists (`<bfloat 0xR3F80, bfloat 0xR4000>`, `{ %r1, %r2 }` stay whole)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<[({":
            depth += 1
        elif ch in ">])}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def parse_signature(text: str) -> list[SigEntry]:
    """Parse `"*fp32:16,*fp32:16,i32"` into SigEntry items, one per non-constexpr parameter.

    Raises SignatureError naming the bad entry (by 1-based position) and why: unknown dtype,
    divisibility other than 16, a float scalar with a divisibility, or an empty entry.
    Constant values (Triton AOT's `1024` entries) belong in `constexprs`, not here.
    """
    if not isinstance(text, str) or not text.strip():
        raise SignatureError("signature is empty: list the non-constexpr parameters, e.g. '*fp32:16,i32'")
    entries = []
    for pos, raw in enumerate(split_entries(text), start=1):
        item = raw.strip()
        if not item:
            raise SignatureError(f"entry {pos} is empty (stray comma?)")
        try:
            entries.append(parse_entry(item))
        except SignatureError as exc:
            raise SignatureError(f"entry {pos} {item!r}: {exc}", exc.field) from None
    return entries
