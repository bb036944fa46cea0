"""The text of encoding attributes: one field reader and one list printer that every encoding's `parse` and `attr` use (Triton's attribute syntax, `key = [1, 2]` and `key = 3`)."""

from __future__ import annotations

import re


def int_list(text: str, key: str) -> tuple[int, ...]:
    """The integers of `key = [a, b, ...]` in `text`; ValueError when `key` is missing."""
    m = re.search(key + r"\s*=\s*\[([^\]]*)\]", text)
    if not m:
        raise ValueError(f"{key} missing in {text}")
    return tuple(int(x) for x in m.group(1).split(",") if x.strip())


def int_field(text: str, key: str) -> int:
    """The integer of `key = n` in `text`; ValueError when `key` is missing."""
    m = re.search(key + r"\s*=\s*(\d+)", text)
    if not m:
        raise ValueError(f"{key} missing in {text}")
    return int(m.group(1))


def fmt_list(xs) -> str:
    """`[a, b, ...]`, Triton's spelling of an integer array field."""
    return "[" + ", ".join(str(x) for x in xs) + "]"
