"""parse stage: pure-ast kernel discovery, reachability, position-free canonical JSON, the loc table, and its errors."""

from __future__ import annotations

import ast
import json
import math
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttbuild.errors import CompilationError
from ttbuild.frontend.astjson import decode, encode
from ttbuild.stages import parse

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def run(src: str, kernel: str, file: str = "k.py") -> tuple[dict, dict, bytes]:
    out = parse.run({"source": textwrap.dedent(src).encode()}, {"kernel": kernel, "file": file})
    return json.loads(out["json"]), json.loads(out["loc"]), out["json"]


HELPERS = '''
import triton
import triton.language as tl
from triton import jit
import numpy  # never imported: parse reads the file, it does not run it

GROUP: tl.constexpr = 8
SCALE = tl.constexpr(2.5)
LIMIT = 1000
UNUSED = 7

@jit
def helper(x, K: tl.constexpr):
    return x * K + LIMIT

@triton.jit
def unused_helper(x):
    return x

def plain_python(x):
    return x

@triton.jit(do_not_specialize=["n"])
def kernel(p, n, BLOCK: tl.constexpr):
    """A docstring the output drops."""
    i = tl.arange(0, BLOCK) * GROUP
    tl.store(p + i, helper(i, 3) * SCALE, mask=i < n)
'''


def test_vector_add_from_the_library():
    desc, loc, _ = run((KERNELS / "vector_add.py").read_text(), "add_kernel", "vector_add.py")
    assert desc["schema"] == "ttbuild.parse/1" and desc["kernel"] == "add_kernel"
    assert desc["file"] == "vector_add.py" and loc["file"] == "vector_add.py"
    assert list(desc["functions"]) == ["add_kernel"]
    params = desc["functions"]["add_kernel"]["params"]
    assert [p["name"] for p in params] == ["x_ptr", "y_ptr", "output_ptr", "n_elements", "BLOCK_SIZE"]
    assert params[-1]["annotation"] == "tl.constexpr" and params[0]["annotation"] is None
    assert desc["imports"] == {"tl": "triton.language"}


def test_reaches_helpers_and_constexpr_globals_only():
    desc, _, _ = run(HELPERS, "kernel")
    assert sorted(desc["functions"]) == ["helper", "kernel"]
    assert desc["globals"] == {"GROUP": {"constexpr": True, "value": 8},
                               "LIMIT": {"constexpr": False, "value": 1000},
                               "SCALE": {"constexpr": True, "value": 2.5}}
    assert "numpy" not in desc["imports"] and desc["imports"]["tl"] == "triton.language"


def test_output_has_no_positions_or_docstrings():
    _, _, raw = run(HELPERS, "kernel")
    text = raw.decode()
    for word in ("lineno", "col_offset", "end_lineno", "docstring the output drops"):
        assert word not in text
    assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize("edit", [
    lambda s: s.replace("    i = tl.arange", "    # a new comment\n    i = tl.arange"),
    lambda s: s.replace("    i = tl.arange", "\n\n    i = tl.arange"),
    lambda s: "# header comment\n\n" + s,
    lambda s: s.replace('"""A docstring the output drops."""', '"""Another docstring."""'),
    lambda s: s.replace("mask=i < n)", "mask=i < n)  # trailing comment"),
    lambda s: s.replace("UNUSED = 7", "UNUSED = 8"),
])
def test_comment_and_blank_line_edits_keep_json_identical(edit):
    _, loc_a, a = run(HELPERS, "kernel")
    _, loc_b, b = run(edit(HELPERS), "kernel")
    assert a == b


def test_blank_line_moves_only_the_loc_table():
    _, loc_a, _ = run(HELPERS, "kernel")
    _, loc_b, _ = run(HELPERS.replace("    i = tl.arange", "\n    i = tl.arange"), "kernel")
    assert loc_a != loc_b and loc_a["nodes"].keys() == loc_b["nodes"].keys()


def test_code_edits_change_json():
    _, _, a = run(HELPERS, "kernel")
    _, _, b = run(HELPERS.replace("* GROUP", "* GROUP + 1"), "kernel")
    _, _, c = run(HELPERS.replace("GROUP: tl.constexpr = 8", "GROUP: tl.constexpr = 16"), "kernel")
    _, _, d = run(HELPERS.replace("return x * K", "return x + K"), "kernel")
    assert len({a, b, c, d}) == 4


def test_loc_table_points_at_source():
    src = textwrap.dedent(HELPERS)
    desc, loc, _ = run(src, "kernel")
    lines = src.splitlines()
    calls = []

    def walk(n):
        if isinstance(n, dict):
            if n.get("_t") == "Call" and n["func"].get("attr") == "arange":
                calls.append(n["_id"])
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)
    walk(desc["functions"]["kernel"]["body"])
    (node,) = calls
    line, col = loc["nodes"][str(node)]
    assert lines[line - 1][col:].startswith("tl.arange(0, BLOCK)")
    assert loc["lines"][str(line)] == lines[line - 1]


def test_node_ids_unique_and_preorder_over_functions_by_name():
    desc, loc, _ = run(HELPERS, "kernel")
    ids = []

    def walk(n):
        if isinstance(n, dict):
            if "_id" in n:
                ids.append(n["_id"])
            for k in sorted(n):
                walk(n[k])
        elif isinstance(n, list):
            for v in n:
                walk(v)
    for name in sorted(desc["functions"]):
        walk(desc["functions"][name]["body"])
    assert sorted(ids) == list(range(len(ids)))
    assert desc["functions"]["helper"]["body"]["_id"] == 0  # "helper" < "kernel"
    assert set(loc["nodes"]) == {str(i) for i in ids}


@pytest.mark.parametrize("header,deco", [
    ("import triton", "@triton.jit"),
    ("import ttbuild", "@ttbuild.jit"),
    ("from triton import jit", "@jit"),
    ("from ttbuild import jit", "@jit"),
    ("import triton as tr", "@tr.jit"),
    ("import triton", "@triton.jit(debug=True)"),
])
def test_finds_jit_in_every_spelling(header, deco):
    desc, _, _ = run(f"{header}\n{deco}\ndef k(x):\n    pass\n", "k")
    assert list(desc["functions"]) == ["k"]


def test_never_imports_the_kernel_file():
    src = "import no_such_module_anywhere\nimport triton\nraise SystemExit(3)\n@triton.jit\ndef k(x):\n    pass\n"
    desc, _, _ = run(src, "k")
    assert "k" in desc["functions"]


def test_syntax_error_points_at_line_and_column():
    with pytest.raises(CompilationError) as ei:
        run("import triton\n@triton.jit\ndef k(x):\n    y = x +* 2\n", "k", "bad.py")
    e = ei.value
    assert (e.loc.file, e.loc.line) == ("bad.py", 4)
    assert e.loc.source_line == "    y = x +* 2"
    text = str(e)
    assert text.startswith("bad.py:4:") and "invalid syntax" in text
    assert text.splitlines()[1].strip() == "y = x +* 2" and text.splitlines()[2].strip() == "^"


def test_unknown_kernel_lists_jit_functions():
    with pytest.raises(CompilationError) as ei:
        run(HELPERS, "kernal", "lib.py")
    msg = str(ei.value)
    assert "'kernal' not found in lib.py" in msg and "helper, kernel, unused_helper" in msg
    assert "plain_python" not in msg


def test_plain_function_is_not_a_kernel():
    with pytest.raises(CompilationError, match="none"):
        run("def k(x):\n    pass\n", "k")


FLOATS = st.floats(allow_nan=True, allow_infinity=True)
CONSTS = st.one_of(st.integers(-2**70, 2**70), FLOATS, st.booleans(), st.none(), st.text(max_size=8))


@settings(max_examples=200, deadline=None)
@given(CONSTS)
def test_constants_round_trip_with_their_type(value):
    node = ast.Constant(value=value, lineno=1, col_offset=0)
    data = json.loads(json.dumps(encode(node, lambda n: 0)))
    back = decode(data).value
    assert type(back) is type(value)
    assert back == value or (isinstance(value, float) and math.isnan(value) and math.isnan(back))


def test_decode_inverts_encode_for_library_kernels():
    for path in KERNELS.glob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            back = decode(json.loads(json.dumps(encode(fn, lambda n: 0))))
            assert ast.dump(back) == ast.dump(fn)


def test_columns_count_characters_not_bytes():
    src = 'import triton\n@triton.jit\ndef k(p):\n    s = "héllo ü"; x = tl.load(p)\n'
    desc, loc, _ = run(src, "k")
    line = src.splitlines()[3]
    cols = sorted(c for l, c in loc["nodes"].values() if l == 4)
    assert line.index("x = tl") in cols and line.index("tl.load") in cols
