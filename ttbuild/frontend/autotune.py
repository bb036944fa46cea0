"""Reads a kernel's `@triton.autotune` / `@triton.heuristics` from its source without running it: configs through a bounded evaluator over the ast, heuristics as ttbuild.runtime.heuristics expressions.

The rules follow python/triton/runtime/autotuner.py (Triton 3.6): `autotune(configs, key,
prune_configs_by, reset_to_zero, restore_value, pre_hook, post_hook, warmup, rep, use_cuda_graph,
do_bench, cache_results)`, `Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
pre_hook=None, ir_override=None)`, `heuristics(values)` with each value a function of `args`.
"""

from __future__ import annotations

import ast
import builtins
import copy
import operator
import warnings
from dataclasses import dataclass, field

from ttbuild.errors import CompilationError, CompilerWarning, Loc
from ttbuild.runtime.heuristics import HeuristicError, check_expression, check_node, is_boolean

__all__ = ["Config", "Autotune", "Heuristic", "Decorators", "read_decorators", "dotted_name", "resolve_name",
           "MAX_STEPS"]

# Evaluation steps (nodes evaluated, loop iterations, list elements built) before giving up.
MAX_STEPS = 100_000
_MAX_CALL_DEPTH = 64
_MAX_INT_BITS = 4096  # `2 ** 10 ** 9` would otherwise hang the build before the step count sees it

_AUTOTUNE = {"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"}
_HEURISTICS = {"triton.heuristics", "triton.runtime.heuristics", "triton.runtime.autotuner.heuristics"}
_CONFIG = {"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"}
_TARGET = {"triton.runtime.driver.active.get_current_target"}
_HELPER_ALIASES = {"triton.next_power_of_2": "next_power_of_2", "triton.cdiv": "cdiv",
                   "triton.language.cdiv": "cdiv"}
_CONSTEXPR = {"triton.language.constexpr", "ttbuild.language.constexpr"}
_AUTOTUNE_PARAMS = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "pre_hook",
                    "post_hook", "warmup", "rep", "use_cuda_graph", "do_bench", "cache_results")
_CONFIG_PARAMS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ir_override")
_WHY = ("literals, comprehensions, lambdas, range/len/min/max/list/tuple/filter/map, triton.Config and its fields, "
        "names and simple functions of the file, and the current target's backend, which is 'cuda'")


@dataclass(frozen=True)
class Config:
    """One `triton.Config`: `kwargs` maps constexpr parameter names to int | float | bool | str;
    `loc` is where the `triton.Config(...)` call is written (several configs of a comprehension share it)."""

    kwargs: dict = field(hash=False)
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    maxnreg: int | None = None
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Autotune:
    """`@triton.autotune`: its configs (in the list's order; Triton's single default config when
    the list is empty), `key` and the reset/restore argument names; `loc` is the decorator's."""

    configs: tuple[Config, ...]
    key: tuple[str, ...]
    reset_to_zero: tuple[str, ...] = ()
    restore_value: tuple[str, ...] = ()
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Heuristic:
    """One entry of `@triton.heuristics`: the constexpr `name` it defines, `expr` over `args` in the
    ttbuild.runtime.heuristics grammar, the argument names it reads, whether its value is a bool
    by its form; `loc` is the lambda's (or the function name's) position."""

    name: str
    expr: str
    params: tuple[str, ...]
    boolean: bool
    loc: Loc | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Decorators:
    """A kernel's autotune (or None) and heuristics, the latter in the order Triton evaluates them
    at launch: the outermost decorator's wrapper runs first, and a dict's entries in order."""

    autotune: Autotune | None
    heuristics: tuple[Heuristic, ...]


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


class _Source:
    """The file's lines, to place errors (ast columns count UTF-8 bytes, carets count characters)."""

    def __init__(self, file: str, text: str):
        self.file, self.lines = file, text.splitlines()

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        col = len(text.encode()[: getattr(node, "col_offset", 0)].decode("utf-8", "replace"))
        return Loc(self.file, line, col, text)

    def error(self, node: ast.AST, message: str) -> CompilationError:
        return CompilationError(message, self.loc(node))


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."


class _Module:
    """What a name means when the decorators run: the last module-level binding before the kernel's
    `def` (the decorator expressions execute there). Kinds: assign, def, import, other."""

    def __init__(self, body: list[ast.stmt]):
        self.bindings: dict[str, tuple[str, object]] = {}
        for stmt in body:
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    name = a.asname or a.name.split(".")[0]
                    self.bindings[name] = ("import", a.name if a.asname else name)
            elif isinstance(stmt, ast.ImportFrom):
                for a in stmt.names:
                    full = f"{stmt.module}.{a.name}" if stmt.module and not stmt.level else None
                    self.bindings[a.asname or a.name] = ("import", full) if full else ("other", stmt)
            elif isinstance(stmt, ast.FunctionDef):
                self.bindings[stmt.name] = ("def", stmt)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.bindings[stmt.targets[0].id] = ("assign", stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
                self.bindings[stmt.target.id] = ("assign", stmt.value)
            else:  # anything else that binds a name hides an earlier binding we could read
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        self.bindings[node.id] = ("other", stmt)
                    elif isinstance(node, (ast.ClassDef, ast.AsyncFunctionDef)):
                        self.bindings[node.name] = ("other", stmt)
        self.imports = {n: full for n, (kind, full) in self.bindings.items() if kind == "import" and full}


class _Target:
    """`triton.runtime.driver.active.get_current_target()`: ttbuild builds for CUDA."""


class _Function:
    def __init__(self, fn: ast.FunctionDef):
        self.fn = fn


class _Closure:
    """A lambda with plain positional parameters and the scope it was made in."""

    def __init__(self, node: ast.Lambda, scope: _Scope | None):
        self.node, self.scope = node, scope


class _Scope:
    """Local names of a function call or a comprehension; `assigned` are the names a function body
    binds (read before binding: UnboundLocalError in Python, an error here)."""

    def __init__(self, parent: _Scope | None = None, assigned: frozenset = frozenset()):
        self.vars: dict = {}
        self.parent, self.assigned = parent, assigned

    def find(self, name: str):
        scope = self
        while scope is not None:
            if name in scope.vars:
                return True, scope.vars[name]
            if name in scope.assigned:
                return True, _UNBOUND
            scope = scope.parent
        return False, None


_UNBOUND = object()
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
_BUILTINS = ("range", "len", "min", "max", "list", "tuple", "filter", "map")
_CONFIG_FIELDS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ir_override")


def _number(v) -> bool:
    return isinstance(v, (int, float))


class _Evaluator:
    """Evaluates the decorator arguments: a small pure subset of Python, bounded by MAX_STEPS."""

    def __init__(self, src: _Source, module: _Module, constexprs: tuple[str, ...]):
        self.src, self.module, self.constexprs = src, module, constexprs
        self.steps, self.depth = 0, 0
        self.globals: dict[str, object] = {}
        self.active: list[str] = []  # module names being evaluated, for cycles
        self.loops: list[ast.AST] = []  # loops being run, to blame the outermost for a runaway

    # ------------------------------------------------------------- plumbing

    def tick(self, node: ast.AST, n: int = 1) -> None:
        self.steps += n
        if self.steps > MAX_STEPS:
            where = self.loops[0] if self.loops else node
            raise self.src.error(where, f"gave up evaluating after {MAX_STEPS} steps (a runaway loop?): ttbuild "
                                        "reads autotune configs statically and keeps that bounded")

    def cannot(self, node: ast.AST, why: str = _WHY) -> CompilationError:
        return self.src.error(node, f"cannot evaluate `{_short(node)}` without running the file: ttbuild reads "
                                    f"autotune configs statically ({why})")

    def eval(self, node: ast.AST, scope: _Scope | None):
        self.tick(node)
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise self.cannot(node)
        return method(node, scope)

    def iterate(self, node: ast.AST, scope: _Scope | None):
        yield from self.iterate_value(self.eval(node, scope), node)

    def iterate_value(self, value, node: ast.AST):
        if not isinstance(value, (list, tuple, range, dict, set, str)):
            raise self.src.error(node, f"cannot iterate over `{_short(node)}`, a {type(value).__name__}")
        for item in value:
            self.tick(node)
            yield item

    def is_none(self, node: ast.AST, scope: _Scope | None) -> bool:
        """Whether a hook argument (pre_hook=, post_hook=...) is None: a literal `None`, or an
        expression that evaluates to None, as a helper's `pre_hook=None` parameter passed on. One that
        evaluates to anything else, or cannot be evaluated (a lambda with defaults, an imported
        function), is a hook."""
        if _is_none(node):
            return True
        try:
            return self.eval(node, scope) is None
        except CompilationError:
            return False

    def bind(self, target: ast.AST, value, scope: _Scope) -> None:
        if isinstance(target, ast.Name):
            scope.vars[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            if not isinstance(value, (list, tuple)) or len(value) != len(target.elts):
                raise self.src.error(target, f"cannot unpack {value!r} into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.bind(t, v, scope)
        else:
            raise self.cannot(target, "only names and tuples of names can be assigned")

    def module_name(self, name: str, node: ast.AST):
        """A module-level name's value, evaluated once, lazily (a cycle is an error)."""
        kind, payload = self.module.bindings.get(name, (None, None))
        if kind == "def":
            return _Function(payload)
        if kind != "assign":
            if kind is None and not hasattr(builtins, name):
                raise self.src.error(node, f"name `{name}` is not defined before the kernel in {self.src.file}")
            raise self.cannot(node)
        if name in self.globals:
            return self.globals[name]
        if name in self.active:
            chain = " -> ".join(self.active[self.active.index(name):] + [name])
            raise self.src.error(node, f"`{name}` is defined in terms of itself ({chain})")
        self.active.append(name)
        try:
            value = self.globals[name] = self.eval(payload, None)
        finally:
            self.active.pop()
        return value

    def is_module_import(self, name: str | None, scope: _Scope | None) -> bool:
        head = name.split(".")[0] if name else None
        return (head is not None and not (scope is not None and scope.find(head)[0])
                and self.module.bindings.get(head, ("",))[0] == "import")

    # ------------------------------------------------------------- expressions

    def _Constant(self, node, scope):
        if not isinstance(node.value, (int, float, bool, str, type(None))):
            raise self.cannot(node)
        return node.value

    def _Name(self, node, scope):
        found, value = scope.find(node.id) if scope is not None else (False, None)
        if value is _UNBOUND:
            raise self.src.error(node, f"local name `{node.id}` is read before it is assigned")
        return value if found else self.module_name(node.id, node)

    def _Attribute(self, node, scope):
        if self.is_module_import(dotted_name(node), scope):
            raise self.cannot(node)
        value = self.eval(node.value, scope)
        if isinstance(value, _Target) and node.attr == "backend":
            return "cuda"
        if isinstance(value, _Target) and node.attr == "arch":
            raise self.cannot(node, "the target's arch depends on the GPU the file runs on; only "
                                    "`.backend` is known, 'cuda'")
        if isinstance(value, Config) and node.attr in _CONFIG_FIELDS:  # a filter over configs reads them
            field_value = getattr(value, node.attr, None)  # pre_hook / ir_override: None, others refused
            return dict(field_value) if node.attr == "kwargs" else field_value
        raise self.cannot(node)

    def _BinOp(self, node, scope):
        left, right = self.eval(node.left, scope), self.eval(node.right, scope)
        op = type(node.op)
        numbers = _number(left) and _number(right)
        if op not in _BINOPS or not (numbers or (op is ast.Add and type(left) is type(right)
                                                 and isinstance(left, (list, tuple, str)))):
            symbol = _SYMBOLS.get(op, type(node.op).__name__)
            raise self.cannot(node, f"`{symbol}` of {type(left).__name__} and {type(right).__name__} is not "
                                    "evaluated: + - * // % ** on numbers, + on lists")
        if (op is ast.Pow and isinstance(left, int) and isinstance(right, int)
                and abs(left) > 1 and right * left.bit_length() > _MAX_INT_BITS):
            raise self.src.error(node, f"`{_short(node)}` is larger than {_MAX_INT_BITS} bits")
        try:
            value = _BINOPS[op](left, right)
        except (ArithmeticError, TypeError, ValueError) as e:
            raise self.src.error(node, f"`{_short(node)}` fails: {e}") from None
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise self.src.error(node, f"`{_short(node)}` is larger than {_MAX_INT_BITS} bits")
        if not numbers:
            self.tick(node, len(value))  # `l = l + l` in a loop doubles memory per step
        return value

    def _UnaryOp(self, node, scope):
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not value
        if not _number(value) or isinstance(node.op, ast.Invert):
            raise self.cannot(node)
        return -value if isinstance(node.op, ast.USub) else +value

    def _BoolOp(self, node, scope):
        value = None
        for part in node.values:  # short-circuit, as Python: the other branch may not evaluate
            value = self.eval(part, scope)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _Compare(self, node, scope):
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, scope)
            try:
                ok = _CMPOPS[type(op)](left, right)
            except TypeError as e:
                raise self.src.error(node, f"`{_short(node)}` fails: {e}") from None
            if not ok:
                return False
            left = right
        return True

    def _Lambda(self, node, scope):
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise self.cannot(node, "a lambda may take plain positional parameters only")
        return _Closure(node, scope)

    def _IfExp(self, node, scope):
        return self.eval(node.body if self.eval(node.test, scope) else node.orelse, scope)

    def _elements(self, elts, scope) -> list:
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.iterate(e.value, scope))
            else:
                out.append(self.eval(e, scope))
        return out

    def _List(self, node, scope):
        return self._elements(node.elts, scope)

    def _Tuple(self, node, scope):
        return tuple(self._elements(node.elts, scope))

    def _Set(self, node, scope):
        try:
            return set(self._elements(node.elts, scope))
        except TypeError as e:
            raise self.src.error(node, f"`{_short(node)}` fails: {e}") from None

    def _Dict(self, node, scope):
        out = {}
        for k, v in zip(node.keys, node.values):
            value = self.eval(v, scope)
            if k is None:  # {**base, ...}
                if not isinstance(value, dict):
                    raise self.src.error(v, f"`**{_short(v)}` is not a dict")
                out.update(value)
                continue
            key = self.eval(k, scope)
            try:
                out[key] = value
            except TypeError as e:
                raise self.src.error(k, f"`{_short(k)}` cannot be a dict key: {e}") from None
        return out

    def _Subscript(self, node, scope):
        value = self.eval(node.value, scope)
        s = node.slice
        if isinstance(s, ast.Slice):
            index = slice(*(self.eval(p, scope) if p is not None else None for p in (s.lower, s.upper, s.step)))
        else:
            index = self.eval(s, scope)
        if not isinstance(value, (list, tuple, dict, str, range)):
            raise self.cannot(node)
        try:
            return value[index]
        except (LookupError, TypeError, ValueError) as e:
            raise self.src.error(node, f"`{_short(node)}` fails: {type(e).__name__}: {e}") from None

    def _ListComp(self, node, scope):
        out: list = []
        self.loops.append(node)
        try:
            self._generate(node.generators, 0, node.elt, _Scope(scope), out)
        finally:
            self.loops.pop()
        return out

    def _generate(self, gens, i, elt, scope, out):
        if i == len(gens):
            out.append(self.eval(elt, scope))
            return
        gen = gens[i]
        if gen.is_async:
            raise self.cannot(gen.iter)
        for item in self.iterate(gen.iter, scope):
            self.bind(gen.target, item, scope)
            if all(self.eval(cond, scope) for cond in gen.ifs):
                self._generate(gens, i + 1, elt, scope, out)

    def _Call(self, node, scope):
        func, full = node.func, None
        if self.is_module_import(dotted_name(func), scope):
            full = resolve_name(dotted_name(func), self.module.imports)
            if full in _CONFIG:
                return self.config(node, scope)
            if full in _TARGET and not node.args and not node.keywords:
                return _Target()
            raise self.cannot(node)
        if isinstance(func, ast.Name):
            found, value = scope.find(func.id) if scope is not None else (False, None)
            if not found and func.id not in self.module.bindings:
                if func.id in _BUILTINS:
                    return self.builtin(node, scope)
                if hasattr(builtins, func.id):  # zip(), sorted(), print()...: not part of the subset
                    raise self.cannot(node)
            value = self.eval(func, scope)
            if isinstance(value, _Function):
                return self.call(value.fn, node, scope)
            if isinstance(value, _Closure):
                if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                    raise self.cannot(node, "a lambda is called with positional arguments only")
                return self.apply(value, [self.eval(a, scope) for a in node.args], node)
        raise self.cannot(node)

    # ------------------------------------------------------------- calls

    def builtin(self, node: ast.Call, scope):
        name = node.func.id
        if node.keywords:
            raise self.cannot(node, f"{name}() without keyword arguments")
        args = self._elements(node.args, scope)
        try:
            if name == "range":
                if not all(isinstance(a, int) for a in args):
                    raise TypeError("range() takes ints")
                return range(*args)
            if name == "len":
                (arg,) = args
                return len(arg)
            if name in ("list", "tuple"):
                if len(args) > 1:
                    raise TypeError(f"{name} expected at most 1 argument, got {len(args)}")
                items = list(self.iterate_value(args[0], node)) if args else []
                return items if name == "list" else tuple(items)
            if name == "filter":  # eager: a list, which list()/for/len read alike
                if len(args) != 2:
                    raise TypeError(f"filter expected 2 arguments, got {len(args)}")
                test, items = args
                return [item for item in self.iterate_value(items, node)
                        if (item if test is None else self.apply(test, [item], node))]
            if name == "map":
                if len(args) < 2:
                    raise TypeError("map() must have at least two arguments.")
                columns = [list(self.iterate_value(a, node)) for a in args[1:]]
                return [self.apply(args[0], list(row), node) for row in zip(*columns)]
            if len(args) == 1:  # min(iterable) scans it: count the scan
                if not isinstance(args[0], (list, tuple, range, set, dict, str)):
                    raise TypeError(f"{type(args[0]).__name__} is not iterable")
                self.tick(node, len(args[0]))
            return min(*args) if name == "min" else max(*args)
        except (TypeError, ValueError, OverflowError) as e:
            raise self.src.error(node, f"`{_short(node)}` fails: {e}") from None

    def bind_arguments(self, call: ast.Call, names: tuple[str, ...], what: str) -> dict[str, ast.expr]:
        """Map the call's argument nodes to parameter names, as Python would (positional, then keywords)."""
        bound: dict[str, ast.expr] = {}
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                raise self.cannot(a, "*arguments are not unpacked")
            if i >= len(names):
                raise self.src.error(a, f"{what} takes at most {len(names)} positional arguments")
            bound[names[i]] = a
        for kw in call.keywords:
            if kw.arg is None:
                raise self.cannot(kw.value, "**arguments are not unpacked")
            if kw.arg not in names:
                raise self.src.error(kw, f"{what} has no parameter `{kw.arg}` (parameters: {', '.join(names)})")
            if kw.arg in bound:
                raise self.src.error(kw, f"{what} got `{kw.arg}` twice")
            bound[kw.arg] = kw.value
        return bound

    def config(self, node: ast.Call, scope) -> Config:
        """`triton.Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None,
        ir_override=None)` (python/triton/runtime/autotuner.py)."""
        args = self.bind_arguments(node, _CONFIG_PARAMS, "triton.Config")
        for hook in ("pre_hook", "ir_override"):  # `pre_hook=pre_hook` of a helper whose default is None: fine
            if hook in args and not self.is_none(args[hook], scope):
                why = ("cannot run a pre_hook" if hook == "pre_hook"
                       else "cannot replace a stage with an ir_override file")
                raise self.src.error(args[hook], f"triton.Config({hook}=...): ttbuild builds configs ahead of "
                                                 f"time and {why}")
        if "kwargs" not in args:
            raise self.src.error(node, "triton.Config needs its kwargs dict (the first argument)")
        kwargs = self.eval(args["kwargs"], scope)
        if not isinstance(kwargs, dict):
            raise self.src.error(args["kwargs"], f"triton.Config's kwargs must be a dict, not {kwargs!r}")
        for name, value in kwargs.items():
            where = _dict_key(args["kwargs"], name) or args["kwargs"]
            if not isinstance(name, str):
                raise self.src.error(where, f"triton.Config kwargs names must be strings, not {name!r}")
            if name not in self.constexprs:
                raise self.src.error(where, f"triton.Config sets `{name}`, which is not a tl.constexpr parameter of "
                                            f"the kernel (constexpr parameters: {', '.join(self.constexprs) or 'none'})")
            if not isinstance(value, (int, float, bool, str)):
                raise self.src.error(where, f"triton.Config sets `{name}` to {value!r}: a constexpr value must be an "
                                            "int, float, bool or str")
        values = {}
        for name, default in (("num_warps", 4), ("num_stages", 3), ("num_ctas", 1), ("maxnreg", None)):
            value = self.eval(args[name], scope) if name in args else default
            least = 0 if name == "num_stages" else 1
            if not (value is None and name == "maxnreg") and (
                    not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise self.src.error(args[name], f"triton.Config({name}={value!r}): must be an int >= {least}")
            if name == "num_warps" and value & (value - 1):  # the CUDA backend's options assert it
                raise self.src.error(args[name], f"triton.Config(num_warps={value}): must be a power of 2")
            values[name] = value
        return Config(dict(kwargs), loc=self.src.loc(node), **values)

    def call(self, fn: ast.FunctionDef, node: ast.Call, scope):
        """Run a module-level function with a body of assignments, if/for, `.append` and return."""
        a = fn.args
        if a.vararg or a.kwarg:
            raise self.cannot(node, f"`{fn.name}` takes *args or **kwargs")
        params = a.posonlyargs + a.args
        names = tuple(p.arg for p in params + a.kwonlyargs)
        bound = self.bind_arguments(node, names, f"{fn.name}()")
        defaults = dict(zip((p.arg for p in params[len(params) - len(a.defaults):]), a.defaults))
        defaults.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
        if self.depth >= _MAX_CALL_DEPTH:
            raise self.src.error(node, f"calls nested deeper than {_MAX_CALL_DEPTH} (a recursion?)")
        frame = _Scope(None, _assigned(fn))
        for name in names:
            if name in bound:
                frame.vars[name] = self.eval(bound[name], scope)
            elif name in defaults:
                frame.vars[name] = self.eval(defaults[name], None)
            else:
                raise self.src.error(node, f"{fn.name}() is missing the argument `{name}`")
        return self.enter(fn.body, frame)

    def enter(self, body: list[ast.stmt] | ast.expr, frame: _Scope):
        """A function's body (or a lambda's expression) in its frame, one call deeper."""
        self.depth += 1
        try:
            if isinstance(body, ast.expr):
                return self.eval(body, frame)
            returned, value = self.run(body, frame)
        finally:
            self.depth -= 1
        return value if returned else None

    def apply(self, callee, values: list, node: ast.AST):
        """Call a function value (a function of the file or a lambda) with positional values, as
        filter() and map() do; `node` is the call to blame."""
        if self.depth >= _MAX_CALL_DEPTH:
            raise self.src.error(node, f"calls nested deeper than {_MAX_CALL_DEPTH} (a recursion?)")
        if isinstance(callee, _Closure):
            params = [p.arg for p in callee.node.args.posonlyargs + callee.node.args.args]
            if len(values) != len(params):
                raise self.src.error(node, f"`{_short(callee.node)}` takes {len(params)} arguments, "
                                           f"not {len(values)}")
            frame = _Scope(callee.scope)
            frame.vars.update(zip(params, values))
            return self.enter(callee.node.body, frame)
        if not isinstance(callee, _Function):
            raise self.cannot(node, f"only a function of the file or a lambda is called, not {callee!r}")
        fn, a = callee.fn, callee.fn.args
        if a.vararg or a.kwarg:
            raise self.cannot(node, f"`{fn.name}` takes *args or **kwargs")
        params = a.posonlyargs + a.args
        if len(values) > len(params):
            raise self.src.error(node, f"{fn.name}() takes at most {len(params)} positional arguments")
        defaults = dict(zip((p.arg for p in params[len(params) - len(a.defaults):]), a.defaults))
        defaults.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
        frame = _Scope(None, _assigned(fn))
        frame.vars.update(zip((p.arg for p in params), values))
        for p in params[len(values):] + a.kwonlyargs:
            if p.arg not in defaults:
                raise self.src.error(node, f"{fn.name}() is missing the argument `{p.arg}`")
            frame.vars[p.arg] = self.eval(defaults[p.arg], None)
        return self.enter(fn.body, frame)

    def run(self, body: list[ast.stmt], frame: _Scope) -> tuple[bool, object]:
        for stmt in body:
            self.tick(stmt)
            if isinstance(stmt, ast.Return):
                return True, self.eval(stmt.value, frame) if stmt.value is not None else None
            if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                                              and isinstance(stmt.value.value, str)):
                continue  # docstring
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self.bind(stmt.targets[0], self.eval(stmt.value, frame), frame)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
                self.bind(stmt.target, self.eval(stmt.value, frame), frame)
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                read = ast.copy_location(ast.Name(stmt.target.id, ast.Load()), stmt.target)
                self.bind(stmt.target, self.eval(ast.copy_location(ast.BinOp(read, stmt.op, stmt.value), stmt),
                                                 frame), frame)
            elif isinstance(stmt, ast.Expr) and _is_append(stmt.value):
                target = self._Name(stmt.value.func.value, frame)
                if not isinstance(target, list):
                    raise self.cannot(stmt.value, f"`.append` only on a list, not a {type(target).__name__}")
                target.append(self.eval(stmt.value.args[0], frame))
            elif isinstance(stmt, ast.If):
                returned, value = self.run(stmt.body if self.eval(stmt.test, frame) else stmt.orelse, frame)
                if returned:
                    return True, value
            elif isinstance(stmt, ast.For):
                self.loops.append(stmt)
                try:
                    for item in self.iterate(stmt.iter, frame):
                        self.bind(stmt.target, item, frame)
                        returned, value = self.run(stmt.body, frame)
                        if returned:
                            return True, value
                finally:
                    self.loops.pop()
                returned, value = self.run(stmt.orelse, frame)  # no `break` exists: else always runs
                if returned:
                    return True, value
            else:
                raise self.cannot(stmt, "a function body may hold a docstring, assignments to local names, if/else, "
                                        "for loops, `<list>.append(x)` and return")
        return False, None


def _assigned(fn: ast.FunctionDef) -> frozenset:
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


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_append(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords
            and not isinstance(node.args[0], ast.Starred))


def _dict_key(node: ast.AST, name: str) -> ast.AST | None:
    """The key node spelling `name` in a dict literal, to put a caret under it."""
    if isinstance(node, ast.Dict):
        for k in node.keys:
            if isinstance(k, ast.Constant) and k.value == name:
                return k
    return None


def _element(node: ast.AST, i: int) -> ast.AST:
    """Element i of a list/tuple literal, else the node itself (an error's position)."""
    if isinstance(node, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        return node.elts[i] if i < len(node.elts) else node
    return node


class _Normalizer(ast.NodeTransformer):
    """A heuristic's body over `args`: the parameter renamed, triton.cdiv / next_power_of_2 made bare.
    New nodes keep the source positions, so check_node's errors point into the file."""

    def __init__(self, param: str, module: _Module, src: _Source):
        self.param, self.module, self.src = param, module, src

    def _helper(self, node: ast.AST) -> ast.AST | None:
        name = dotted_name(node)
        if name is None or name.split(".")[0] == self.param:
            return None
        if name.split(".")[0] not in self.module.imports:
            return None
        helper = _HELPER_ALIASES.get(resolve_name(name, self.module.imports))
        return ast.copy_location(ast.Name(helper, ast.Load()), node) if helper else None

    def visit_Attribute(self, node):
        return self._helper(node) or self.generic_visit(node)

    def visit_Name(self, node):
        if node.id == self.param:
            return ast.copy_location(ast.Name("args", ast.Load()), node)
        helper = self._helper(node)
        if helper is not None:
            return helper
        if node.id in self.module.bindings:  # check_node would take `min`, `cdiv`... for the helpers
            raise self.src.error(node, f"a heuristic may not read `{node.id}`, a name of the file: it is "
                                       "evaluated at launch over `args` alone (ttbuild.runtime.heuristics)")
        if node.id in ("args", "cdiv", "next_power_of_2"):
            raise self.src.error(node, f"`{node.id}` is not defined here (the function's parameter is "
                                       f"`{self.param}`; use triton.cdiv / triton.next_power_of_2)")
        return node


class _Reader:
    def __init__(self, src: _Source, module: _Module, fn: ast.FunctionDef):
        a = fn.args
        params = a.posonlyargs + a.args + a.kwonlyargs
        self.src, self.module, self.fn = src, module, fn
        self.params = tuple(p.arg for p in params)
        self.constexprs = tuple(p.arg for p in params
                                if resolve_name(dotted_name(p.annotation), module.imports) in _CONSTEXPR)
        self.ev = _Evaluator(src, module, self.constexprs)

    def names(self, node: ast.AST, what: str) -> tuple[str, ...]:
        """A list/tuple of strings naming kernel parameters (`key`, `reset_to_zero`, `restore_value`).
        A `key` name that is no parameter is dropped with a warning: Triton's Autotuner.run builds
        the key from `self.keys` that are among the arguments and skips the others. A reset/restore
        name that is no parameter stays an error (Triton's pre_hook would fail on `kwargs[name]`)."""
        value = self.ev.eval(node, None)
        if not isinstance(value, (list, tuple)):
            raise self.src.error(node, f"autotune {what} must be a list of argument names, not {value!r}")
        kept = []
        for i, name in enumerate(value):
            if name in self.params:
                kept.append(name)
                continue
            message = (f"autotune {what} names {name!r}, which is not a parameter of {self.fn.name} "
                       f"(parameters: {', '.join(self.params)})")
            if what != "key" or not isinstance(name, str):
                raise self.src.error(_element(node, i), message)
            warnings.warn(CompilerWarning(f"{message}: ignored, as Triton's autotuner ignores it too",
                                          loc=self.src.loc(_element(node, i))), stacklevel=5)
        return tuple(kept)

    def autotune(self, dec: ast.Call) -> Autotune:
        """`triton.autotune(configs, key, ...)` (python/triton/runtime/autotuner.py)."""
        args = self.ev.bind_arguments(dec, _AUTOTUNE_PARAMS, "triton.autotune")
        for name in ("configs", "key"):
            if name not in args:
                raise self.src.error(dec, f"triton.autotune needs `{name}`")
        for name, why in (("pre_hook", "cannot run a pre_hook"), ("post_hook", "cannot run a post_hook"),
                          ("do_bench", "times configs with `ttbuild tune`, not a do_bench function")):
            if name in args and not self.ev.is_none(args[name], None):
                raise self.src.error(args[name], f"triton.autotune({name}=...): ttbuild builds configs ahead of "
                                                 f"time and {why}")
        if "prune_configs_by" in args and not self.ev.is_none(args["prune_configs_by"], None):
            warnings.warn(CompilerWarning("prune_configs_by is not evaluated: ttbuild tunes every config",
                                          loc=self.src.loc(args["prune_configs_by"])), stacklevel=4)
        node = args["configs"]
        value = self.ev.eval(node, None)
        if not isinstance(value, (list, tuple)):
            raise self.src.error(node, f"autotune configs must be a list of triton.Config, not {type(value).__name__}")
        for i, cfg in enumerate(value):
            if not isinstance(cfg, Config):
                raise self.src.error(_element(node, i), f"autotune configs[{i}] is {cfg!r}, not a triton.Config")
        # Triton's Autotuner: no configs means one default Config({}, num_warps=4, num_stages=3, num_ctas=1).
        configs = tuple(value) or (Config({}, loc=self.src.loc(node)),)
        reset, restore = (self.names(args[n], n) if n in args and not _is_none(args[n]) else ()
                          for n in ("reset_to_zero", "restore_value"))
        return Autotune(configs, self.names(args["key"], "key"), reset, restore, loc=self.src.loc(dec))

    def entries(self, dec: ast.Call) -> list[tuple[ast.Constant, ast.AST]]:
        """The (name node, function node) pairs of `triton.heuristics(values)`."""
        args = self.ev.bind_arguments(dec, ("values",), "triton.heuristics")
        values = args.get("values")
        if not isinstance(values, ast.Dict):
            raise self.src.error(values or dec, "triton.heuristics takes a dict literal {'NAME': lambda args: ...}")
        out = []
        for k, v in zip(values.keys, values.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                raise self.src.error(k or v, "a triton.heuristics key must be a string naming a constexpr parameter")
            if k.value not in self.constexprs:
                raise self.src.error(k, f"triton.heuristics sets `{k.value}`, which is not a tl.constexpr parameter "
                                        f"of {self.fn.name} (constexpr parameters: "
                                        f"{', '.join(self.constexprs) or 'none'})")
            out.append((k, v))
        return out

    def heuristic(self, key: ast.Constant, node: ast.AST) -> tuple[Heuristic, ast.expr]:
        """One heuristic, normalized and checked; also its normalized tree (source positions kept)."""
        name = key.value
        fn = node
        if isinstance(node, ast.Name) and self.module.bindings.get(node.id, ("",))[0] == "def":
            fn = self.module.bindings[node.id][1]
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
                raise self.src.error(fn, f"heuristic `{name}`: {fn.name} must be a single `return <expression>`")
            expr = body[0].value
        elif isinstance(node, ast.Lambda):
            expr = node.body
        else:
            raise self.src.error(node, f"heuristic `{name}` must be a lambda or the name of a function of the file "
                                       "defined before the kernel")
        a = fn.args
        if len(a.posonlyargs + a.args) != 1 or a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise self.src.error(fn, f"heuristic `{name}` must take one parameter, the dict of arguments")
        tree = _Normalizer((a.posonlyargs + a.args)[0].arg, self.module, self.src).visit(copy.deepcopy(expr))
        try:
            check_node(tree)
        except HeuristicError as e:
            raise self.src.error(e.node if e.node is not None else expr, f"heuristic `{name}`: {e.message}") from None
        text = ast.unparse(tree)
        return Heuristic(name, text, check_expression(text), is_boolean(text), self.src.loc(node)), tree

    def read(self) -> Decorators:
        tune, tune_index, found = None, None, []  # found: (decorator index, name node, function node)
        for i, dec in enumerate(self.fn.decorator_list):
            full = resolve_name(dotted_name(dec.func if isinstance(dec, ast.Call) else dec), self.module.imports)
            if full not in _AUTOTUNE | _HEURISTICS:
                continue
            if not isinstance(dec, ast.Call):
                raise self.src.error(dec, f"@{dotted_name(dec)} must be called with its arguments")
            if full in _HEURISTICS:
                found.extend((i, k, v) for k, v in self.entries(dec))
            elif tune is not None:
                raise self.src.error(dec, "a kernel may carry one @triton.autotune")
            else:
                tune, tune_index = self.autotune(dec), i
        tuned = {k for c in tune.configs for k in c.kwargs} if tune else set()
        # The outermost wrapper's run() goes first (Heuristics.run, Autotuner.run), so the decorators'
        # order from the top is the launch order; a later heuristic sees the earlier ones' values.
        order = [k.value for _, k, _ in found]
        heuristics = []
        for n, (i, key, node) in enumerate(found):
            if key.value in order[:n]:
                raise self.src.error(key, f"`{key.value}` is computed by two heuristics")
            if key.value in tuned:
                raise self.src.error(key, f"`{key.value}` is set both by @triton.heuristics and by the autotune "
                                          "configs (Triton: 'Conflicting meta-parameters')")
            h, tree = self.heuristic(key, node)
            for p in h.params:
                if p not in self.params:
                    why = f"which is not a parameter of {self.fn.name} (parameters: {', '.join(self.params)})"
                elif p in tuned and tune_index is not None and i < tune_index:
                    why = "which the autotune config below sets only after this heuristic runs"
                elif p in order[n + 1:]:
                    why = "which a later heuristic computes"
                else:
                    continue
                raise self.src.error(_reading(tree, p) or node, f"heuristic `{h.name}` reads args[{p!r}], {why}")
            heuristics.append(h)
        return Decorators(tune, tuple(heuristics))


def _reading(tree: ast.AST, name: str) -> ast.AST | None:
    """The first args['name'] in a normalized heuristic tree (which keeps the source positions)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == name:
            return node
    return None


def read_decorators(source: str | bytes, kernel: str, file: str) -> Decorators:
    """The `@triton.autotune` and `@triton.heuristics` of the function `kernel` in `source` (read as
    `file`), evaluated from the ast without importing or running anything; Decorators(None, ()) when
    it has neither.

    Rules from python/triton/runtime/autotuner.py: `key`, `reset_to_zero`, `restore_value` name
    kernel parameters; configs and heuristics set tl.constexpr parameters; an empty config list is
    Triton's default config. Raises CompilationError at the offending node for a syntax error, a
    missing kernel, anything that cannot be evaluated statically (torch, os, other modules' calls,
    the target's arch, a pre_hook/post_hook/do_bench that is not None, more than MAX_STEPS steps, a
    name defined in terms of itself) and a heuristic outside the ttbuild.runtime.heuristics grammar.
    Warns (CompilerWarning) that prune_configs_by is not evaluated, and of a `key` name that is not
    a parameter, which is left out of the key as Triton's Autotuner leaves it out.
    """
    text = source.decode("utf-8") if isinstance(source, bytes) else source
    src = _Source(file, text)
    try:
        tree = ast.parse(text, filename=file)
    except SyntaxError as e:
        line = e.lineno or 1
        raise CompilationError(f"invalid syntax: {e.msg}", Loc(file, line, max((e.offset or 1) - 1, 0),
                                                               (e.text or "").rstrip("\n"))) from None
    except RecursionError:
        raise CompilationError("expression nested too deeply for Python's parser", Loc(file, 1, 0)) from None
    # The last `def kernel` wins, as when the module runs; decorators see what is bound before it.
    index = max((i for i, s in enumerate(tree.body) if isinstance(s, ast.FunctionDef) and s.name == kernel),
                default=None)
    if index is None:
        defs = sorted(s.name for s in tree.body if isinstance(s, ast.FunctionDef))
        raise CompilationError(f"kernel {kernel!r} is not a function of {file} (functions there: "
                               f"{', '.join(defs) or 'none'})")
    try:
        return _Reader(src, _Module(tree.body[:index]), tree.body[index]).read()
    except RecursionError:
        fn = tree.body[index]
        raise src.error(fn.decorator_list[0] if fn.decorator_list else fn,
                        "decorator arguments nested too deeply to evaluate") from None
