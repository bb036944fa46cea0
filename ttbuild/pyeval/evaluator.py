"""The bounded evaluator of ttbuild's static Python reader: a small pure subset of Python over an ast, every operation's cost counted (ttbuild.pyeval.bounds); standard library only."""

from __future__ import annotations

import ast
import builtins
import time

from ttbuild.errors import CompilationError

from . import bounds, strings
from .objects import NeedsValue
from .values import (
    BINOPS,
    BUILTINS,
    CMPOPS,
    INT_ONLY,
    SYMBOLS,
    UNBOUND,
    Closure,
    Function,
    PythonError,
    Scope,
    Source,
    Target,
    UnknownValue,
    assigned,
    defaults_of,
    dotted_name,
    is_append,
    is_none,
    number,
    resolve_name,
    short,
)


class _StrMethod:
    """`text.name`, a string method not yet called."""

    def __init__(self, text: str, name: str):
        self.text, self.name = text, name


_CONVERSIONS = {"int": int, "float": float, "str": str, "bool": bool, "abs": abs}


class Evaluator:
    """Evaluates expressions and simple function bodies of one file: a small pure subset of Python,
    bounded by ttbuild.pyeval.bounds (steps, time, integer sizes, sequence lengths, call depth).

    `module.bindings` maps a module-level name to (kind, payload): "assign" (an expression node,
    evaluated lazily, once), "def" (a FunctionDef), "import" (a dotted module path), "value" (an
    already known value) or "other" (bound by a statement the evaluator cannot read);
    `module.imports` maps import aliases to dotted paths. Subclasses give meaning to imported
    names through `call_import` / `attribute`. `what` names the evaluation in messages.
    """

    why = ("literals, comprehensions, lambdas, range/len/min/max/list/tuple/filter/map, "
           "names and simple functions of the file")
    what = "reads module-level Python statically"

    def __init__(self, src: Source, module, constexprs: tuple[str, ...] = ()):
        self.src, self.module, self.constexprs = src, module, constexprs
        self.steps, self.depth = 0, 0
        self.deadline = time.monotonic() + bounds.MAX_SECONDS
        self.globals: dict[str, object] = {}
        self.active: list[str] = []  # module names being evaluated, for cycles
        self.loops: list[ast.AST] = []  # loops being run, to blame the outermost for a runaway

    # ------------------------------------------------------------- plumbing

    def tick(self, node: ast.AST, n: int = 1) -> None:
        """Count `n` evaluation steps; raises a located error at the outermost running loop (or `node`) past
        bounds.MAX_STEPS steps or bounds.MAX_SECONDS seconds."""
        self.steps += n
        if self.steps > bounds.MAX_STEPS or (not self.steps & 1023 and time.monotonic() > self.deadline):
            where = self.loops[0] if self.loops else node
            limit = (f"{bounds.MAX_STEPS} steps" if self.steps > bounds.MAX_STEPS
                     else f"{bounds.MAX_SECONDS:g} seconds")
            raise self.src.error(where, f"gave up evaluating after {limit} (a runaway loop?): ttbuild "
                                        f"{self.what} and keeps that bounded")

    def cannot(self, node: ast.AST, why: str | None = None) -> CompilationError:
        """The located CompilationError for a construct this evaluator does not run (`why`, else the class's reason)."""
        return self.src.error(node, f"cannot evaluate `{short(node)}` without running the file: ttbuild "
                                    f"{self.what} ({why or self.why})")

    def call_import(self, full: str, node: ast.Call, scope: Scope | None):
        """A call of an imported name `full` (dotted path): none is known here."""
        raise self.cannot(node)

    def attribute(self, value, node: ast.Attribute):
        """`value.attr` for a value the base evaluator does not know; a string's pure methods."""
        if isinstance(value, str) and node.attr in strings.METHODS:
            return _StrMethod(value, node.attr)
        raise self.cannot(node)

    def eval(self, node: ast.AST, scope: Scope | None):
        """The value of expression `node` in `scope` (None at module level), by the `_<NodeType>` method; raises
        `cannot` for a node type without one."""
        self.tick(node)
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise self.cannot(node)
        return method(node, scope)

    def iterate(self, node: ast.AST, scope: Scope | None):
        """The items of the iterable `node` evaluates to (iterate_value)."""
        yield from self.iterate_value(self.eval(node, scope), node)

    def iterate_value(self, value, node: ast.AST):
        """The items of a list, tuple, range, dict, set or str, one step each. Raises a located error for any other
        value (its iteration could run arbitrary code)."""
        if not isinstance(value, (list, tuple, range, dict, set, str)):
            raise self.src.error(node, f"cannot iterate over `{short(node)}`, a {type(value).__name__}")
        for item in value:
            self.tick(node)
            yield item

    def is_none(self, node: ast.AST, scope: Scope | None) -> bool:
        """Whether a hook argument (pre_hook=, post_hook=...) is None: a literal `None`, or an
        expression that evaluates to None, as a helper's `pre_hook=None` parameter passed on. One that
        evaluates to anything else, or cannot be evaluated (a lambda with defaults, an imported
        function), is a hook."""
        if is_none(node):
            return True
        try:
            return self.eval(node, scope) is None
        except CompilationError:
            return False

    def bind(self, target: ast.AST, value, scope: Scope) -> None:
        """Bind assignment `target` (a name, or a tuple / list of names, unpacked) to `value` in `scope`. Raises a
        located error on a count mismatch or another target form."""
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
            return Function(payload)
        if kind == "value":
            return payload
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

    def is_module_import(self, name: str | None, scope: Scope | None) -> bool:
        """Whether dotted `name` starts with a module-level `import` binding not shadowed in `scope`."""
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
        if value is UNBOUND:
            raise self.src.error(node, f"local name `{node.id}` is read before it is assigned")
        return value if found else self.module_name(node.id, node)

    def _Attribute(self, node, scope):
        if self.is_module_import(dotted_name(node), scope):
            raise self.cannot(node)
        value = self.eval(node.value, scope)
        if isinstance(value, Target) and node.attr == "backend":
            return "cuda"
        if isinstance(value, Target) and node.attr == "arch":
            raise self.cannot(node, "the target's arch depends on the GPU the file runs on; only "
                                    "`.backend` is known, 'cuda'")
        return self.attribute(value, node)

    def _BinOp(self, node, scope):
        left, right = self.eval(node.left, scope), self.eval(node.right, scope)
        op = type(node.op)
        numbers = number(left) and number(right)
        seqs = (list, tuple, str)
        ok = (numbers and (op not in INT_ONLY or (isinstance(left, int) and isinstance(right, int)))
              or (op is ast.Add and type(left) is type(right) and isinstance(left, seqs))
              or (op is ast.Mult and (isinstance(left, seqs) and type(right) is int
                                      or type(left) is int and isinstance(right, seqs))))
        if op not in BINOPS or not ok:
            symbol = SYMBOLS.get(op, type(node.op).__name__)
            raise self.cannot(node, f"`{symbol}` of {type(left).__name__} and {type(right).__name__} is not "
                                    "evaluated: arithmetic on numbers, bit operators on ints, + and * on sequences")
        try:
            value = bounds.binop(SYMBOLS[op], left, right)
        except bounds.BoundError as e:
            raise self.src.error(node, f"`{short(node)}` is not evaluated: {e}") from None
        except (ArithmeticError, TypeError, ValueError) as e:
            raise self.src.error(node, f"`{short(node)}` fails: {e}") from None
        if not numbers:
            self.tick(node, len(value))  # `l = l + l` in a loop doubles memory per step
        return value

    def _UnaryOp(self, node, scope):
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not value
        if not number(value) or isinstance(node.op, ast.Invert):
            raise self.cannot(node)
        return -value if isinstance(node.op, ast.USub) else +value

    def _BoolOp(self, node, scope):
        is_or = isinstance(node.op, ast.Or)
        value, unknown = None, None
        for part in node.values:  # short-circuit, as Python: the other branch may not evaluate
            try:
                value = self.eval(part, scope)
            except UnknownValue as e:
                # A comparison is a bool whose value only the running program knows (`"H" in
                # torch.cuda.get_device_name()`): `unknown or True` is True, `unknown and False` False.
                if not (isinstance(part, ast.Compare) or isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not)):
                    raise
                unknown = unknown or e
                continue
            if bool(value) == is_or:
                if unknown is None or type(value) is bool:
                    return value
                raise unknown
        if unknown is not None:
            raise unknown
        return value

    def _Compare(self, node, scope):
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, scope)
            try:
                if isinstance(op, (ast.In, ast.NotIn)):
                    ok = bounds.contains(left, right) != isinstance(op, ast.NotIn)
                else:
                    ok = CMPOPS[type(op)](left, right)
            except bounds.BoundError as e:
                raise self.src.error(node, f"`{short(node)}` is not evaluated: {e}") from None
            except TypeError as e:
                raise self.src.error(node, f"`{short(node)}` fails: {e}") from None
            if not ok:
                return False
            left = right
        return True

    def _Lambda(self, node, scope):
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise self.cannot(node, "a lambda may take plain positional parameters only")
        return Closure(node, scope)

    def _IfExp(self, node, scope):
        return self.eval(node.body if self.decide(node.test, scope) else node.orelse, scope)

    def decide(self, test: ast.AST, scope) -> bool:
        """bool() of a branch's test; a value only the running program knows is refused at the test, not the caller."""
        try:
            return bool(self.eval(test, scope))
        except NeedsValue as e:
            raise UnknownValue(f"cannot decide `{short(test)}` without running the file: it needs the value of {e.what}",
                               self.src.loc(test)) from None

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
            raise self.src.error(node, f"`{short(node)}` fails: {e}") from None

    def _Dict(self, node, scope):
        out = {}
        for k, v in zip(node.keys, node.values):
            value = self.eval(v, scope)
            if k is None:  # {**base, ...}
                if not isinstance(value, dict):
                    raise self.src.error(v, f"`**{short(v)}` is not a dict")
                out.update(value)
                continue
            key = self.eval(k, scope)
            try:
                out[key] = value
            except TypeError as e:
                raise self.src.error(k, f"`{short(k)}` cannot be a dict key: {e}") from None
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
            raise PythonError(f"`{short(node)}` fails: {type(e).__name__}: {e}", self.src.loc(node),
                              type(e).__name__) from None

    def _ListComp(self, node, scope):
        out: list = []
        self.loops.append(node)
        try:
            self._generate(node.generators, 0, node.elt, Scope(scope), out)
        finally:
            self.loops.pop()
        return out

    _GeneratorExp = _ListComp  # eager: the consumers the evaluator runs (join, list, tuple, len...) read it once

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
        func = node.func
        if self.is_module_import(dotted_name(func), scope):
            return self.call_import(resolve_name(dotted_name(func), self.module.imports), node, scope)
        if isinstance(func, ast.Name):
            found, value = scope.find(func.id) if scope is not None else (False, None)
            if not found and func.id not in self.module.bindings:
                if func.id in BUILTINS:
                    return self.builtin(node, scope)
                if hasattr(builtins, func.id):  # zip(), sorted(), print()...: not part of the subset
                    raise self.cannot(node)
        value = self.eval(func, scope)
        if isinstance(value, Function):
            return self.call(value, node, scope)
        if isinstance(value, Closure):
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise self.cannot(node, "a lambda is called with positional arguments only")
            return self.apply(value, [self.eval(a, scope) for a in node.args], node)
        return self.call_value(value, node, scope)

    def call_args(self, node: ast.Call, scope: Scope | None) -> tuple[list, dict]:
        """The call's positional and keyword argument values, `*seq` and `**mapping` unpacked as Python does.
        Raises a located error for a `**` value that is not a dict of str keys, or a keyword given twice."""
        values = self._elements(node.args, scope)
        kwargs: dict = {}
        for kw in node.keywords:
            if kw.arg is None:
                more = self.eval(kw.value, scope)
                if not isinstance(more, dict) or not all(isinstance(k, str) for k in more):
                    raise self.src.error(kw.value, f"`**{short(kw.value)}` is not a dict of names")
            else:
                more = {kw.arg: self.eval(kw.value, scope)}
            for k, v in more.items():
                if k in kwargs:
                    raise self.src.error(kw, f"`{short(node.func)}()` got the keyword argument `{k}` twice")
                kwargs[k] = v
        return values, kwargs

    def call_value(self, value, node: ast.Call, scope: Scope | None):
        """A call of a value the base evaluator cannot call (a subclass may know it); a string method."""
        if isinstance(value, _StrMethod):
            args, kwargs = self.call_args(node, scope)
            try:
                return strings.call(value.text, value.name, args, kwargs)
            except strings.StringError as e:
                raise self.cannot(node, str(e)) from None
            except bounds.BoundError as e:
                raise self.src.error(node, f"`{short(node)}` is not evaluated: {e}") from None
        raise self.cannot(node)

    # ------------------------------------------------------------- calls

    def builtin(self, node: ast.Call, scope):
        """A call of a Python builtin the evaluator allows (range, len, the _CONVERSIONS such as int and float,
        list, tuple, eager filter and map, min, max) on evaluated positional arguments. Raises a located error for
        keywords or when Python's call raises."""
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
            if name in _CONVERSIONS:  # int("128") of an environment variable; bounded by Python's digit limit
                if len(args) != 1 or not isinstance(args[0], (int, float, bool, str)):
                    raise TypeError(f"{name}() of {', '.join(type(a).__name__ for a in args) or 'nothing'}")
                return _CONVERSIONS[name](args[0])
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
            raise self.src.error(node, f"`{short(node)}` fails: {e}") from None

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


    def call(self, fn: Function, node: ast.Call, scope):
        """Call a function of the source (or a closure) on the call's evaluated arguments (call_args, apply)."""
        values, kwargs = self.call_args(node, scope)
        return self.apply(fn, values, node, kwargs)

    def bind_call(self, callee: Function, values: list, kwargs: dict, node: ast.AST) -> Scope:
        """The frame of a call of `callee` with positional `values` and `kwargs`, bound as Python binds them
        (positional, *args, keywords, **kwargs, then defaults, evaluated where the function was defined). Raises a
        located error for a missing, repeated or unexpected argument."""
        fn, a = callee.fn, callee.fn.args
        params = a.posonlyargs + a.args
        frame = Scope(callee.scope, assigned(fn))
        if len(values) > len(params) and not a.vararg:
            raise self.src.error(node, f"{fn.name}() takes at most {len(params)} positional arguments")
        frame.vars.update(zip((p.arg for p in params), values))
        if a.vararg:
            frame.vars[a.vararg.arg] = tuple(values[len(params):])
        by_name = {p.arg for p in a.args + a.kwonlyargs}
        extra = {}
        for k, v in kwargs.items():
            if k in frame.vars:
                raise self.src.error(node, f"{fn.name}() got multiple values for argument `{k}`")
            if k in by_name:
                frame.vars[k] = v
            elif a.kwarg:
                extra[k] = v
            else:
                raise self.src.error(node, f"{fn.name}() got an unexpected keyword argument `{k}`")
        if a.kwarg:
            frame.vars[a.kwarg.arg] = extra
        defaults = defaults_of(a)
        for p in params + a.kwonlyargs:
            if p.arg not in frame.vars:
                if p.arg not in defaults:
                    raise self.src.error(node, f"{fn.name}() is missing the argument `{p.arg}`")
                frame.vars[p.arg] = self.eval(defaults[p.arg], callee.scope)
        return frame

    def enter(self, body: list[ast.stmt] | ast.expr, frame: Scope):
        """A function's body (or a lambda's expression) in its frame, one call deeper."""
        self.depth += 1
        try:
            if isinstance(body, ast.expr):
                return self.eval(body, frame)
            returned, value = self.run(body, frame)
        finally:
            self.depth -= 1
        return value if returned else None

    def apply(self, callee, values: list, node: ast.AST, kwargs: dict | None = None):
        """Call a function value (a function of the file, a closure or a lambda) with positional `values` and
        `kwargs`, as filter() and map() do; `node` is the call to blame."""
        if self.depth >= bounds.MAX_CALL_DEPTH:
            raise self.src.error(node, f"calls nested deeper than {bounds.MAX_CALL_DEPTH} (a recursion?)")
        if isinstance(callee, Closure):
            params = [p.arg for p in callee.node.args.posonlyargs + callee.node.args.args]
            if kwargs or len(values) != len(params):
                raise self.src.error(node, f"`{short(callee.node)}` takes {len(params)} arguments, "
                                           f"not {len(values)}{' and keywords' if kwargs else ''}")
            frame = Scope(callee.scope)
            frame.vars.update(zip(params, values))
            return self.enter(callee.node.body, frame)
        if not isinstance(callee, Function):
            raise self.cannot(node, f"only a function of the file or a lambda is called, not {callee!r}")
        return self.enter(callee.fn.body, self.bind_call(callee, values, kwargs or {}, node))

    def run(self, body: list[ast.stmt], frame: Scope) -> tuple[bool, object]:
        """Run a function body in `frame`: (True, value) at a `return`, (False, None) when it falls off the end.
        Raises a located error for statements outside the evaluator's subset."""
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
            elif isinstance(stmt, ast.Expr) and is_append(stmt.value):
                target = self._Name(stmt.value.func.value, frame)
                if not isinstance(target, list):
                    raise self.cannot(stmt.value, f"`.append` only on a list, not a {type(target).__name__}")
                target.append(self.eval(stmt.value.args[0], frame))
            elif isinstance(stmt, ast.FunctionDef) and not stmt.decorator_list:
                frame.vars[stmt.name] = self.nested_function(stmt, frame)
            elif isinstance(stmt, ast.If):
                returned, value = self.run(stmt.body if self.decide(stmt.test, frame) else stmt.orelse, frame)
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
                returned, value = self.other_statement(stmt, frame)
                if returned:
                    return True, value
        return False, None

    def nested_function(self, stmt: ast.FunctionDef, frame: Scope) -> Function:
        """A `def` inside a function body: a closure over `frame`, as Python makes it."""
        return Function(stmt, frame)

    def other_statement(self, stmt: ast.stmt, frame: Scope) -> tuple[bool, object]:
        """A statement of a function body the base evaluator does not run: (returned, value)."""
        raise self.cannot(stmt, "a function body may hold a docstring, assignments to local names, if/else, "
                                "for loops, `<list>.append(x)`, nested defs and return")


