"""The one canonical JSON spelling of ttbuild (sorted keys, no spaces, UTF-8 kept as is): keys, cache entries and parse artifacts; stdlib only."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any, *, ensure_ascii: bool = False, allow_nan: bool = True) -> str:
    """`value` as JSON with sorted keys and `,`/`:` separators, non-ASCII characters kept.

    Equal values give equal text whatever their dict order, so the text can be hashed (stage
    keys, action keys) or written as an artifact (the parse stage's outputs). `ensure_ascii`:
    escape non-ASCII as `\\uXXXX` (the cache's action-entry bodies, whose bytes are fixed by
    entries already stored). `allow_nan=False` raises ValueError for NaN/inf. Raises TypeError
    for values JSON cannot hold.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii,
                      allow_nan=allow_nan)


def canonical_bytes(value: Any, **kwargs) -> bytes:
    """`canonical_json(value, **kwargs)` encoded as UTF-8."""
    return canonical_json(value, **kwargs).encode("utf-8")
