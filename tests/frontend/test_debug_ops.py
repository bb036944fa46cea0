"""Frontend of the debug ops: tt.assert only in debug builds, with `loc("n17"("file":line:col))` locations from the parse loc table; tt.print's prefix and strings survive MLIR; located errors for misuse."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from filecheck_util import filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

from ttbuild.errors import CompilationError
from ttbuild.frontend.debugops import munge_prefix
from ttbuild.locs import locate, node_id_of
from ttbuild.stages import parse, ttir

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "kernels" / "debug_ops.py"
GOLDEN_CHECK = HERE / "kernels" / "debug_ops.ttir.check"  # its CHECK and DEBUG lines
HEADER = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
OPTS = {"signature": ["*i32:16", "*fp32:16", "i32"], "constexprs": {"BLOCK": 128}}


def build(src: bytes, *, debug: bool, with_loc: bool = True, kernel="debug_kernel", file="debug_ops.py",
          opts=OPTS) -> str:
    p = parse.run({"source": src}, {"kernel": kernel, "file": file})
    inputs = {"json": p["json"], **({"loc": p["loc"]} if with_loc else {})}
    return ttir.run(inputs, {**opts, **({"debug": True} if debug else {})})["ttir"].decode()


def test_debug_golden(tmp_path):
    """The DEBUG lines of the golden kernel (its CHECK lines, debug off, run in tests/test_ttir.py)."""
    filecheck(build(GOLDEN.read_bytes(), debug=True), GOLDEN_CHECK, tmp_path, prefix="DEBUG")


def test_without_debug_asserts_vanish_and_the_loc_table_is_ignored():
    src = GOLDEN.read_bytes()
    plain = build(src, debug=False)
    assert '"tt.assert"' not in plain and plain.count('"tt.print"') == 4
    assert build(src, debug=False, with_loc=False) == plain
    p = parse.run({"source": src}, {"kernel": "debug_kernel", "file": "debug_ops.py"})
    assert ttir.run({"json": p["json"]}, {**OPTS, "debug": False})["ttir"].decode() == plain
    assert '"tt.assert"' in build(src, debug=True, with_loc=False)


def test_blank_line_edit_changes_only_the_debug_ttir():
    src = GOLDEN.read_bytes()
    edited = src.replace(b"    pid = tl.program_id(0)\n", b"\n    pid = tl.program_id(0)\n")
    assert edited != src
    assert build(edited, debug=False) == build(src, debug=False)
    before, after = build(src, debug=True), build(edited, debug=True)
    assert before != after
    assert '"debug_ops.py":22:5' in before and '"debug_ops.py":23:5' in after  # the "x too big" assert


def test_debug_ttir_node_ids_still_locate_errors():
    text = build(GOLDEN.read_bytes(), debug=True)
    line = next(l for l in text.splitlines() if '"tt.assert"' in l)
    loc = line[line.index("loc("):]
    node = node_id_of(loc)
    assert node is not None
    p = parse.run({"source": GOLDEN.read_bytes()}, {"kernel": "debug_kernel", "file": "debug_ops.py"})
    located = locate(CompilationError("boom", stage="llir", node_id=node), p["loc"])
    assert located.loc.line == int(loc.split(":")[1])


def test_triton_accepts_debug_ttir(tmp_path):
    from oracle import assert_triton_compiles

    path = tmp_path / "debug_ops.ttir"
    path.write_text(build(GOLDEN.read_bytes(), debug=True))
    assert_triton_compiles([str(path)])


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12))
def test_print_prefix_survives_mlir(prefix):
    """Any printable prefix (quotes, backslashes) reaches the TTIR as Triton spells it."""
    from mlir import ir

    src = (HEADER + "def k(p):\n    tl.device_print(PREFIX, tl.load(p))\n").replace("PREFIX", repr(prefix))
    text = build(src.encode(), debug=False, kernel="k", file="k.py",
                 opts={"signature": ["*fp32"], "constexprs": {}})
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(text, ctx)
    op = next(o for o in module.body.operations[0].regions[0].blocks[0].operations if o.name == "tt.print")
    from ttbuild.backend import mlir_util as mu
    with ctx:
        assert ir.StringAttr(mu.props(op)["prefix"]).value == munge_prefix(prefix, True)


def test_munge_prefix_as_triton():
    assert munge_prefix("x", True) == " x: "
    assert munge_prefix("two ", True) == " two: "
    assert munge_prefix("x: ", True) == " x: "
    assert munge_prefix("", False) == "" and munge_prefix("hello", False) == " hello"


def _error(body: str) -> tuple[CompilationError, list[str]]:
    src = HEADER + "def k(p, n, BLOCK: tl.constexpr):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": p["json"], "loc": p["loc"]},
                 {"signature": ["*fp32", "i32"], "constexprs": {"BLOCK": 128}, "debug": True})
    return locate(ei.value, p["loc"]), src.splitlines()


@pytest.mark.parametrize("body, message, at", [
    ("tl.device_print(n, n)\n", "device_print prefix must be a constexpr", "tl.device_print(n"),
    ("tl.device_print(3, n)\n", "device_print prefix must be a string literal", "tl.device_print(3"),
    ("tl.device_print('é', n)\n", "is not an ascii string", "tl.device_print('"),
    ("tl.device_print('a', 'b')\n", "device_print argument 1 is a string", "tl.device_print('a'"),
    ("tl.device_print('a', n, hex=n)\n", "device_print hex must be a constexpr", "tl.device_print('a', n, hex"),
    ("tl.device_assert(n, 'm')\n", "device_assert condition must be boolean (int1), got int32", "tl.device_assert(n"),
    ("tl.device_assert(n > 0, n)\n", "device_assert msg must be a constexpr", "tl.device_assert(n > 0, n"),
    ("tl.device_assert(n > 0, 'm', mask=n)\n", "device_assert mask must be boolean", "tl.device_assert(n > 0, 'm', mask"),
    ("assert n, 'not bool'\n", "device_assert condition must be boolean (int1)", "assert n"),
])
def test_misuse_is_a_located_error(body, message, at):
    err, lines = _error(body)
    assert message in err.message, err.message
    (lineno,) = [i + 1 for i, line in enumerate(lines) if at in line]
    assert err.loc is not None and err.loc.line == lineno and err.loc.file == "lib/k.py"


def _assume_kernel(body: str) -> bytes:
    return (HEADER + "def k(p, n, stride):\n    pid = tl.program_id(0)\n" + textwrap.indent(body, "    ")
            + "    tl.store(p + pid * stride, n)\n").encode()


def test_assume_is_an_llvm_assume_through_ptx(tmp_path):
    """tl.assume (tutorial 03's `tl.assume(pid_m >= 0)`, `tl.assume(stride_am > 0)`) is
    `llvm.intr.assume` in TTIR, as Triton's semantic.assume, and a call of llvm.assume in LLIR;
    the kernel builds through PTX. Triton 3.6 parses and compiles our TTIR (oracle, when found)."""
    import ttbuild

    f = tmp_path / "k.py"
    f.write_bytes(_assume_kernel("tl.assume(pid >= 0)\ntl.assume(stride > 0)\n"))
    out = ttbuild.compile(f, kernel="k", signature="*i32,i32,i32", constexprs={}, until="ptx")
    t = out["ttir"].decode()
    assert t.count('"llvm.intr.assume"') == 2 and "(i1) -> ()" in t
    assert "call void @llvm.assume(i1" in out["llir"].decode()
    from oracle import run_triton, triton_python

    try:
        triton_python()
    except pytest.skip.Exception:
        return
    g = tmp_path / "k.ttir"
    g.write_bytes(out["ttir"])
    code = ("import sys, triton\nfrom triton.backends.compiler import GPUTarget\n"
            "triton.compile(sys.argv[1], target=GPUTarget('cuda', 90, 32))\n")
    run_triton(code, str(g))


@pytest.mark.parametrize("cond,message", [
    ("stride", "tl.assume condition must be boolean (int1), got int32"),
    ("tl.arange(0, 4) > 0", "tl.assume takes a scalar condition, got int1[4]"),
])
def test_assume_refusals(cond, message):
    out = parse.run({"source": _assume_kernel(f"tl.assume({cond})\n")}, {"kernel": "k", "file": "k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": ["*i32", "i32", "i32"], "constexprs": {}})
    assert ei.value.message == message
