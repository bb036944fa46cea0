"""Sizes and durations as people write them (`16G`, `512k`, `30d`, `90m`, `2.5`): the one parser of both; stdlib only.

Sizes use binary units (K = 1024 bytes), with an optional trailing "B" or "iB" ("2GiB", "3TB");
durations take s, m, h, d or w, a bare number being seconds. The stage limits (ttbuild.limits:
TTBUILD_STAGE_MEMORY, TTBUILD_STAGE_TIMEOUT) and the cache's prune (`--max-bytes`, `--max-age`)
read their values here.
"""

from __future__ import annotations

import math
import re

SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:ib|b)?\s*", re.I)
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)\s*", re.I)


def parse_size(text: str) -> int:
    """`"16G"` -> 17179869184 bytes: a non-negative number with an optional K/M/G/T suffix. Raises
    ValueError naming the text for anything else (a sign, `inf`, `nan`), or for a size that is
    not zero but under one byte (`0.5`: truncated it would read as zero, "no limit")."""
    m = _SIZE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a size (bytes, or a number with K, M, G or T, e.g. 500M, 16G)")
    value = float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    if 0 < value < 1:  # int() would make it 0, which means "no limit"
        raise ValueError(f"{text!r} is less than one byte (0 or off for no limit)")
    return int(value)


def parse_duration(text: str) -> float:
    """`"30d"` -> 2592000.0 seconds: a non-negative number with an optional s/m/h/d/w suffix (none:
    seconds). Raises ValueError naming the text for anything else."""
    m = _DURATION.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (seconds, or a number with s, m, h, d or w, e.g. 30d, 90m)")
    return float(m.group(1)) * DURATION_UNITS[m.group(2).lower()]


def format_size(n: int) -> str:
    """`n` bytes in the largest binary unit that divides it (`17179869184` -> "16G"), else "<n> bytes"."""
    for unit in ("t", "g", "m", "k"):
        if n >= SIZE_UNITS[unit] and n % SIZE_UNITS[unit] == 0:
            return f"{n // SIZE_UNITS[unit]}{unit.upper()}"
    return f"{n} bytes"
