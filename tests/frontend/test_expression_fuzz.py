"""Random Triton expressions through parse + ttir: each either yields TTIR that MLIR verifies or a located user-facing error, never an internal one."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttbuild.errors import CompilationError
from ttbuild.locs import locate
from ttbuild.stages import parse, ttir

LEAVES = ["xh", "xf", "xi", "xb", "n", "a", "1", "2.5", "-3", "True", "BLOCK", "0"]
BINOPS = ["+", "-", "*", "/", "//", "%", "<", ">=", "==", "!=", "&", "|", "^", "<<", ">>"]
CALLS = ["tl.where({0} > 0, {1}, {2})", "tl.maximum({0}, {1})", "tl.minimum({0}, {1})",
         "({0}).to(tl.float16)", "({0}).to(tl.int32)", "({0}).to(tl.float32)", "tl.abs({0})",
         "tl.exp({0})", "tl.sqrt({0})", "tl.sum({0}, axis=0)", "tl.max({0}, axis=0)", "-({0})",
         "tl.cdiv({0}, {1})", "tl.zeros_like({0})", "tl.full((BLOCK,), {0}, tl.float32)"]


def exprs():
    return st.recursive(
        st.sampled_from(LEAVES),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(BINOPS), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(CALLS), inner, inner, inner).map(lambda t: t[0].format(*t[1:])),
        ),
        max_leaves=8,
    )


HEADER = """import triton
import triton.language as tl


@triton.jit
def k(ph, pf, pi, n, a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    xh = tl.load(ph + offs)
    xf = tl.load(pf + offs)
    xi = tl.load(pi + offs)
    xb = xi > 0
    r = {expr}
    tl.store(pf + offs, r)
"""


# Triton's warnings (a shift past the bit width, ...) are a clean outcome too: test_diagnostics checks them.
@pytest.mark.filterwarnings("ignore::ttbuild.errors.CompilerWarning")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs())
def test_random_expressions_compile_or_fail_cleanly(expr):
    src = HEADER.format(expr=expr)
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "fuzz.py"})
    try:
        text = ttir.run({"json": out["json"]}, {"signature": ["*fp16", "*fp32", "*i32", "i32", "fp32"],
                                                "constexprs": {"BLOCK": 64}})["ttir"]
    except CompilationError as e:
        assert not e.message.startswith("internal error"), f"{expr}\n{e.message}"
        assert e.node_id is not None, f"{expr}: unlocated error {e.message}"
        located = locate(e, out["loc"])
        assert located.loc.file == "fuzz.py" and located.loc.line >= 7, (expr, str(located))
        return
    assert b'"tt.store"' in text
