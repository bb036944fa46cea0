"""The tables of `tl.*` builtins and tensor methods, built from ONE explicit list of rule modules, and `call`, which binds and runs a rule.

Each module in MODULES collects its rules in its own `RULES` (args.BuiltinRules); importing it
registers nothing. A rule module left off MODULES fails tests/test_registry.py; two rules for one
name fail here, at import.
"""

from __future__ import annotations

from typing import Callable

from ttbuild.registry import Registry, build

from . import (
    atomics,
    blockops,
    blockptr,
    builtins,
    debugops,
    dotscaled,
    extra,
    inlineasm,
    random,
    reductions,
    sorting,
    tensordesc,
)
from .semantic import Ctx, fail

MODULES = (builtins, atomics, blockops, blockptr, debugops, dotscaled, extra, inlineasm, random, reductions,
           sorting, tensordesc)

_TABLES = build({"builtin": Registry("tl builtin"), "method": Registry("tensor method")}, MODULES)
BUILTINS: Registry = _TABLES["builtin"]  # "load", "math.exp", ...: what `tl.<name>` calls
METHODS: Registry = _TABLES["method"]    # "to", "sum", ...: what `x.<name>(...)` calls
# Qualified names outside `triton.language` that mean a builtin.
ALIASES = {"triton.cdiv": "cdiv", "ttbuild.cdiv": "cdiv", "triton.language.math.cdiv": "cdiv"}


def call(cx: Ctx, fn: Callable, name: str, args: list, kwargs: dict):
    """Bind and run a rule; arity or keyword mistakes become CompilationErrors naming `tl.<name>`."""
    try:
        fn.signature.bind(cx, *args, **kwargs)
    except TypeError as e:
        fail(cx, f"tl.{name}: {e}")
    return fn(cx, *args, **kwargs)
