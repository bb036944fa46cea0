"""A kernel's tuning table (`artifacts/tuning/<kernel>.json`, schema "ttbuild.tuning/1"): where it lives, how it is read, and the nearest-key rule; stdlib only.

`ttbuild tune` (ttbuild.runtime.tuner) writes it, the tuned launcher (ttbuild.runtime.tuned)
reads it: both take the format from here, so neither imports the other's module for it.
"""

from __future__ import annotations

import json
import math
import os
import warnings

from ..errors import TTBuildError

TABLE_SCHEMA = "ttbuild.tuning/1"
RULE = ("exact key; else the nearest recorded key with equal non-numeric items, by the sum of "
        "|log2 a - log2 b| over numeric items (first recorded wins a tie); else the first config built")



class TuningError(TTBuildError, ValueError):
    """A tuning table the runtime cannot use (wrong schema, bad entry), naming the file."""


def table_path(tuning_dir: str, kernel: str) -> str:
    """Where the tuning table of `kernel` lives: `<artifacts>/tuning/<kernel>.json`."""
    return os.path.join(tuning_dir, f"{kernel}.json")


def numeric(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def distance(a: tuple, b: tuple) -> float | None:
    """The nearest-bucket distance between two keys (module docstring), None when they differ
    in length or in a non-numeric item."""
    if len(a) != len(b):
        return None
    d = 0.0
    for x, y in zip(a, b):
        if numeric(x) and numeric(y):
            d += abs(math.log2(max(abs(x), 1)) - math.log2(max(abs(y), 1)))
        elif x != y:
            return None
    return d


class TuningTable:
    """A kernel's recorded winners: key tuple -> config index, in file order.

    `entries` is the table's list of {"group", "key", "config", "times_ms"}: times_ms maps each
    timed config index (as a string, JSON's object keys) to its median time in milliseconds;
    `config` is the fastest of them.
    """

    def __init__(self, doc: dict, path: str = ""):
        self.path = path
        self.doc = doc
        if not isinstance(doc, dict) or doc.get("schema") != TABLE_SCHEMA:
            raise TuningError(f"{path}: not a tuning table (schema {TABLE_SCHEMA!r})")
        entries = doc.get("entries")
        if not isinstance(entries, list):
            raise TuningError(f"{path}: 'entries' must be a list")
        self.winners: dict[tuple, int] = {}
        for i, e in enumerate(entries):
            if not (isinstance(e, dict) and isinstance(e.get("key"), list) and isinstance(e.get("config"), int)):
                raise TuningError(f"{path}: entries[{i}] needs 'key' (a list) and 'config' (an int)")
            self.winners.setdefault(tuple(e["key"]), e["config"])

    @classmethod
    def read(cls, path: str) -> "TuningTable | None":
        """The table at `path`, or None when there is none. Raises TuningError for a bad file."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TuningError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise TuningError(f"{path}: not JSON: {exc}") from None
        return cls(doc, path)

    def lookup(self, key: tuple) -> tuple[int | None, str]:
        """(config index, "exact" | "nearest") or (None, "default") for a launch key."""
        hit = self.winners.get(key)
        if hit is not None:
            return hit, "exact"
        best, best_d = None, None
        for k, config in self.winners.items():
            d = distance(key, k)
            if d is not None and (best_d is None or d < best_d):
                best, best_d = config, d
        return (best, "nearest") if best is not None else (None, "default")


def load_table(tuning_dir: str, kernel: str) -> TuningTable | None:
    """The kernel's table if `ttbuild tune` wrote one; a bad table warns and is ignored (the
    kernel still launches, with its default config)."""
    path = table_path(tuning_dir, kernel)
    try:
        return TuningTable.read(path)
    except TuningError as exc:
        warnings.warn(f"ttbuild: ignoring the tuning table: {exc}", stacklevel=3)
        return None
