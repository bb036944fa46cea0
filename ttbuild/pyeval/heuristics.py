"""`@triton.heuristics` expressions as data: a checked grammar over `args`, compiled into a bounded callable; stdlib only.

The compiled callable has no builtins and every operator goes through ttbuild.pyeval.bounds.

The build checks the grammar and folds constant parts under the same bounds (check_node), so an
expression like `9**9**9**9` is refused with a location; the runtime (ttbuild.runtime.heuristics)
compiles the same text into a function whose arithmetic goes through `bounds.binop`, so values
only known at launch cannot hang or exhaust the serving process either.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Mapping

from ttbuild.errors import TTBuildError

from . import bounds

__all__ = ["HeuristicError", "HELPERS", "check_expression", "check_node", "compile_expression", "is_boolean",
           "next_power_of_2", "cdiv"]


class HeuristicError(TTBuildError, ValueError):
    """A heuristic expression outside the grammar: `message` says what is not allowed, `col` is the
    0-based column of the offending node within the expression text (None when unknown), `node`
    the offending ast node (so a caller that parsed the source itself can place the error)."""

    def __init__(self, message: str, col: int | None = None, node: ast.AST | None = None):
        self.message, self.col, self.node = message, col, node
        super().__init__(message if col is None else f"{message} (column {col + 1})")


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n; 1 for n <= 1 (as triton.next_power_of_2)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a, b):
    """Ceiling division (a + b - 1) // b, as triton.cdiv."""
    return (a + b - 1) // b


# The only names an expression may call; also the whole of its globals once compiled.
HELPERS: dict[str, Callable] = {"min": min, "max": max, "abs": abs, "int": int, "float": float, "bool": bool,
                                "next_power_of_2": next_power_of_2, "cdiv": cdiv}

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
           ast.BitAnd, ast.BitOr, ast.BitXor)
_UNARYOPS = (ast.USub, ast.UAdd, ast.Not, ast.Invert)
_CONSTANTS = (int, float, bool, str, type(None))
# What each refused node is called in the message.
_NAMES = {ast.Attribute: "attribute access", ast.Lambda: "a lambda", ast.ListComp: "a comprehension",
          ast.SetComp: "a comprehension", ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator",
          ast.NamedExpr: "an assignment expression (:=)", ast.JoinedStr: "an f-string", ast.Dict: "a dict",
          ast.Set: "a set", ast.Starred: "unpacking (*)", ast.Await: "await", ast.Slice: "a slice"}


def _refuse(node: ast.AST, what: str):
    raise HeuristicError(f"{what} is not allowed in a heuristic expression", getattr(node, "col_offset", None), node)


_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def _fold(node: ast.AST):
    """The value of a constant subexpression (constants, tuples, lists and operators of them),
    computed under the bounds; None when it reads `args` or calls a helper. Raises HeuristicError
    at the operator whose result the bounds refuse."""
    if isinstance(node, ast.Constant):
        return (node.value,)
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = [_fold(e) for e in node.elts]
        return None if any(p is None for p in parts) else ((tuple if isinstance(node, ast.Tuple) else list)(
            p[0] for p in parts),)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _fold(node.operand)
        try:
            return None if inner is None else ((-inner[0] if isinstance(node.op, ast.USub) else +inner[0]),)
        except TypeError:
            return None
    if isinstance(node, ast.BinOp) and type(node.op) in _SYMBOL:
        left, right = _fold(node.left), _fold(node.right)
        if left is None or right is None:
            return None
        try:
            return (bounds.binop(_SYMBOL[type(node.op)], left[0], right[0]),)
        except bounds.BoundError as e:
            raise HeuristicError(f"`{ast.unparse(node)[:60]}` is not evaluated: {e}",
                                 getattr(node, "col_offset", None), node) from None
        except (ArithmeticError, TypeError, ValueError):
            return None  # Python's own error, raised again (located) when the heuristic runs
    return None


def _check(node: ast.AST, reads: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, _CONSTANTS):
            _refuse(node, f"the constant {node.value!r}")
    elif isinstance(node, ast.Subscript):
        if not (isinstance(node.value, ast.Name) and node.value.id == "args"):
            _refuse(node, "subscripting anything but `args`")
        if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            _refuse(node.slice, "an `args` index other than a string constant")
        reads.add(node.slice.value)
    elif isinstance(node, ast.BinOp):
        if not isinstance(node.op, _BINOPS):
            _refuse(node, f"the operator {type(node.op).__name__}")
        _check(node.left, reads)
        _check(node.right, reads)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, _UNARYOPS):
            _refuse(node, f"the operator {type(node.op).__name__}")
        _check(node.operand, reads)
    elif isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, reads)
    elif isinstance(node, ast.Compare):
        _check(node.left, reads)
        for op, right in zip(node.ops, node.comparators):
            # Membership only against a literal: `args['X'] in args['Y']` could scan anything.
            if isinstance(op, (ast.In, ast.NotIn)) and not isinstance(right, (ast.Tuple, ast.List)):
                _refuse(right, "`in` against anything but a tuple or list literal")
            _check(right, reads)
    elif isinstance(node, ast.IfExp):
        for part in (node.test, node.body, node.orelse):
            _check(part, reads)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            _check(e, reads)
    elif isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in HELPERS):
            what = f"calling `{ast.unparse(node.func)}`"
            _refuse(node, f"{what} (only {', '.join(HELPERS)})")
        if node.keywords:
            _refuse(node.keywords[0], "a keyword argument")
        for a in node.args:
            _check(a, reads)
    elif isinstance(node, ast.Name):
        if node.id == "args":
            _refuse(node, "`args` other than as args['NAME']")
        _refuse(node, f"the name `{node.id}`")
    else:
        _refuse(node, _NAMES.get(type(node), type(node).__name__))


def check_node(node: ast.expr) -> tuple[str, ...]:
    """check_expression on an already parsed expression node: the sorted argument names it reads.
    Raises HeuristicError whose `node` is the offending node and `col` its col_offset."""
    reads: set[str] = set()
    try:
        _check(node, reads)
        for sub in ast.walk(node):
            if isinstance(sub, ast.BinOp):
                _fold(sub)
    except RecursionError:
        raise HeuristicError("expression nested too deeply", None, node) from None
    return tuple(sorted(reads))


def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise HeuristicError(f"invalid syntax: {e.msg}", max((e.offset or 1) - 1, 0)) from None
    except (RecursionError, MemoryError):
        raise HeuristicError("expression nested too deeply") from None


def _text_col(text: str, node: ast.AST) -> int | None:
    """The node's position as a character offset into `text` (ast counts lines and UTF-8 bytes)."""
    line, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
    if line is None or col is None:
        return None
    lines = text.split("\n")
    before = sum(len(x) + 1 for x in lines[: line - 1])
    return before + len(lines[line - 1].encode()[:col].decode("utf-8", "replace"))


def check_expression(text: str) -> tuple[str, ...]:
    """Validate `text`, a Python expression over a mapping `args`, against the heuristic grammar
    and return the sorted tuple of names it reads as args['NAME'].

    Allowed: int/float/bool/str/None constants, args['NAME'], arithmetic and bitwise operators,
    - + not ~, and/or, comparisons (`in`/`not in` against tuple or list literals), x if c else y,
    tuple and list literals, and calls of min, max, abs, int, float, bool, next_power_of_2, cdiv.
    Raises HeuristicError naming the first construct that is not allowed, with its column.
    """
    tree = _parse(text)
    try:
        return check_node(tree.body)
    except HeuristicError as e:
        raise HeuristicError(e.message, _text_col(text, e.node) if e.node is not None else None, e.node) from None


def compile_expression(text: str) -> Callable[[Mapping[str, Any]], Any]:
    """`text` (checked by check_expression, which raises HeuristicError) as a function of `args`,
    compiled once from the checked tree; its globals are the helpers and no builtins."""
    check_expression(text)
    body = _Bounded().visit(_parse(text).body)
    fn = ast.Expression(ast.Lambda(ast.arguments(posonlyargs=[], args=[ast.arg("args")], kwonlyargs=[],
                                                 kw_defaults=[], defaults=[]), body))
    code = compile(ast.fix_missing_locations(fn), "<heuristic>", "eval")
    # the tree was checked above: no names, attributes or calls but HELPERS and the bounded operators
    return eval(code, {"__builtins__": {}, **HELPERS, "_binop": _binop})


def _binop(symbol: str, left, right):
    """An operator of a compiled heuristic: bounds.binop, its refusal a HeuristicError."""
    try:
        return bounds.binop(symbol, left, right)
    except bounds.BoundError as e:
        raise HeuristicError(f"a heuristic's `{symbol}` is not evaluated: {e}") from None


class _Bounded(ast.NodeTransformer):
    """Every binary operator becomes `_binop("<op>", left, right)` (positions kept for messages)."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        call = ast.Call(ast.Name("_binop", ast.Load()), [ast.Constant(_SYMBOL[type(node.op)]), node.left, node.right], [])
        return ast.copy_location(call, node)


def _boolean(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return True
    if isinstance(node, ast.BoolOp):
        return all(_boolean(v) for v in node.values)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.IfExp):
        return _boolean(node.body) and _boolean(node.orelse)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool"


def is_boolean(text: str) -> bool:
    """Whether the expression's value is a bool by its form: a comparison, `not x`, a bool constant,
    bool(...), and/or of such forms, or x if c else y with both branches such forms.
    Raises HeuristicError for text outside the grammar (check_expression)."""
    check_expression(text)
    return _boolean(_parse(text).body)
