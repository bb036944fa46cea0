"""The LLIR rule table: op name -> `fn(ctx, op, *operands)`, built from ONE explicit list of rule modules.

A rule receives the frozen codegen context, the MLIR op, and its already-lowered operands
(a `TensorVal` for tensors, an llvmlite value for scalars). It returns the lowered result (one
value), a list (several results), or None (no results). Each module in MODULES collects its
rules in its own `RULES` (ttbuild.registry.RuleSet); importing it registers nothing. A rule
module left off MODULES fails tests/test_registry.py; two rules for one op fail here, at import.
"""

from __future__ import annotations

from ttbuild.backend.llir import (
                                  arith,
                                  async_copy,
                                  atomic,
                                  cast,
                                  control_flow,
                                  convert_layout,
                                  debug,
                                  dot,
                                  histogram,
                                  inline_asm,
                                  math_ops,
                                  memory,
                                  reduce,
                                  scan,
                                  tensormap,
                                  tma,
                                  tt,
                                  view,
                                  wgmma,
)
from ttbuild.registry import Registry, build

MODULES = (arith, math_ops, cast, tt, memory, async_copy, atomic, view, convert_layout, reduce, scan,
           control_flow, debug, dot, inline_asm, histogram, wgmma, tma, tensormap)

RULES: Registry = build({"default": Registry("LLIR lowering rule")}, MODULES)["default"]
