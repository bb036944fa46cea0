"""ttbuild.runtime.heuristics: the restricted grammar of heuristic expressions, their compiled form and helpers."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from ttbuild.errors import TTBuildError
from ttbuild.pyeval import bounds
from ttbuild.runtime import heuristics
from ttbuild.runtime.heuristics import HeuristicError, check_expression, check_node, compile_expression, is_boolean


def test_reads_are_sorted_and_unique():
    assert check_expression("args['K'] % args['BLOCK_K'] == 0") == ("BLOCK_K", "K")
    assert check_expression('max(args["N"], args["N"] // 2)') == ("N",)
    assert check_expression("16") == ()


@pytest.mark.parametrize("text, args, value", [
    ("args['K'] % args['BLOCK_K'] == 0", {"K": 256, "BLOCK_K": 64}, True),
    ("args['K'] % args['BLOCK_K'] == 0", {"K": 250, "BLOCK_K": 64}, False),
    ("next_power_of_2(args['n'])", {"n": 1000}, 1024),
    ("min(next_power_of_2(args['n']), 4096)", {"n": 100_000}, 4096),
    ("cdiv(args['M'], args['BM']) * cdiv(args['N'], args['BN'])", {"M": 100, "BM": 32, "N": 64, "BN": 64}, 4),
    ("8 if args['BLOCK'] >= 2048 else 4 if args['BLOCK'] >= 512 else 2", {"BLOCK": 1024}, 4),
    ("args['dtype'] in ('fp16', 'bf16') and not args['TRANS']", {"dtype": "bf16", "TRANS": False}, True),
    ("args['dtype'] not in ['fp32']", {"dtype": "fp32"}, False),
    ("abs(-args['x']) ** 2 + (1 << 3) - (~0) ^ 1", {"x": 3}, 19),
    ("int(args['x'] / 2) + float(bool(args['y'] | 0 & 1)) - +1", {"x": 7, "y": 0}, 2.0),
    ("[args['a'], (args['b'], None)]", {"a": 1, "b": "s"}, [1, ("s", None)]),
    ("1 < args['x'] <= 3", {"x": 3}, True),
])
def test_compiled_values(text, args, value):
    f = compile_expression(text)
    assert f(args) == value
    assert type(f(args)) is type(value)


@pytest.mark.parametrize("text, what, col", [
    ("args['x'].dtype", "attribute access", 0),
    ("args['n'] + len(args['t'])", "calling `len`", 12),
    ("__import__('os')", "calling `__import__`", 0),
    ("args[0]", "an `args` index other than a string constant", 5),
    ("args['a']['b']", "subscripting anything but `args`", 0),
    ("args", "`args` other than as args['NAME']", 0),
    ("BLOCK * 2", "the name `BLOCK`", 0),
    ("(lambda: 1)()", "calling `lambda: 1`", 0),
    ("[x for x in (1, 2)]", "a comprehension", 0),
    ("(n := args['n'])", "an assignment expression", 1),
    ("f'{args}'", "an f-string", 0),
    ("{'a': 1}", "a dict", 0),
    ("args['x'] in args['y']", "`in` against anything but a tuple or list literal", 13),
    ("max(args['x'], key=abs)", "a keyword argument", 15),
    ("1j + args['x']", "the constant 1j", 0),
    ("args['x'] @ args['y']", "the operator MatMult", 0),
    ("[*args['x']]", "unpacking (*)", 1),
    ("next_power_of_2(args['n'])[1:2]", "subscripting anything but `args`", 0),
])
def test_refused_forms_name_the_construct_and_its_column(text, what, col):
    with pytest.raises(HeuristicError) as e:
        check_expression(text)
    assert what in e.value.message and "not allowed" in e.value.message
    assert e.value.col == col
    assert isinstance(e.value, ValueError) and isinstance(e.value, TTBuildError)
    with pytest.raises(HeuristicError):
        compile_expression(text)


def test_column_counts_characters_not_bytes():
    with pytest.raises(HeuristicError) as e:
        check_expression("args['ü'] + x")
    assert e.value.col == 12


def test_syntax_error_and_statements():
    for text in ("args['x'] +", "x = 1", "import os"):
        with pytest.raises(HeuristicError, match="invalid syntax"):
            check_expression(text)


def test_check_node_reports_the_node():
    tree = ast.parse("args['a'] + args['b'].real", mode="eval").body
    with pytest.raises(HeuristicError) as e:
        check_node(tree)
    assert isinstance(e.value.node, ast.Attribute) and e.value.col == 12


def test_no_builtins_in_the_compiled_function():
    f = compile_expression("min(args['a'], 2)")
    assert f.__globals__["__builtins__"] == {}
    # the helpers, and the bounded operators every `+ - * ** << ...` of the expression goes through
    assert set(f.__globals__) == {"__builtins__", "min", "max", "abs", "int", "float", "bool", "next_power_of_2",
                                  "cdiv", "_binop"}
    assert f({"a": 5}) == 2
    with pytest.raises(KeyError):
        f({})


@pytest.mark.parametrize("text, expected", [
    ("args['K'] % 16 == 0", True),
    ("args['a'] > 1 and (args['b'] or args['c'] < 2)", False),
    ("args['a'] > 1 and not args['b']", True),
    ("True", True),
    ("bool(args['x'])", True),
    ("args['x'] if args['y'] else False", False),
    ("args['x'] > 0 if args['y'] else False", True),
    ("args['x']", False),
    ("1", False),
    ("min(args['x'], 1) == 1 or args['y'] != 2", True),
])
def test_is_boolean_by_form(text, expected):
    assert is_boolean(text) is expected


def test_helpers_match_triton():
    assert [heuristics.next_power_of_2(n) for n in (-3, 0, 1, 2, 3, 4, 5, 1023, 1024, 1025)] == \
        [1, 1, 1, 2, 4, 4, 8, 1024, 1024, 2048]
    assert [heuristics.cdiv(n, 32) for n in (0, 1, 32, 33, 64)] == [0, 1, 1, 2, 2]


def test_imports_only_stdlib_and_ttbuild_errors():
    # The grammar's own imports: the runtime re-exports ttbuild.pyeval.heuristics, which reads only
    # the standard library, ttbuild.errors and its sibling ttbuild.pyeval.bounds.
    from ttbuild.pyeval import heuristics as grammar

    for module in (grammar, bounds):
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "." for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert imported <= {"__future__", "ast", "typing", "ttbuild.errors", "."} | set(sys.stdlib_module_names)


@pytest.mark.parametrize("text", ["9**9**9**9", "[0]*10**9", "1<<10**10", "(1<<4000)*(1<<4000)", "'ab'*10**8"])
def test_unbounded_constants_are_refused_when_checked(text):
    """Issue 32: the build refuses a heuristic whose constant part cannot be bounded, at its column."""
    with pytest.raises(HeuristicError, match="is not evaluated"):
        check_expression(text)


@pytest.mark.parametrize("text, args", [("args['a'] ** args['b']", {"a": 9, "b": 9**9}),
                                        ("args['a'] << args['b']", {"a": 1, "b": 10**10}),
                                        ("[args['a']] * args['b']", {"a": 0, "b": 10**9}),
                                        ("args['a'] * args['a']", {"a": 1 << 4000})])
def test_compiled_heuristic_bounds_launch_values(text, args):
    """Issue 32: values only known at launch go through the same bounds: a HeuristicError, at once."""
    f = compile_expression(text)
    with pytest.raises(HeuristicError, match="is not evaluated"):
        f(args)
    assert compile_expression("args['a'] * 2 + (1 << args['b'])")({"a": 3, "b": 4}) == 22
