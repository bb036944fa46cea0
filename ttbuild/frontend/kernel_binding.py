"""Where a kernel is bound in its module's statements: its `def`, with the wrappers applied to it by call (`f = triton.jit(f)`) put in front of its decorators."""

from __future__ import annotations

import ast
import copy


def kernel_def(body: list[ast.stmt], kernel: str) -> tuple[int | None, ast.FunctionDef | None]:
    """The statement index where `kernel`'s decorators are evaluated and its def, the decorators
    listed outermost first: `@`-decorators of a `def kernel`, or wrappers applied by call
    (`kernel = triton.heuristics({...})(triton.jit(_impl))`, `f = triton.jit(f)` then
    `f = triton.autotune(...)(f)`), as Python binds them (the last binding wins)."""
    wrappers: list[ast.expr] = []
    name, end, where = kernel, len(body), None
    while True:
        found = next((i for i in range(end - 1, -1, -1) if binds(body[i], name)), None)
        if found is None:
            return None, None
        where = found if where is None else where
        stmt = body[found]
        if isinstance(stmt, ast.FunctionDef):
            if not wrappers:
                return found, stmt
            fn = copy.copy(stmt)
            fn.decorator_list = wrappers + list(stmt.decorator_list)
            return where, fn
        expr, outer = stmt.value, []
        while isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords:
            outer.append(expr.func)
            expr = expr.args[0]
        if not isinstance(expr, ast.Name) or not outer:
            return None, None
        wrappers += outer
        name, end = expr.id, found


def binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a module-level statement is `def name` or `name = ...`."""
    if isinstance(stmt, ast.FunctionDef):
        return stmt.name == name
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name)
