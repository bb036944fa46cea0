"""A module-level `if` whose test only the running program knows: both branches read, and a name keeps its value where every branch leaves it the same; standard library only."""

from __future__ import annotations

import ast

from .modnames import _bound_names
from .objects import External, NeedsValue, Unreadable

_PLAIN = (int, float, str, bool, type(None), External)


def same(a, b) -> bool:
    """Whether two values read by the module are the same value: the same object, or equal plain values (numbers,
    strings, None, the same external path) of one type."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, _PLAIN + (tuple,)):
        return False
    try:
        return a == b and (not isinstance(a, tuple) or all(same(x, y) for x, y in zip(a, b)))
    except NeedsValue:
        return False


def join(run, ns: dict, stmt: ast.If, error: Exception) -> None:
    """Execute `stmt.body` and `stmt.orelse` in turn with `run` (each from the namespace as it was before the
    `if`), then bind each name the `if` may bind to its value when both branches leave it the same (Python would
    bind it so whichever branch ran), else to Unreadable(`error`): a kernel reading it gets the located error of
    the undecidable test."""
    before = dict(ns)
    after = []
    for body in (stmt.body, stmt.orelse):
        try:
            run(body)
        except Exception:  # an import that fails in one branch (Python may never run it): nothing is known
            after.append({})
        else:
            after.append(dict(ns))
        ns.clear()
        ns.update(before)
    missing = object()
    for name in _bound_names(stmt):
        a, b = (branch.get(name, missing) for branch in after)
        ns[name] = a if a is not missing and b is not missing and same(a, b) else Unreadable(error)
