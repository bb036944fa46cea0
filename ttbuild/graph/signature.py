"""Triton AOT signature strings (`*fp32:16,i32`) parsed into typed parameter entries, or ValueError."""

from __future__ import annotations

from dataclasses import dataclass

# Dtype names as Triton spells them in signatures (triton/compiler/code_generator.py,
# triton/tools/compile.py); the contract in docs/CONTRACTS.md lists the same set.
DTYPES = frozenset(
    "i1 i8 i16 i32 i64 u8 u16 u32 u64 fp16 bf16 fp32 fp64 fp8e4nv fp8e5".split())

# Triton specialises on 16: an address or integer value that is a multiple of 16
# (`tt.divisibility = 16`). 1 means "nothing known" and is the default.
DIVISIBILITIES = (1, 16)


@dataclass(frozen=True)
class SigEntry:
    """One non-constexpr kernel parameter: `kind` is "pointer" or "scalar", `dtype` a Triton
    dtype name (the pointee for pointers), `divisibility` 1 or 16 (bytes for pointers, value
    for integers)."""

    kind: str
    dtype: str
    divisibility: int = 1

    def __str__(self) -> str:
        star = "*" if self.kind == "pointer" else ""
        div = f":{self.divisibility}" if self.divisibility != 1 else ""
        return f"{star}{self.dtype}{div}"


def parse_signature(text: str) -> list[SigEntry]:
    """Parse `"*fp32:16,*fp32:16,i32"` into SigEntry items, one per non-constexpr parameter.

    Raises ValueError naming the bad entry (by 1-based position) and why: unknown dtype,
    divisibility other than 16, a float scalar with a divisibility, or an empty entry.
    Constant values (Triton AOT's `1024` entries) belong in `constexprs`, not here.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("signature is empty: list the non-constexpr parameters, e.g. '*fp32:16,i32'")
    entries = []
    for pos, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            raise ValueError(f"entry {pos} is empty (stray comma?)")
        pointer = item.startswith("*")
        body = item[1:] if pointer else item
        dtype, sep, div_text = body.partition(":")
        if dtype not in DTYPES:
            hint = " (constant values go in `constexprs`)" if dtype.lstrip("-").isdigit() else ""
            raise ValueError(f"entry {pos} {item!r}: unknown dtype {dtype!r}{hint}; "
                             f"expected one of {' '.join(sorted(DTYPES))}")
        divisibility = 1
        if sep:
            if not div_text.isdigit() or int(div_text) not in DIVISIBILITIES:
                raise ValueError(f"entry {pos} {item!r}: divisibility must be 16, got {div_text!r}")
            divisibility = int(div_text)
            if not pointer and not dtype.startswith(("i", "u")):
                raise ValueError(f"entry {pos} {item!r}: only pointers and integers take a divisibility")
        entries.append(SigEntry("pointer" if pointer else "scalar", dtype, divisibility))
    return entries
