"""Runs a `@triton.constexpr_function` (or `@tl.constexpr def`) helper at compile time on constexpr arguments: the bounded evaluator of ttbuild.pyeval, knowing tl dtypes and their probes.

Triton 3.6 (runtime/jit.py `ConstexprFunction.__call__`) calls the helper's Python function on
the constexprs' values: a `tl.dtype` argument answers `is_fp16()`, `is_int()`,
`primitive_bitwidth`... as language/core.py's `dtype` does, and the helper may return
`tl.float32` or any other dtype of `triton.language`.
"""

from __future__ import annotations

import ast

from ttbuild.pyeval.evaluator import Evaluator
from ttbuild.pyeval.values import Source, dotted_name, resolve_name

from . import types as T

LANG = ("triton.language", "triton.language.core", "ttbuild.language")

# `tl.<name>` -> ttbuild's dtype name (language/core.py's dtype aliases)
DTYPE_ATTRS = {"int1": "int1", "bool": "int1", "int8": "int8", "int16": "int16", "int32": "int32",
               "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
               "uint64": "uint64", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
               "float64": "fp64", "float8e4nv": "fp8e4nv", "float8e5": "fp8e5"}


def dtype_probes(dt: T.DType) -> dict[str, bool]:
    """What `tl.dtype`'s `is_*()` methods answer for `dt` (language/core.py, Triton 3.6)."""
    probes = {"is_floating": dt.is_float(), "is_int": dt.is_int(), "is_int_signed": dt.is_signed(),
              "is_int_unsigned": dt.is_unsigned(), "is_fp16": dt == T.fp16, "is_bf16": dt == T.bf16,
              "is_fp32": dt == T.fp32, "is_fp64": dt == T.fp64, "is_bool": dt == T.int1,
              "is_fp8": "fp8" in dt.name, "is_standard_floating": dt in (T.fp16, T.bf16, T.fp32, T.fp64)}
    probes.update({f"is_{n}": dt.name == n for n in T.DTYPES})  # is_int64, is_uint8, is_fp8e5...
    return probes


class _Probe:
    """`dtype.is_fp16`, a probe not yet called."""

    def __init__(self, answer: bool):
        self.answer = answer


class _Scope:
    """The helper's view of names: the constexpr helpers ("def"), the kernel module's imports and constexpr
    globals."""

    def __init__(self, functions: dict[str, str], imports: dict[str, str], constants: dict[str, object]):
        self.bindings: dict[str, tuple[str, object]] = {n: ("import", p) for n, p in imports.items()}
        self.bindings.update((n, ("value", v)) for n, v in constants.items())
        self.bindings.update((n, ("def", ast.parse(t).body[0])) for n, t in functions.items())
        self.imports = dict(imports)


class HelperEvaluator(Evaluator):
    """The bounded evaluator over a helper's source, with tl dtypes as values."""

    what = "runs @triton.constexpr_function helpers at compile time"
    why = ("literals, names, if/for/return, simple functions, tl dtypes and their is_*() probes, "
           "primitive_bitwidth, a pointer or block type's element_ty")

    def __init__(self, name: str, text: str, functions: dict[str, str], imports: dict[str, str],
                 constants: dict[str, object]):
        super().__init__(Source(f"<constexpr_function {name}>", text), _Scope(functions, imports, constants))

    def _Attribute(self, node, scope):
        full = resolve_name(dotted_name(node), self.module.imports) if self.is_module_import(dotted_name(node), scope) else None
        if full is not None:
            for lang in LANG:
                if full.startswith(lang + ".") and full[len(lang) + 1:] in DTYPE_ATTRS:
                    return T.DTYPES[DTYPE_ATTRS[full[len(lang) + 1:]]]
            raise self.cannot(node, f"`{full}` is not a dtype of triton.language")
        return super()._Attribute(node, scope)

    def attribute(self, value, node):
        """A dtype's probes and bit widths, a pointer or block type's element type; else the base evaluator's."""
        if isinstance(value, T.DType):
            if node.attr == "primitive_bitwidth" or (node.attr == "int_bitwidth" and value.is_int()):
                return value.bits
            probes = dtype_probes(value)
            if node.attr in probes:
                return _Probe(probes[node.attr])
        if isinstance(value, (T.PointerType, T.BlockType)) and node.attr == "element_ty":
            return value.element
        return super().attribute(value, node)

    def call_value(self, value, node, scope):
        """`dtype.is_fp16()`: the probe's answer."""
        if isinstance(value, _Probe) and not node.args and not node.keywords:
            return value.answer
        return super().call_value(value, node, scope)
