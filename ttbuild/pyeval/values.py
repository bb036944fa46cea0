"""The values and scopes of ttbuild's static Python evaluator: source positions for located errors, dotted names, closures, frames; standard library only."""

from __future__ import annotations

import ast
import operator

from ttbuild.errors import CompilationError, Loc


def dotted_name(node: ast.AST | None) -> str | None:
    """`a.b.c` for a Name or a chain of Attributes on one, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def resolve_name(name: str | None, imports: dict[str, str]) -> str | None:
    """`tl.cdiv` -> `triton.language.cdiv` through the module's import aliases (name -> module path)."""
    if not name:
        return None
    head, _, rest = name.partition(".")
    if head in imports:
        return imports[head] + ("." + rest if rest else "")
    return name


class Source:
    """The file's lines, to place errors (ast columns count UTF-8 bytes, carets count characters)."""

    def __init__(self, file: str, text: str):
        self.file, self.lines = file, text.splitlines()

    def loc(self, node: ast.AST) -> Loc:
        """The Loc of `node` in this source: file, 1-based line, column in characters (ast gives UTF-8 byte offsets),
        and the line's text for the caret."""
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        col = len(text.encode()[: getattr(node, "col_offset", 0)].decode("utf-8", "replace"))
        return Loc(self.file, line, col, text)

    def error(self, node: ast.AST, message: str) -> CompilationError:
        """A CompilationError with `message` located at `node`."""
        return CompilationError(message, self.loc(node))


class UnknownValue(CompilationError):
    """A located error for a value only the running program knows (a third-party call's result): an `or` / `and`
    whose other operand decides the outcome alone may still be read (Evaluator._BoolOp)."""


class PythonError(CompilationError):
    """A located error that Python itself raises there (the KeyError of a missing key...): `kind` names its class,
    and a function body's `try` / `except` that names it (or a base class) takes its handler, as Python would."""

    def __init__(self, message: str, loc: Loc, kind: str):
        super().__init__(message, loc)
        self.kind = kind


# The exception classes a handler may name for each error the evaluator raises as Python would.
EXCEPTION_BASES = {"KeyError": {"LookupError"}, "IndexError": {"LookupError"}, "ZeroDivisionError": {"ArithmeticError"},
                   "OverflowError": {"ArithmeticError"}, "TypeError": set(), "ValueError": set()}


def catches(names: set[str] | None, kind: str) -> bool:
    """Whether an `except` naming `names` (None: a bare except) catches Python's `kind` error."""
    return names is None or bool(names & ({kind, "Exception", "BaseException"} | EXCEPTION_BASES.get(kind, set())))


def defaults_of(a: ast.arguments) -> dict[str, ast.expr]:
    """The parameters of a signature that have a default (positional and keyword-only), each with its
    default expression, as Python pairs them (`defaults` fill the last positional parameters)."""
    positional = a.posonlyargs + a.args
    out = dict(zip((p.arg for p in positional[len(positional) - len(a.defaults):]), a.defaults))
    out.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    return out


def short(node: ast.AST) -> str:
    """`node` as source text (ast.unparse), cut to 80 characters with "..." for messages."""
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."



class Target:
    """`triton.runtime.driver.active.get_current_target()`: ttbuild builds for CUDA."""


class Function:
    """A function defined in the source being read (its FunctionDef), a value the evaluator can call;
    `scope` is the frame of the enclosing function for a nested `def` (a closure), else None."""
    def __init__(self, fn: ast.FunctionDef, scope: Scope | None = None):
        self.fn, self.scope = fn, scope


class Closure:
    """A lambda with plain positional parameters and the scope it was made in."""

    def __init__(self, node: ast.Lambda, scope: Scope | None):
        self.node, self.scope = node, scope


class Scope:
    """Local names of a function call or a comprehension; `assigned` are the names a function body
    binds (read before binding: UnboundLocalError in Python, an error here)."""

    def __init__(self, parent: Scope | None = None, assigned: frozenset = frozenset()):
        self.vars: dict = {}
        self.parent, self.assigned = parent, assigned

    def find(self, name: str):
        """(True, value) for `name` bound in this scope or an enclosing one ((True, UNBOUND) when assigned there but
        not yet bound, as Python's UnboundLocalError), else (False, None)."""
        scope = self
        while scope is not None:
            if name in scope.vars:
                return True, scope.vars[name]
            if name in scope.assigned:
                return True, UNBOUND
            scope = scope.parent
        return False, None


UNBOUND = object()
BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Pow: operator.pow, ast.Div: operator.truediv, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
INT_ONLY = (ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)
CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.Div: "/",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
BUILTINS = ("range", "len", "min", "max", "list", "tuple", "filter", "map", "int", "float", "str", "bool", "abs")



def number(v) -> bool:
    """Whether `v` is an int or float (bool included, as Python counts it)."""
    return isinstance(v, (int, float))


def assigned(fn: ast.FunctionDef) -> frozenset:
    """The names a function body binds (its locals); a comprehension's variables are its own."""
    out, todo = set(), list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(out)


def is_none(node: ast.AST) -> bool:
    """Whether `node` is the literal None."""
    return isinstance(node, ast.Constant) and node.value is None


def is_append(node: ast.AST) -> bool:
    """Whether `node` is `name.append(x)` with one plain positional argument (the list building the evaluator runs)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords
            and not isinstance(node.args[0], ast.Starred))

