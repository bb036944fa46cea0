"""Backend errors carry the failing op's source location: any error an LLIR rule raises, and any exception inside a TTGIR pass, reaches the user as a CompilationError with a node id that `locs.locate` turns into file:line:col with a caret; unexpected exceptions say "internal error" and keep the original as __cause__."""

from __future__ import annotations

import pytest

from ttbuild.backend.llir import emit, rules
from ttbuild.backend.ttgir import passes
from ttbuild.errors import CompilationError
from ttbuild.frontend.locs import locate
from ttbuild.registry import Registry
from ttbuild.stages import llir, parse, ttgir, ttir

SRC = """import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = x * 2.0 + x
    tl.store(y_ptr + offs, y, mask=m)
"""
LINES = SRC.splitlines()


def _front():
    out = parse.run({"source": SRC.encode()}, {"kernel": "k", "file": "lib/k.py"})
    t = ttir.run({"json": out["json"]}, {"signature": ["*fp32", "*fp32", "i32"], "constexprs": {"BLOCK": 256}})
    return out["loc"], t["ttir"]


def _with_rule(name: str, fn) -> Registry:
    """The real LLIR table with the rule for `name` replaced by `fn`."""
    reg = Registry("LLIR lowering rule")
    for n in rules.RULES:
        reg.register(n, fn if n == name else rules.RULES.lookup(n))
    return reg


def _assert_at(err: CompilationError, line_fragment: str, col_fragment: str):
    (lineno,) = [i + 1 for i, line in enumerate(LINES) if line_fragment in line]
    col = LINES[lineno - 1].index(col_fragment)
    assert (err.loc.file, err.loc.line, err.loc.col) == ("lib/k.py", lineno, col)
    head, text, caret = str(err).splitlines()
    assert head.startswith(f"lib/k.py:{lineno}:{col + 1}: error: ")
    assert text == "    " + LINES[lineno - 1] and caret == "    " + " " * col + "^"


def _llir_error(monkeypatch, rule) -> tuple[CompilationError, CompilationError]:
    loc, t = _front()
    g = ttgir.run({"ttir": t}, {"num_warps": 4})["ttgir"]
    monkeypatch.setattr(emit, "RULES", _with_rule("arith.addf", rule))
    with pytest.raises(CompilationError) as ei:
        llir.run({"ttgir": g}, {"target": "cuda:90"})
    err = ei.value
    assert err.node_id is not None and err.loc is None and err.stage == "llir"
    return err, locate(err, loc)


def test_compilation_error_raised_in_a_rule_carries_the_ops_location(monkeypatch):
    def bad(ctx, op, *operands):
        raise CompilationError("addf cannot do that")

    err, located = _llir_error(monkeypatch, bad)
    assert located.message == "addf cannot do that"
    _assert_at(located, "y = x * 2.0 + x", "x * 2.0 + x")


def test_unexpected_exception_in_a_rule_is_an_internal_error_at_the_op(monkeypatch):
    def buggy(ctx, op, *operands):
        return {}["missing"]

    err, located = _llir_error(monkeypatch, buggy)
    assert located.message == "internal error while lowering arith.addf: KeyError: 'missing'"
    assert isinstance(err.__cause__, KeyError)
    _assert_at(located, "y = x * 2.0 + x", "x * 2.0 + x")


def test_error_inside_a_loop_body_points_at_the_inner_op(monkeypatch):
    src_loop = SRC.replace("    y = x * 2.0 + x\n", "    y = x\n    for i in range(3):\n        y = y + x\n")
    out = parse.run({"source": src_loop.encode()}, {"kernel": "k", "file": "lib/k.py"})
    t = ttir.run({"json": out["json"]}, {"signature": ["*fp32", "*fp32", "i32"], "constexprs": {"BLOCK": 256}})
    g = ttgir.run({"ttir": t["ttir"]}, {"num_warps": 4})["ttgir"]
    monkeypatch.setattr(emit, "RULES", _with_rule("arith.addf", lambda ctx, op, *a: 1 / 0))
    with pytest.raises(CompilationError) as ei:
        llir.run({"ttgir": g}, {"target": "cuda:90"})
    located = locate(ei.value, out["loc"])
    lines = src_loop.splitlines()
    (lineno,) = [i + 1 for i, line in enumerate(lines) if "y = y + x" in line]
    assert located.loc.line == lineno and "ZeroDivisionError" in located.message


@pytest.mark.parametrize("exc, message", [
    (CompilationError("layouts disagree"), "layouts disagree"),
    (ValueError("boom"), "internal error while running coalesce: ValueError: boom"),
])
def test_ttgir_pass_errors_point_at_the_kernel(monkeypatch, exc, message):
    loc, t = _front()

    def failing(module, num_warps):
        raise exc

    monkeypatch.setattr(passes, "PASSES", (("coalesce", failing),))
    with pytest.raises(CompilationError) as ei:
        ttgir.run({"ttir": t}, {"num_warps": 4})
    assert ei.value.stage == "ttgir"
    located = locate(ei.value, loc)
    assert located.message == message
    assert located.loc.line == [i + 1 for i, line in enumerate(LINES) if line.startswith("def k(")][0]
