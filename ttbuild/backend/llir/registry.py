"""The LLIR lowering registry: `@rule("arith.addf", ...)` files `fn(ctx, op, *operands)` under op names.

A rule receives the frozen codegen context, the MLIR op, and its already-lowered operands
(a `TensorVal` for tensors, an llvmlite value for scalars). It returns the lowered result (one
value), a list (several results), or None (no results).
"""

from __future__ import annotations

from typing import Callable

RULES: dict[str, Callable] = {}


def rule(*names: str):
    def deco(fn):
        for n in names:
            if n in RULES:
                raise ValueError(f"two LLIR rules for {n}")
            RULES[n] = fn
        return fn
    return deco
