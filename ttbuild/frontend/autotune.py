"""Reads a kernel's `@triton.autotune` / `@triton.heuristics` from its source without running it (ttbuild.pyeval).

Configs go through ttbuild.pyeval's bounded evaluator, heuristics become ttbuild.pyeval.heuristics expressions.

The rules follow python/triton/runtime/autotuner.py (Triton 3.6): `autotune(configs, key,
prune_configs_by, reset_to_zero, restore_value, pre_hook, post_hook, warmup, rep, use_cuda_graph,
do_bench, cache_results)`, `Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
pre_hook=None, ir_override=None)`, `heuristics(values)` with each value a function of `args`.
"""

from __future__ import annotations

import ast
import copy
import os
import warnings
from dataclasses import dataclass, field
from typing import Callable

from ttbuild.errors import CompilationError, CompilerWarning, Loc
from ttbuild.frontend.kernel_binding import kernel_def
from ttbuild.pyeval import bounds
from ttbuild.pyeval.autotuner import ConfigValue
from ttbuild.pyeval.evaluator import Evaluator
from ttbuild.pyeval.heuristics import HeuristicError, check_expression, check_node, is_boolean
from ttbuild.pyeval.modules import ProjectFunction
from ttbuild.pyeval.values import Source, Target, defaults_of, dotted_name, is_none, resolve_name, short

__all__ = ["Config", "Autotune", "Heuristic", "Decorators", "read_decorators", "dotted_name", "resolve_name",
           "MAX_STEPS"]

MAX_STEPS = bounds.MAX_STEPS

_AUTOTUNE = {"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"}
_HEURISTICS = {"triton.heuristics", "triton.runtime.heuristics", "triton.runtime.autotuner.heuristics"}
_JIT = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"}
_CONFIG = {"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"}
_TARGET = {"triton.runtime.driver.active.get_current_target"}
_ENV_GET = {"os.environ.get", "os.getenv"}
_HELPER_ALIASES = {"triton.next_power_of_2": "next_power_of_2", "triton.cdiv": "cdiv",
                   "triton.language.cdiv": "cdiv"}
_CONSTEXPR = {"triton.language.constexpr", "ttbuild.language.constexpr"}
_AUTOTUNE_PARAMS = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "pre_hook",
                    "post_hook", "warmup", "rep", "use_cuda_graph", "do_bench", "cache_results")
_CONFIG_PARAMS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ir_override")
_CONFIG_FIELDS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ir_override")
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
    # The located error of a configs list the static reader could not evaluate (a project's config
    # loader, say; `configs` is then empty): raised only for a row that takes its values from the
    # list, never for one that gives the config's constexprs and options itself (a recorded row).
    unread: CompilationError | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Heuristic:
    """One entry of `@triton.heuristics`: the constexpr `name` it defines, `expr` over `args` in the
    ttbuild.pyeval.heuristics grammar, the argument names it reads, whether its value is a bool
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
    # The located error of a `@triton.heuristics(values)` whose dict the reader could not read (no
    # dict literal: a project's loader), with the kernel's constexpr parameters that have no default:
    # a row giving each of them builds (Triton's Heuristics wrapper computes them at a served launch);
    # a row leaving one out gets this error.
    unread: CompilationError | None = field(default=None, compare=False)
    required: tuple[str, ...] = ()


class _Module:
    """What a name means when the decorators run: the last module-level binding before the kernel's
    `def` (the decorator expressions execute there). Kinds: assign, def, import, other."""

    def __init__(self, body: list[ast.stmt], imported: Callable[[str], tuple[str, object] | None] | None = None):
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
        # A project's kernel: imported names and module-level values as the module ran (a value that
        # calls a helper of another module, `BKV = [64] if check_shared_mem() else [32]`).
        if imported is not None:
            for name, (kind, payload) in list(self.bindings.items()):
                if kind in ("import", "assign") or (kind == "other" and isinstance(payload, ast.ImportFrom)):
                    found = imported(name)
                    if found is not None:
                        self.bindings[name] = found
        self.imports = {n: full for n, (kind, full) in self.bindings.items() if kind == "import" and full}


class _Evaluator(Evaluator):
    """The evaluator with triton.Config, its fields and the current target (`.backend` is 'cuda')."""

    why = _WHY
    what = "reads autotune configs statically"

    def call_import(self, full, node, scope):
        """Calls to imported names a decorator argument may make: triton.Config(...), os.environ.get(NAME[, default])
        (the value keys the parse), and the base evaluator's allowed calls. Raises a located error otherwise."""
        if full in _CONFIG:
            return self.config(node, scope)
        if full in _ENV_GET:  # the configs it yields become the variants' constexprs and options: keyed
            args = self._elements(node.args, scope)
            if node.keywords or not 1 <= len(args) <= 2 or not isinstance(args[0], str):
                raise self.cannot(node, "os.environ.get(NAME[, default]) with a string name")
            return os.environ.get(args[0], args[1] if len(args) > 1 else None)
        if full in _TARGET and not node.args and not node.keywords:
            return Target()
        raise self.cannot(node)

    def call_value(self, value, node, scope):
        """A function of the project's modules (`check_shared_mem()` of a helper module, ttbuild.pyeval's
        ProjectFunction) on evaluated arguments: its result when it is plain data; else the base evaluator's."""
        if isinstance(value, ProjectFunction):
            values, kwargs = self.call_args(node, scope)
            result = value.call(values, kwargs)
            if not _plain(result):
                raise self.cannot(node, f"`{value.fn.fn.name}` returns {type(result).__name__}, not plain data")
            return result
        return super().call_value(value, node, scope)

    def attribute(self, value, node):
        """`config.<field>` of a triton.Config (kwargs as a dict; pre_hook and ir_override None), else the base
        evaluator's attribute."""
        if isinstance(value, Config) and node.attr in _CONFIG_FIELDS:  # a filter over configs reads them
            field_value = getattr(value, node.attr, None)  # pre_hook / ir_override: None, others refused
            return dict(field_value) if node.attr == "kwargs" else field_value
        return super().attribute(value, node)

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
        options = {name: self.eval(args[name], scope) for name in ("num_warps", "num_stages", "num_ctas", "maxnreg")
                   if name in args}

        def where(name: str, is_option: bool) -> Loc:
            if is_option:
                return self.src.loc(args[name])
            return self.src.loc(_dict_key(args["kwargs"], name) or args["kwargs"])

        return checked_config(kwargs, options, self.constexprs, where, self.src.loc(node))


def checked_config(kwargs, options: dict, constexprs: tuple[str, ...], where: Callable[[str, bool], Loc],
                   loc: Loc | None) -> Config:
    """A Config of evaluated `kwargs` and `options` (num_warps, num_stages, num_ctas, maxnreg; Triton's defaults
    for those absent), checked as Triton's launch would need them: kwargs name constexpr parameters with int,
    float, bool or str values, num_warps a power of 2. `where(name, is_option)` places an error."""
    if not isinstance(kwargs, dict):
        raise CompilationError(f"triton.Config's kwargs must be a dict, not {kwargs!r}", where("kwargs", True))
    for name, value in kwargs.items():
        if not isinstance(name, str):
            raise CompilationError(f"triton.Config kwargs names must be strings, not {name!r}", where(name, False))
        if name not in constexprs:
            raise CompilationError(f"triton.Config sets `{name}`, which is not a tl.constexpr parameter of the kernel "
                                   f"(constexpr parameters: {', '.join(constexprs) or 'none'})", where(name, False))
        if not isinstance(value, (int, float, bool, str)):
            raise CompilationError(f"triton.Config sets `{name}` to {value!r}: a constexpr value must be an int, "
                                   "float, bool or str", where(name, False))
    values = {}
    for name, default in (("num_warps", 4), ("num_stages", 3), ("num_ctas", 1), ("maxnreg", None)):
        value = options.get(name, default)
        least = 0 if name == "num_stages" else 1
        if not (value is None and name == "maxnreg") and (
                not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise CompilationError(f"triton.Config({name}={value!r}): must be an int >= {least}", where(name, True))
        if name == "num_warps" and value & (value - 1):  # the CUDA backend's options assert it
            raise CompilationError(f"triton.Config(num_warps={value}): must be a power of 2", where(name, True))
        values[name] = value
    return Config(dict(kwargs), loc=loc, **values)


def _plain(value) -> bool:
    """Whether `value` is plain data: numbers, strings, None, lists / tuples / dicts of them."""
    if isinstance(value, (int, float, bool, str, type(None))):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, dict) and all(_plain(k) and _plain(v) for k, v in value.items())


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

    def __init__(self, param: str, module: _Module, src: Source):
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
        """A dotted helper (triton.cdiv, ...) becomes the heuristic evaluator's own name; other attributes are left
        as they are."""
        return self._helper(node) or self.generic_visit(node)

    def visit_Name(self, node):
        """The lambda's parameter becomes `args`; a helper's alias becomes the helper. Raises a located error for a
        name of the file (a heuristic sees only its arguments and the helpers)."""
        if node.id == self.param:
            return ast.copy_location(ast.Name("args", ast.Load()), node)
        helper = self._helper(node)
        if helper is not None:
            return helper
        if node.id in self.module.bindings:  # check_node would take `min`, `cdiv`... for the helpers
            raise self.src.error(node, f"a heuristic may not read `{node.id}`, a name of the file: it is "
                                       "evaluated at launch over `args` alone (ttbuild.pyeval.heuristics, run by ttbuild.runtime)")
        if node.id in ("args", "cdiv", "next_power_of_2"):
            raise self.src.error(node, f"`{node.id}` is not defined here (the function's parameter is "
                                       f"`{self.param}`; use triton.cdiv / triton.next_power_of_2)")
        return node


class _Reader:
    def __init__(self, src: Source, module: _Module, fn: ast.FunctionDef, tuning: Callable[[], object] | None = None):
        self.tuning = tuning
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
        return self.names_of(self.ev.eval(node, None), what, lambda i: self.src.loc(_element(node, i)))

    def names_of(self, value, what: str, where: Callable[[int | None], Loc]) -> tuple[str, ...]:
        """names() of an evaluated `value`; `where(i)` places an error about element i (None: the whole)."""
        if not isinstance(value, (list, tuple)):
            raise CompilationError(f"autotune {what} must be a list of argument names, not {value!r}", where(None))
        kept = []
        for i, name in enumerate(value):
            if name in self.params:
                kept.append(name)
                continue
            message = (f"autotune {what} names {name!r}, which is not a parameter of {self.fn.name} "
                       f"(parameters: {', '.join(self.params)})")
            if what != "key" or not isinstance(name, str):
                raise CompilationError(message, where(i))
            warnings.warn(CompilerWarning(f"{message}: ignored, as Triton's autotuner ignores it too",
                                          loc=where(i)), stacklevel=6)
        return tuple(kept)

    def tuned(self, t) -> Autotune:
        """The Autotune of an Autotuner the project's code constructed (ttbuild.pyeval.autotuner.Tuning: a
        decorator factory of its own, a subclass of Autotuner), with the checks autotune() applies to a literal
        decorator; errors about a config are placed at its triton.Config call, others at the decorator."""
        a, loc = t.args, t.loc
        for name, why in (("pre_hook", "cannot run a pre_hook"), ("post_hook", "cannot run a post_hook"),
                          ("do_bench", "times configs with `ttbuild tune`, not a do_bench function")):
            if a[name] is not None:
                raise CompilationError(f"{t.cls}({name}=...): ttbuild builds configs ahead of time and {why}", loc)
        if a["prune_configs_by"] is not None:
            warnings.warn(CompilerWarning("prune_configs_by is not evaluated: ttbuild tunes every config", loc=loc),
                          stacklevel=5)
        configs = a["configs"]
        if not isinstance(configs, (list, tuple)) or not all(isinstance(c, ConfigValue) for c in configs):
            raise CompilationError(f"{t.cls}'s configs must be a list of triton.Config, not {configs!r}", loc)
        if len(configs) > bounds.MAX_CONFIGS:
            raise CompilationError(f"autotune configs list {len(configs)} configs, more than the "
                                   f"{bounds.MAX_CONFIGS} ttbuild expands into variants: prune the list", loc)
        out = []
        for c in configs:
            for hook in ("pre_hook", "ir_override"):
                if c.args[hook] is not None:
                    raise CompilationError(f"triton.Config({hook}=...): ttbuild builds configs ahead of time and "
                                           f"cannot run it", c.loc)
            options = {k: c.args[k] for k in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
            out.append(checked_config(c.args["kwargs"], options, self.constexprs, lambda *_, c=c: c.loc, c.loc))
        reset, restore = (self.names_of(a[n], n, lambda i: loc) if a[n] is not None else ()
                          for n in ("reset_to_zero", "restore_value"))
        return Autotune(tuple(out) or (Config({}, loc=loc),), self.names_of(a["key"], "key", lambda i: loc),
                        reset, restore, loc=loc)

    def unpack(self, dec: ast.Call) -> ast.Call:
        """`**mapping` among a decorator's keywords, the mapping a dict of names to literals the
        evaluator reads (`**cache_kwargs` of another project module): its items as keywords."""
        keywords = []
        for kw in dec.keywords:
            if kw.arg is not None:
                keywords.append(kw)
                continue
            value = self.ev.eval(kw.value, None)
            if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, (int, float, bool, str, type(None))) for k, v in value.items()):
                raise self.src.error(kw.value, f"`**{ast.unparse(kw.value)}` must be a dict of names to literals, "
                                               f"not {value!r}")
            keywords += [ast.copy_location(ast.keyword(k, ast.copy_location(ast.Constant(v), kw.value)), kw.value)
                         for k, v in value.items()]
        return ast.copy_location(ast.Call(dec.func, dec.args, keywords), dec)

    def autotune(self, dec: ast.Call) -> Autotune:
        """`triton.autotune(configs, key, ...)` (python/triton/runtime/autotuner.py)."""
        args = self.ev.bind_arguments(self.unpack(dec), _AUTOTUNE_PARAMS, "triton.autotune")
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
        # The names first: a configs list that exhausts the evaluator's steps leaves none for them.
        key = self.names(args["key"], "key")
        reset, restore = (self.names(args[n], n) if n in args and not is_none(args[n]) else ()
                          for n in ("reset_to_zero", "restore_value"))
        try:
            value = self.ev.eval(node, None)
        except CompilationError as e:  # only a row that takes a config from the list needs it (Autotune.unread)
            return Autotune((), key, reset, restore, loc=self.src.loc(dec), unread=e)
        if not isinstance(value, (list, tuple)):
            raise self.src.error(node, f"autotune configs must be a list of triton.Config, not {type(value).__name__}")
        if len(value) > bounds.MAX_CONFIGS:  # each config is a variant, built and tuned: refuse a runaway list
            raise self.src.error(node, f"autotune configs list {len(value)} configs, more than the "
                                       f"{bounds.MAX_CONFIGS} ttbuild expands into variants: prune the list")
        for i, cfg in enumerate(value):
            if not isinstance(cfg, Config):
                raise self.src.error(_element(node, i), f"autotune configs[{i}] is {cfg!r}, not a triton.Config")
        # Triton's Autotuner: no configs means one default Config({}, num_warps=4, num_stages=3, num_ctas=1).
        configs = tuple(value) or (Config({}, loc=self.src.loc(node)),)
        return Autotune(configs, key, reset, restore, loc=self.src.loc(dec))

    def entries(self, values: ast.Dict | None, dec: ast.Call) -> list[tuple[ast.Constant, ast.AST]]:
        """The (name node, function node) pairs of `triton.heuristics(values)` (`values`: its dict literal,
        None when the call gives none)."""
        if values is None:
            raise self.src.error(dec, "triton.heuristics takes a dict literal {'NAME': lambda args: ...}")
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
        """The kernel's @triton.autotune and @triton.heuristics decorators, read statically in order: configs, key,
        reset_to_zero, restore_value and the heuristics' expressions. Raises a located CompilationError for a
        decorator called without arguments, arguments that need the running program, or an unsupported option."""
        tune, tune_index, found = None, None, []  # found: (decorator index, name node, function node)
        unread = None  # the first heuristics decorator whose values are not a dict literal
        for i, dec in enumerate(self.fn.decorator_list):
            full = resolve_name(dotted_name(dec.func if isinstance(dec, ast.Call) else dec), self.module.imports)
            if full not in _AUTOTUNE | _HEURISTICS | _JIT and self.tuning is not None:
                try:
                    made = self.tuning()  # a decorator of the project's that constructs an Autotuner
                except CompilationError as e:  # the module read refused it: as an unread configs list
                    if tune is None:
                        tune, tune_index = Autotune((), (), loc=self.src.loc(dec), unread=e), i
                    continue
                if made is not None and made.at == (dec.lineno, dec.col_offset):
                    if tune is not None:
                        raise self.src.error(dec, "a kernel may carry one @triton.autotune")
                    tune, tune_index = self.tuned(made), i
            if full not in _AUTOTUNE | _HEURISTICS:
                continue
            if not isinstance(dec, ast.Call):
                raise self.src.error(dec, f"@{dotted_name(dec)} must be called with its arguments")
            if full in _HEURISTICS:
                values = self.ev.bind_arguments(dec, ("values",), "triton.heuristics").get("values")
                if values is not None and not isinstance(values, ast.Dict):
                    unread = unread or self.src.error(values, "cannot read `triton.heuristics(" + short(values) + ")`"
                                                      " without running the file: ttbuild reads a dict literal "
                                                      "{'NAME': lambda args: ...}; give the row every value it "
                                                      "computes instead")
                    continue
                found.extend((i, k, v) for k, v in self.entries(values, dec))
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
        defaults = defaults_of(self.fn.args)
        required = tuple(p for p in self.constexprs if p not in defaults)
        return Decorators(tune, tuple(heuristics), unread, required if unread else ())


def _reading(tree: ast.AST, name: str) -> ast.AST | None:
    """The first args['name'] in a normalized heuristic tree (which keeps the source positions)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == name:
            return node
    return None


def read_decorators(source: str | bytes, kernel: str, file: str,
                    imported: Callable[[str], tuple[str, object] | None] | None = None,
                    tuning: Callable[[], object] | None = None) -> Decorators:
    """The `@triton.autotune` and `@triton.heuristics` of the function `kernel` in `source` (read as
    `file`), evaluated from the ast without importing or running anything; Decorators(None, ()) when
    it has neither.

    Rules from python/triton/runtime/autotuner.py: `key`, `reset_to_zero`, `restore_value` name
    kernel parameters; configs and heuristics set tl.constexpr parameters; an empty config list is
    Triton's default config. Raises CompilationError at the offending node for a syntax error, a
    missing kernel, anything that cannot be evaluated statically (torch, os, other modules' calls,
    the target's arch, a pre_hook/post_hook/do_bench that is not None, more than MAX_STEPS steps, a
    name defined in terms of itself) and a heuristic outside the ttbuild.pyeval.heuristics grammar.
    `imported(name)`, for a project's kernel, answers what an imported name is bound to once the
    module ran (("value", v) or ("import", dotted path)), or None to keep the file's own reading.
    `tuning()`, for a project's kernel, answers the ttbuild.pyeval.autotuner.Tuning its module
    constructed around it (None if none; raising the located error of a decorator the module read
    refused): a decorator that is not triton's own is read through it.
    Warns (CompilerWarning) that prune_configs_by is not evaluated, and of a `key` name that is not
    a parameter, which is left out of the key as Triton's Autotuner leaves it out.
    """
    text = source.decode("utf-8") if isinstance(source, bytes) else source
    src = Source(file, text)
    try:
        tree = ast.parse(text, filename=file)
    except SyntaxError as e:
        line = e.lineno or 1
        raise CompilationError(f"invalid syntax: {e.msg}", Loc(file, line, max((e.offset or 1) - 1, 0),
                                                               (e.text or "").rstrip("\n"))) from None
    except RecursionError:
        raise CompilationError("expression nested too deeply for Python's parser", Loc(file, 1, 0)) from None
    # The last binding of `kernel` wins, as when the module runs; decorators see what is bound before it.
    index, fn = kernel_def(tree.body, kernel)
    if index is None:
        defs = sorted(s.name for s in tree.body if isinstance(s, ast.FunctionDef))
        raise CompilationError(f"kernel {kernel!r} is not a function of {file} (functions there: "
                               f"{', '.join(defs) or 'none'})")
    try:
        return _Reader(src, _Module(tree.body[:index], imported), fn, tuning).read()
    except RecursionError:
        raise src.error(fn.decorator_list[0] if fn.decorator_list else fn,
                        "decorator arguments nested too deeply to evaluate") from None
