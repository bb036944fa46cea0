"""Rule tables filled explicitly: a rule module collects its rules in a `RuleSet`; one explicit list of modules builds a `Registry` (name -> fn) from them.

The pattern of JAX's `register_lowering` and tinygrad's explicitly imported pattern matchers:
importing a rule module registers nothing; a table exists only where a list of modules is
handed to `build`, so a module missing from that list is visible in one place (and a test
checks the list against the package directory), and two rules for one name fail when the
table is built, naming both modules.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator


class DuplicateRule(ValueError):
    """Two rules were given one name in one table (a bug in the compiler, not in the input)."""


class RuleSet:
    """One rule module's rules, in definition order: (table, name, fn) entries.

    `rule(*names)` is the decorator a module exposes as its `rule` (or wraps, as the frontend's
    `builtin` does); `table` picks one of several tables one builder fills (e.g. "builtin" and
    "method"), "default" when there is one."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, Callable]] = []

    def add(self, name: str, fn: Callable, table: str = "default") -> Callable:
        """File `fn` under `name` in table `table`; returns `fn`."""
        self.entries.append((table, name, fn))
        return fn

    def rule(self, *names: str, table: str = "default"):
        """Decorator: file the function under each of `names` in `table`."""
        def deco(fn: Callable) -> Callable:
            for n in names:
                self.add(n, fn, table)
            return fn
        return deco

    def __iter__(self) -> Iterator[tuple[str, str, Callable]]:
        return iter(self.entries)


class Registry:
    """name -> rule. `register` raises DuplicateRule on a second rule for a name; `lookup`
    raises KeyError naming what is missing; `get` returns None instead."""

    def __init__(self, what: str) -> None:
        self.what = what  # e.g. "LLIR lowering rule": used in error messages
        self._fns: dict[str, Callable] = {}
        self._origin: dict[str, str] = {}

    def register(self, name: str, fn: Callable, origin: str = "") -> None:
        """Make `fn` the rule for `name`, from module `origin`. Raises DuplicateRule naming both modules when `name`
        already has one."""
        if name in self._fns:
            raise DuplicateRule(f"two {self.what}s for {name!r}: in {self._origin[name] or '?'} "
                                f"and in {origin or '?'}")
        self._fns[name] = fn
        self._origin[name] = origin

    def lookup(self, name: str) -> Callable:
        """The rule for `name`. Raises KeyError ("no <what> for 'name'") when none is registered."""
        try:
            return self._fns[name]
        except KeyError:
            raise KeyError(f"no {self.what} for {name!r}") from None

    def get(self, name: str, default=None):
        """The rule for `name`, or `default`."""
        return self._fns.get(name, default)

    def origin(self, name: str) -> str:
        """The module that registered `name`."""
        return self._origin[name]

    def __contains__(self, name: object) -> bool:
        return name in self._fns

    def __iter__(self) -> Iterator[str]:
        return iter(self._fns)

    def __len__(self) -> int:
        return len(self._fns)


def build(tables: dict[str, Registry], modules: Iterable) -> dict[str, Registry]:
    """Fill `tables` from each module's `RULES` (a RuleSet), in list order; returns `tables`.
    Raises DuplicateRule when two entries share a table and a name, and KeyError for an entry
    naming a table not in `tables`."""
    for m in modules:
        for table, name, fn in m.RULES:
            tables[table].register(name, fn, origin=m.__name__)
    return tables
