"""Frontend diagnostics: each rejected kernel raises CompilationError that `locs.locate` turns into file:line:col, the source line and a caret."""

from __future__ import annotations

import json
import textwrap
import warnings

import pytest
from oracle import MAKE_IR

from ttbuild.errors import CompilationError
from ttbuild.locs import locate, node_id_of, node_loc
from ttbuild.stages import parse, ttir

HEADER = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"


def compile_error(body: str, signature=("*fp32", "i32"), constexprs=None, params="p, n, BLOCK: tl.constexpr"):
    """Compile `def k(<params>): <body>` and return the located CompilationError."""
    src = HEADER + f"def k({params}):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": list(signature),
                                         "constexprs": constexprs if constexprs is not None else {"BLOCK": 128}})
    err = ei.value
    assert err.node_id is not None and err.loc is None  # the stage knows nodes, not lines
    located = locate(err, out["loc"])
    assert located.loc is not None
    return located, src.splitlines()


def assert_at(err, lines, line_text_fragment: str, col_fragment: str):
    """The error sits on the line containing `line_text_fragment`, at the column where
    `col_fragment` starts on that line, and renders that line with a caret under it."""
    (lineno,) = [i + 1 for i, l in enumerate(lines) if line_text_fragment in l]
    col = lines[lineno - 1].index(col_fragment)
    assert (err.loc.file, err.loc.line, err.loc.col) == ("lib/k.py", lineno, col)
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"lib/k.py:{lineno}:{col + 1}: error: ")
    assert rendered[1] == "    " + lines[lineno - 1]
    assert rendered[2] == "    " + " " * col + "^"


def test_unknown_tl_function():
    err, lines = compile_error("x = tl.lod(p)\n")
    assert err.message == "unknown function or attribute tl.lod; did you mean tl.load?"
    assert_at(err, lines, "tl.lod", "tl.lod")


@pytest.mark.parametrize("body,fragment,words", [
    ("with open('f') as f:\n    pass\n", "with", "`with` statements"),
    ("f = lambda x: x\n", "lambda", "lambda expressions"),
    ("try:\n    pass\nexcept Exception:\n    pass\n", "try", "`try` statements"),
    ("for i in range(4):\n    break\n", "break", "`break`"),
    ("def inner(x):\n    return x\n", "def inner", "nested function definitions"),
    ("del n\n", "del", "`del`"),
    ("xs = [i for i in range(3)]\n", "[i for", "list comprehensions"),
])
def test_unsupported_python_constructs(body, fragment, words):
    err, lines = compile_error(body)
    assert words in err.message and "not supported" in err.message
    assert_at(err, lines, fragment, fragment)


def test_undefined_name():
    err, lines = compile_error("x = tl.load(p + offs)\n")
    assert err.message == "undefined name 'offs'"
    assert_at(err, lines, "offs)", "offs")


def test_wrong_number_of_signature_entries():
    err, lines = compile_error("pass\n", signature=("*fp32",))
    assert "signature has 1 entries but k has 2 non-constexpr parameters (p, n)" in err.message
    assert_at(err, lines, "def k", "def k")


def test_unknown_signature_type_points_at_the_parameter():
    err, lines = compile_error("pass\n", signature=("*fp32", "i33"))
    assert "unknown signature type 'i33'" in err.message
    assert_at(err, lines, "def k", "n, BLOCK")


def test_missing_constexpr_value():
    err, lines = compile_error("pass\n", constexprs={})
    assert "constexpr parameter 'BLOCK' has no value" in err.message
    assert_at(err, lines, "def k", "BLOCK")


def test_runtime_value_where_constexpr_required():
    err, lines = compile_error("i = tl.arange(0, n)\n")
    assert err.message == "arange end must be a constexpr, got a runtime value of type int32"
    assert_at(err, lines, "tl.arange", "tl.arange")


def test_block_past_tritons_element_limit():
    """Triton's TRITON_MAX_TENSOR_NUMEL (2**20) as a located diagnostic, for a range and for a
    block built from smaller ones (the review's BLOCK_SIZE = 2**24 ran the ptx stage for minutes)."""
    err, lines = compile_error("i = tl.arange(0, BLOCK)\n", constexprs={"BLOCK": 2**24})
    assert err.message.startswith("numel (16777216) exceeds triton maximum tensor numel (1048576)")
    assert_at(err, lines, "tl.arange", "tl.arange")
    err, lines = compile_error("i = tl.arange(0, BLOCK)\nj = i[:, None] + i[None, :]\n",
                               constexprs={"BLOCK": 2048})
    assert "numel (4194304) exceeds" in err.message
    assert_at(err, lines, "j = ", "i[:, None] + i[None, :]")
    src = HEADER + "def k(p, n, BLOCK: tl.constexpr):\n    i = tl.arange(0, BLOCK)\n    j = i[:, None] + i[None, :]\n"
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    assert ttir.run({"json": out["json"]}, {"signature": ["*fp32", "i32"], "constexprs": {"BLOCK": 1024}})["ttir"]


def test_arange_bound_not_power_of_two():
    err, lines = compile_error("i = tl.arange(0, BLOCK)\n", constexprs={"BLOCK": 100})
    assert err.message == "arange's range must be a power of two, got 100 - 0 = 100"
    assert_at(err, lines, "tl.arange", "tl.arange")


def test_load_from_non_pointer():
    err, lines = compile_error("x = tl.load(n)\n")
    assert "tl.load needs a pointer (or a block of pointers), got a value of type int32" in err.message
    assert_at(err, lines, "tl.load", "tl.load")


@pytest.mark.parametrize("expr,words", [
    ("tl.load(p) << 2", "operator << is not supported on fp32"),
    ("p + 1.5", "pointer offset must be an integer"),
    ("p + p", "cannot add two pointers"),
    ("n + 'text'", "unsupported operand: constexpr 'text'"),
    ("tl.arange(0, BLOCK) + tl.arange(0, 2 * BLOCK)", "cannot broadcast shapes [128] and [256]"),
    ("n.to(tl.uint32) % -1", "scalar -1 is out of range for type uint32"),
])
def test_type_errors_in_arithmetic(expr, words):
    err, lines = compile_error(f"y = {expr}\n")
    assert words in err.message
    assert_at(err, lines, f"y = {expr}", expr)


def test_errors_inside_inlined_helpers_point_into_the_helper():
    src = (HEADER + "def helper(x):\n    return x << 1.5\n\n\n@triton.jit\n"
           "def k(p):\n    tl.store(p, helper(tl.load(p)))\n")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "h.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": ["*fp32"], "constexprs": {}})
    err = locate(ei.value, out["loc"])
    assert err.loc.line == 7 and err.loc.source_line == "    return x << 1.5"
    assert err.loc.col == len("    return ")


def test_locate_leaves_errors_without_node_alone():
    e = CompilationError("boom")
    assert locate(e, b'{"file": "f.py", "nodes": {}, "lines": {}}') is e


def test_loc_names():
    assert node_id_of('loc("n17")') == 17 and node_id_of("n3") == 3 and node_id_of("loc(unknown)") is None
    assert node_loc(5, {"file": "a.py", "nodes": {"5": [3, 4]}, "lines": {"3": "    x = 1"}}).col == 4


def test_known_but_unlowered_tl_function_says_not_supported_yet():
    from ttbuild.errors import NotSupportedYet

    err, lines = compile_error("x = tl.math.tanh(tl.zeros((4, 4), tl.float32))\n")
    assert isinstance(err, NotSupportedYet) and err.op == "tl.math.tanh"
    assert "tl.math.tanh is not supported yet" in err.message
    assert_at(err, lines, "tl.math.tanh", "tl.math.tanh")


def test_if_on_a_block_condition():
    err, lines = compile_error("i = tl.arange(0, BLOCK)\nif i > 3:\n    n = n + 1\n")
    assert "an `if` condition must be a scalar, got a block of shape [128]" in err.message
    assert_at(err, lines, "if i > 3", "if")


def test_loop_carried_type_change():
    err, lines = compile_error("acc = 0\nfor k in range(n):\n    acc += tl.load(p)\n")
    assert "loop-carried variable 'acc' has initial type int32 but is re-assigned to fp32" in err.message
    assert_at(err, lines, "for k in", "for")


def test_return_inside_a_loop():
    err, lines = compile_error("for k in range(n):\n    return\n")
    assert "`return` inside a loop is not supported yet" in err.message
    assert_at(err, lines, "    return", "return")


def test_chained_comparison():
    err, lines = compile_error("m = 0 < n < 4\n")
    assert "chained comparisons" in err.message
    assert_at(err, lines, "m = 0 < n", "0 < n")


def test_math_on_fp16_needs_an_explicit_cast():
    err, lines = compile_error("y = tl.exp(tl.load(p))\n", signature=("*fp16", "i32"))
    assert err.message == "tl.exp expects dtype fp32 or fp64 but got fp16; cast with .to(tl.float32)"
    assert_at(err, lines, "tl.exp", "tl.exp")


@pytest.mark.parametrize("call, sig, message", [
    ("tl.atomic_max(p, 1.0)", "*fp16", "atomic_max does not support fp16"),
    ("tl.atomic_xchg(p, 1.0)", "*bf16", "atomic_xchg does not support bf16"),
    ("tl.atomic_add(p, 1)", "*i16", "atomic_add does not support int16"),
    ("tl.atomic_add(p, 1)", "*u8", "atomic_add does not support uint8"),
])
def test_atomic_on_unsupported_element_type(call, sig, message):
    """Triton 3.6 `atom_red_typechecking_impl`: 16-bit floats only add; no 16-bit ints, nothing narrower."""
    err, lines = compile_error(call + "\n", signature=(sig, "i32"))
    assert err.message == message
    assert_at(err, lines, call.split("(")[0], call.split("(")[0])


def test_undefined_name_suggests_a_close_one():
    err, lines = compile_error("offsets = tl.arange(0, BLOCK)\nx = tl.load(p + ofsets)\n")
    assert err.message == "undefined name 'ofsets'; did you mean 'offsets'?"
    assert_at(err, lines, "ofsets)", "ofsets")


def test_calling_a_function_from_another_module():
    src = "import triton\nimport triton.language as tl\nimport mylib\n\n\n@triton.jit\ndef k(p):\n    mylib.helper(p)\n"
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": ["*fp32"], "constexprs": {}})
    err = locate(ei.value, out["loc"])
    assert "cannot call mylib.helper: only tl builtins and @jit functions defined in the kernel's own file" in err.message
    assert (err.loc.line, err.loc.col) == (8, 4)


def test_fp8_to_int_needs_a_float_step():
    err, lines = compile_error("y = tl.load(p).to(tl.int32)\n", signature=("*fp8e5", "i32"))
    assert err.message == "cannot cast fp8e5 to int32"
    assert_at(err, lines, "y = tl.load", "tl.load(p).to")


def test_if_branch_changes_the_type_of_a_tensor_defined_before():
    err, lines = compile_error("v = n\nif tl.program_id(0) > 0:\n    v = tl.load(p)\nelse:\n    v = 2.0 * tl.load(p)\n")
    assert err.message == ("initial value for `v` is of type int32, but the then block redefines it as "
                           "a value of type fp32")
    assert_at(err, lines, "if tl.program_id", "if")


def test_constexpr_reassigned_in_a_loop():
    err, lines = compile_error("for i in range(n):\n    BLOCK = i\n")
    assert err.message == "cannot reassign constexpr `BLOCK` in a loop"
    assert_at(err, lines, "for i in", "for")


def test_early_return_inside_an_if_inside_a_loop():
    """Early returns are lowered only outside loops (Triton rejects them in loops too)."""
    err, lines = compile_error("for k in range(n):\n    if k > 2:\n        return\n")
    assert "`return` inside a loop is not supported yet" in err.message
    assert_at(err, lines, "        return", "return")


def test_early_return_with_a_value_inside_a_runtime_if_of_a_helper():
    """A helper's early return that carries a value would need merging out of the scf.if."""
    src = (HEADER + "def h(x):\n    if x > 0:\n        return x\n    return x + 1\n\n\n@triton.jit\n"
           "def k(p, n):\n    tl.store(p, h(n))\n")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": ["*fp32", "i32"], "constexprs": {}})
    err = locate(ei.value, out["loc"])
    assert "`return` inside a runtime `if` is not supported yet" in err.message
    lines = src.splitlines()
    assert err.loc.line == lines.index("        return x") + 1


def test_types_print_as_triton_writes_them():
    """Issue 12: tensors as `fp16[128, 64]`, pointers as `pointer<fp16>`, constexprs as
    `constexpr[None]`, also inside containers (repr), never dataclass reprs."""
    from ttbuild.frontend.semantic import Constexpr
    from ttbuild.frontend.types import BlockType, DType, PointerType

    fp16 = DType("fp16")
    assert str(BlockType(fp16, (128, 64))) == repr(BlockType(fp16, (128, 64))) == "fp16[128, 64]"
    assert repr([PointerType(fp16), fp16]) == "[pointer<fp16>, fp16]"
    assert repr(Constexpr(None)) == "constexpr[None]"
    err, lines = compile_error("offs = tl.arange(0, BLOCK)\nx = tl.load(p + offs)\nz = x + p\n",
                               constexprs={"BLOCK": 128})
    assert err.message == "pointer offset must be an integer, got fp32[128]"
    assert_at(err, lines, "x + p", "x + p")


def test_a_static_range_past_the_unroll_limit_is_a_located_error(monkeypatch):
    """Issue 14: `tl.static_range(10**6)` held the ttir stage for minutes at gigabytes; past
    TTBUILD_MAX_STATIC_UNROLL unrolled iterations (65536 by default) it is a diagnostic."""
    monkeypatch.setenv("TTBUILD_MAX_STATIC_UNROLL", "12")
    err, lines = compile_error("x = 0\nfor i in tl.static_range(8):\n    for j in tl.static_range(2):\n        x += j\n")
    assert err.message.startswith("tl.static_range(0, 2, 1) unrolls the loop body 2 times (14 unrolled "
                                  "iterations in this kernel so far); ttbuild stops at 12: use tl.range")
    assert_at(err, lines, "for j in", "for j")


@pytest.mark.parametrize("terms,stage", [(900, "ttir"), (3000, "parse")])
def test_an_expression_past_pythons_recursion_limit_is_a_located_error(terms, stage):
    """Issue 14: a 20,000-term expression gave a RecursionError traceback. Python's parser
    gives up on the longest sums (no position: the line with the most operators is named);
    shorter ones that still nest past the recursion limit are located at their deepest node."""
    src = HEADER + "def k(p, n, BLOCK: tl.constexpr):\n    x = tl.load(p)\n    y = " + \
        " + ".join(["x"] * terms) + "\n    tl.store(p, y)\n"
    out = None
    with pytest.raises(CompilationError) as ei:
        out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
        ttir.run({"json": out["json"]}, {"signature": ["*fp32", "i32"], "constexprs": {"BLOCK": 128}})
    err = ei.value
    assert "expression nested too deeply" in err.message and err.stage == stage
    if stage == "ttir":
        err = locate(err, out["loc"])
    assert err.loc.line == 8 and err.loc.source_line.lstrip().startswith("y = x + x")


def test_a_tensor_descriptor_signature_entry_is_parsed_whole():
    """Issue 12: `tensordesc<fp16[64, 64]>` used to split at its comma into two bad entries; it
    is one entry (a descriptor parameter, expanded to base, shape and strides), printed back the
    same; a bad one is refused by what is wrong with it."""
    from ttbuild.frontend.abi import part_signature, runtime_params
    from ttbuild.signature import SigEntry, SignatureError, parse_signature, split_entries

    assert split_entries("*fp16:16,tensordesc<fp16[64, 64]>,i32") == ["*fp16:16", "tensordesc<fp16[64, 64]>", "i32"]
    sig = parse_signature("*fp16:16,tensordesc<fp16[64, 64]>,i32")
    assert sig[1] == SigEntry("tensordesc", "fp16", 1, (64, 64)) and str(sig[1]) == "tensordesc<fp16[64, 64]>"
    assert [str(part_signature(e)) for e in runtime_params("d", sig[1])] == ["*fp16:16", "i32", "i32", "i64"]
    assert [str(part_signature(e)) for e in runtime_params("d", parse_signature("tensordesc<fp32[8, 4, 32]>:16")[0])] \
        == ["*fp32:16", "i32:16", "i32:16", "i32:16", "i64", "i64"]
    for bad, why in (("tensordesc<fp17[64]>", "unknown dtype 'fp17'"), ("tensordesc<fp16[48, 64]>", "power of two"),
                     ("tensordesc<fp16[64, 4]>", "at least 16 bytes in the last dimension"),
                     ("tensordesc<fp16[64, 64]>:8", "divisibility must be 16"), ("tensordesc<fp16>", "not a tensor descriptor")):
        with pytest.raises(SignatureError, match=why):
            parse_signature(f"*fp16:16,{bad},i32")


def test_triton_warnings_are_warnings_here_too(tmp_path, new_project):
    """Issue 12: a non-boolean tl.where condition warns as Triton 3.6 does (its text), located;
    through ttbuild.compile as a Python warning, in a build as a line after the task's."""
    import warnings as pywarnings

    import ttbuild
    from ttbuild.errors import CompilerWarning

    src = HEADER + "def k(p, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n" \
                   "    x = tl.load(p + offs)\n    y = tl.where(offs, x, 0.0)\n    tl.store(p + offs, y)\n"
    with pywarnings.catch_warnings(record=True) as caught:
        pywarnings.simplefilter("always")
        ttbuild.compile(src, kernel="k", signature="*fp32:16,i32", constexprs={"BLOCK": 128}, until="ttir",
                        file="k.py")
    (w,) = [w.message for w in caught if isinstance(w.message, CompilerWarning)]
    assert str(w).startswith("k.py:9:9: warning: tl.where with a non-boolean condition is deprecated and will "
                             "error out in a future triton release. Got int32")
    assert "y = tl.where(offs, x, 0.0)" in str(w) and str(w).endswith("^")

    proj = new_project(tmp_path / "p", "real")
    (proj.kernels / "wh.py").write_text(src)
    (proj.kernels / "variants.toml").write_text('[[variant]]\nname = "wh"\nfile = "wh.py"\nkernel = "k"\n'
                                                'signature = "*fp32:16,i32"\nconstexprs = { BLOCK = 128 }\n')
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text
    assert "wh.py:9:9: warning: tl.where with a non-boolean condition is deprecated" in run.out, run.out


def compile_warnings(body: str, signature=("*i32", "i32")):
    """Compile `def k(p, n, BLOCK): <body>` (BLOCK=32); the CompilerWarnings it raises, located,
    and the source lines."""
    from ttbuild.errors import CompilerWarning
    from ttbuild.locs import locate_warning

    src = HEADER + "def k(p, n, BLOCK: tl.constexpr):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ttir.run({"json": out["json"]}, {"signature": list(signature), "constexprs": {"BLOCK": 32}})
    found = [locate_warning(w.message, out["loc"]) for w in caught if isinstance(w.message, CompilerWarning)]
    return found, src.splitlines()


def assert_warned_at(w, lines, line_text_fragment: str, col_fragment: str, message: str):
    """Warning `w` says `message` (Triton's words) at the line containing `line_text_fragment`,
    at the column where `col_fragment` starts."""
    (lineno,) = [i + 1 for i, l in enumerate(lines) if line_text_fragment in l]
    col = lines[lineno - 1].index(col_fragment)
    assert w.message == message
    assert (w.loc.file, w.loc.line, w.loc.col) == ("lib/k.py", lineno, col)
    assert str(w).startswith(f"lib/k.py:{lineno}:{col + 1}: warning: {message}\n")


BITWIDTH = "Value {} exceeds the maximum bitwidth ({}) for type '{}'. This may result in undefined behavior."
SHIFT_BODY = "offs = tl.arange(0, BLOCK)\nx = tl.load(p + offs)\nb = x > 0\nh = x.to(tl.uint8)\n{}\n"


@pytest.mark.parametrize("stmt,at,message", [
    ("y = x << 40", "x << 40", BITWIDTH.format(40, 32, "int32")),
    ("y = n >> 32", "n >> 32", BITWIDTH.format(32, 32, "int32")),  # a scalar tensor too
    ("x >>= BLOCK", "x >>=", BITWIDTH.format(32, 32, "int32")),   # augmented, by a constexpr
    ("y = h << 8", "h << 8", BITWIDTH.format(8, 8, "uint8")),
    ("y = b << True", "b << True", BITWIDTH.format(True, 1, "int1")),
])
def test_a_shift_by_the_bit_width_or_more_warns(stmt, at, message):
    """Triton 3.6 core.check_bit_width (tensor.__lshift__ / __rshift__): a tensor shifted by a
    constexpr >= its element's bit width warns, at the shift."""
    (w,), lines = compile_warnings(SHIFT_BODY.format(stmt))
    assert_warned_at(w, lines, stmt, at, message)


@pytest.mark.parametrize("stmt", ["y = x << 31", "y = n >> 31", "y = 40 << x", "y = x << n", "y = h >> 7",
                                  "y = BLOCK << 40"])
def test_a_shift_within_the_bit_width_does_not_warn(stmt):
    """Below the width, by a runtime amount, or of a number by a tensor (Triton checks only
    tensor << constexpr), or between constexprs: no warning."""
    assert compile_warnings(SHIFT_BODY.format(stmt))[0] == []


def test_tl_view_warns_and_reshapes_with_reorder():
    """Triton 3.6 core.view: deprecated with a warning, at the call (function or method); it
    is reshape(can_reorder=True). tl.reshape does not warn."""
    body = "offs = tl.arange(0, BLOCK)\nx = tl.load(p + offs)\ny = tl.view(x, (BLOCK // 2, 2))\n" \
           "w = x.view(2, BLOCK // 2)\nz = tl.reshape(x, (2, BLOCK // 2))\n" \
           "tl.store(p + offs, tl.reshape(y, (BLOCK,)) + tl.reshape(w + z, (BLOCK,)))\n"
    (wf, wm), lines = compile_warnings(body)
    message = "view is deprecated, please use reshape with can_reorder being true."
    assert_warned_at(wf, lines, "y = tl.view", "tl.view", message)
    assert_warned_at(wm, lines, "w = x.view", "x.view", message)
    src = HEADER + "def k(p, n, BLOCK: tl.constexpr):\n" + textwrap.indent(body, "    ")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = ttir.run({"json": out["json"]}, {"signature": ["*i32", "i32"], "constexprs": {"BLOCK": 32}})["ttir"]
    reshapes = [l for l in text.decode().splitlines() if "tt.reshape" in l]
    assert ["allow_reorder" in l for l in reshapes] == [True, True, False, False, False]


BOOLOP = "Logical operators 'and' and 'or' are deprecated for non-scalar tensors; please use '&' or '|' instead"


def test_and_or_on_blocks_warn_once_per_block_operand():
    """Triton 3.6 code_generator.visit_BoolOp: `and` / `or` with a block operand warns once per
    such operand, at the expression; on scalars (or constexprs) it does not."""
    body = "offs = tl.arange(0, BLOCK)\nx = tl.load(p + offs)\nm = (x > 0) and (offs < n)\n" \
           "m2 = (n > 0) or (x > 1)\nif (n > 0) and (n < 9) or BLOCK > 4:\n    m2 = m2 & m\n" \
           "tl.store(p + offs, x, mask=m2)\n"
    (w1, w2, w3), lines = compile_warnings(body)
    assert_warned_at(w1, lines, "m = (x > 0)", "(x > 0) and", BOOLOP)
    assert_warned_at(w2, lines, "m = (x > 0)", "(x > 0) and", BOOLOP)
    assert_warned_at(w3, lines, "m2 = (n > 0)", "(n > 0) or", BOOLOP)


ORACLE_WARNINGS = MAKE_IR + r"""
out = {}
for name in json.loads(sys.argv[2]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_ir(getattr(mod, name), {"p": "*i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 32})
    out[name] = [str(w.message) for w in caught]
print(json.dumps(out))
"""


def test_warnings_match_triton(tmp_path):
    """Triton as oracle: each kernel draws the same warnings, in the same order, from Triton
    3.6's frontend as from ours (the ordinary forms none, builtin min/max on blocks none either);
    Triton places those of core.py at its own source line, so only the texts are compared."""
    from oracle import run_triton, triton_python

    triton_python()
    bodies = {
        "plain": "m = (x > 0) & (offs < n)\ny = tl.where(m, x << 31, tl.reshape(tl.reshape(x, (2, BLOCK // 2)), (BLOCK,)))",
        "where": "y = tl.where(x, x, 0)",
        "shifts": "y = (x << 40) + (n >> 32) + (40 << x)\ny >>= BLOCK",
        "view": "y = tl.reshape(tl.view(x, (BLOCK // 2, 2)), (BLOCK,)) + tl.reshape(x.view(2, BLOCK // 2), (BLOCK,))",
        "boolop": "m = (x > 0) and (offs < n)\nm = m or (n > 0)\ny = tl.where(m, x, 0)",
        "scalar_boolop": "y = x + ((n > 0) and (n < 9) or (n == 3)).to(tl.int32)",
        # core.builtin_max's DeprecationWarning is raised inside code_generator.visit, which ignores them
        "builtin_max": "y = max(x, n) + min(x, 3)",
    }
    src = HEADER.replace("@triton.jit\n", "") + "".join(
        f"@triton.jit\ndef {name}(p, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
        f"    x = tl.load(p + offs)\n{textwrap.indent(body, '    ')}\n    tl.store(p + offs, y)\n\n\n"
        for name, body in bodies.items())
    path = tmp_path / "cases.py"
    path.write_text(src)
    from ttbuild.errors import CompilerWarning

    ours = {}
    for name in bodies:
        out = parse.run({"source": src.encode()}, {"kernel": name, "file": "cases.py"})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ttir.run({"json": out["json"]}, {"signature": ["*i32", "i32"], "constexprs": {"BLOCK": 32}})
        ours[name] = [w.message.message for w in caught if isinstance(w.message, CompilerWarning)]
    theirs = json.loads(run_triton(ORACLE_WARNINGS, str(path), json.dumps(list(bodies))).splitlines()[-1])
    assert ours == theirs
    assert ours["plain"] == ours["scalar_boolop"] == ours["builtin_max"] == [] and len(ours["boolop"]) == 3


@pytest.mark.parametrize("expr,message", [
    ("tl.histogram(tl.zeros((4, 4), tl.int32), 8)", "histogram only supports 1D input"),
    ("tl.histogram(tl.zeros((16,), tl.float32), 8)", "histogram only supports integer input"),
    ("tl.histogram(tl.zeros((16,), tl.int32), 12)", "tl.histogram needs num_bins a power of two, got 12"),
    ("tl.histogram(tl.zeros((16,), tl.int32), 8, mask=tl.zeros((16,), tl.int32))", "Mask must have boolean scalar type"),
])
def test_histogram_refusals(expr, message):
    """Triton semantic.histogram's checks with its messages, at the call."""
    err, lines = compile_error(f"h = {expr}\n")
    assert err.message == message
    assert_at(err, lines, "h = ", "tl.histogram")


def test_histogram_ttir():
    """tt.histogram of the 1-D input (and the mask, broadcast to it) -> tensor<Nxi32>."""
    src = HEADER + "def k(p, n):\n    r = tl.arange(0, 64)\n    h = tl.histogram(r, 16, mask=r < n)\n" \
                   "    tl.store(p + tl.arange(0, 16), h)\n"
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    text = ttir.run({"json": out["json"]}, {"signature": ["*i32", "i32"], "constexprs": {}})["ttir"].decode()
    assert '"tt.histogram"' in text
    assert "(tensor<64xi32>, tensor<64xi1>) -> tensor<16xi32>" in text


def test_a_kernel_file_that_is_not_utf8_is_located_at_the_byte():
    """Issue 32: a non-UTF-8 kernel file raised UnicodeDecodeError out of the parse stage."""
    from ttbuild.frontend.canon import canonicalize

    source = b"import triton\n# caf\xe9\n@triton.jit\ndef k(x):\n    pass\n"
    with pytest.raises(CompilationError, match="not UTF-8: byte 0xe9") as info:
        canonicalize(source, "k", "k.py")
    assert (info.value.loc.line, info.value.loc.col) == (2, 5) and info.value.stage == "parse"
