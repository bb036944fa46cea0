"""Triton's Autotuner, its project subclasses and triton.Config as a static module read sees them: the arguments an Autotuner is constructed with; standard library only.

Rules from python/triton/runtime/autotuner.py (Triton 3.6): `autotune(configs, key, ...)` returns
`decorator(fn)`, which constructs `Autotuner(fn, fn.arg_names, configs, key, reset_to_zero,
restore_value, pre_hook=..., ...)`; `Config(kwargs, num_warps=4, num_stages=3, num_ctas=1,
maxnreg=None, pre_hook=None, ir_override=None)` keeps its arguments as fields. A project may wrap
both: a decorator factory of its own that returns a subclass of Autotuner (a config cache that
overrides `run`). The configs a build compiles are those the Autotuner is constructed with, which
is what Triton's runtime holds in `self.configs`; a subclass's overridden methods run at launch
and are not read. A subclass is read only when its `__init__` passes its own parameters to
`super().__init__` unchanged and nothing in the class assigns the fields that hold the configs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ttbuild.errors import CompilationError, Loc

from .objects import External, Kernel
from .values import Function

AUTOTUNER = frozenset({"triton.runtime.autotuner.Autotuner", "triton.runtime.Autotuner"})
AUTOTUNE = frozenset({"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"})
CONFIG = frozenset({"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"})

# Parameters and defaults, Triton 3.6's (the order is the positional order).
AUTOTUNER_PARAMS = (("fn", ...), ("arg_names", ...), ("configs", ...), ("key", ...), ("reset_to_zero", ...),
                    ("restore_value", ...), ("pre_hook", None), ("post_hook", None), ("prune_configs_by", None),
                    ("warmup", None), ("rep", None), ("use_cuda_graph", False), ("do_bench", None),
                    ("cache_results", False))
AUTOTUNE_PARAMS = (("configs", ...), ("key", ...), ("prune_configs_by", None), ("reset_to_zero", None),
                   ("restore_value", None), ("pre_hook", None), ("post_hook", None), ("warmup", None),
                   ("rep", None), ("use_cuda_graph", False), ("do_bench", None), ("cache_results", False))
CONFIG_PARAMS = (("kwargs", ...), ("num_warps", 4), ("num_stages", 3), ("num_ctas", 1), ("maxnreg", None),
                 ("pre_hook", None), ("ir_override", None))
# The Autotuner fields that decide what is compiled and how it is keyed: a subclass that assigns
# one of them changes what Triton's runtime holds, which the reader does not follow.
_FIELDS = frozenset({"configs", "keys", "reset_to_zero", "restore_value", "arg_names", "fn"})


class SignatureError(TypeError):
    """Arguments that do not bind to a signature, with Python's wording."""


def bind(params: tuple, values: list, kwargs: dict, what: str) -> dict:
    """`values` and `kwargs` bound to `params` ((name, default or ...) pairs) as Python binds a call of `what`,
    defaults filled. Raises SignatureError for too many, repeated, unexpected or missing arguments."""
    names = [n for n, _ in params]
    if len(values) > len(names):
        raise SignatureError(f"{what}() takes at most {len(names)} positional arguments ({len(values)} given)")
    out = dict(zip(names, values))
    for k, v in kwargs.items():
        if k not in names:
            raise SignatureError(f"{what}() got an unexpected keyword argument `{k}`")
        if k in out:
            raise SignatureError(f"{what}() got multiple values for argument `{k}`")
        out[k] = v
    for name, default in params:
        if name not in out:
            if default is ...:
                raise SignatureError(f"{what}() is missing the argument `{name}`")
            out[name] = default
    return out


@dataclass(frozen=True, eq=False)
class ConfigValue:
    """`triton.Config(...)` read at module level: its arguments by name (`args`), Triton's defaults filled, and
    where the call is written (`loc`, for the errors the decorator reader raises about it)."""

    args: dict
    loc: Loc | None = None

    def field(self, name: str):
        """The Config attribute `name` (its fields are its arguments); KeyError for another name."""
        return self.args[name]


@dataclass(frozen=True, eq=False)
class Tuning:
    """An Autotuner as constructed around a kernel (Triton's own or a project subclass `cls`): its arguments by
    name (AUTOTUNER_PARAMS), and where it was applied (`loc`, and `at`, the decorator's (line, col) in the kernel's
    file, to find it among the kernel's decorators)."""

    args: dict
    cls: str = "Autotuner"
    loc: Loc | None = None
    at: tuple | None = None


@dataclass(frozen=True, eq=False)
class AutotuneFactory:
    """`triton.autotune(...)` called inside a function of the project (a decorator factory of its own): its
    arguments by name (AUTOTUNE_PARAMS); applied to a kernel it constructs the Autotuner."""

    args: dict


@dataclass(eq=False)
class ClassValue:
    """A class of the project that derives from Triton's Autotuner (`base`: the External Autotuner or another
    ClassValue), defined in `module` (a ModuleValue)."""

    node: ast.ClassDef
    module: object
    base: object
    loc: Loc | None = None
    methods: dict = field(default_factory=dict)

    def __post_init__(self):
        self.methods = {s.name: s for s in self.node.body if isinstance(s, ast.FunctionDef)}


def class_value(ex, stmt: ast.ClassDef) -> ClassValue | None:
    """A class deriving from Triton's Autotuner (directly or through another such class of the project), as a
    ClassValue; None for any other class (opaque to the reader). Its methods read the module of `ex` (the
    executor running the class statement)."""
    if len(stmt.bases) != 1 or stmt.keywords or stmt.decorator_list:
        return None
    try:
        base = ex.eval(stmt.bases[0], None)
    except CompilationError:
        return None
    if not (isinstance(base, External) and base.path in AUTOTUNER or isinstance(base, ClassValue)):
        return None
    for method in stmt.body:
        if isinstance(method, ast.FunctionDef):
            ex.project.home[method] = ex.mod
    return ClassValue(stmt, ex.mod, base, ex.src.loc(stmt))


def assigned_fields(cls: ClassValue) -> list[ast.Attribute]:
    """The `self.<field>` stores in the class body of the fields in _FIELDS (what would change the configs)."""
    return [n for n in ast.walk(cls.node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name) and n.value.id == "self" and n.attr in _FIELDS]


def super_init(init: ast.FunctionDef, cls_name: str) -> ast.Call | None:
    """The one top-level `super().__init__(...)` (or `super(Cls, self).__init__(...)`) statement of `init`, else
    None."""
    calls = []
    for stmt in init.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        f = call.func if isinstance(call, ast.Call) else None
        if isinstance(f, ast.Attribute) and f.attr == "__init__" and isinstance(f.value, ast.Call) \
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "super" and (
                not f.value.args or [ast.unparse(a) for a in f.value.args] == [cls_name, "self"]):
            calls.append(call)
    return calls[0] if len(calls) == 1 else None


def construct(ex, callee, values: list, kwargs: dict, node: ast.AST):
    """The Kernel that `callee(*values, **kwargs)` makes, `callee` Triton's Autotuner, a project subclass
    (ClassValue) or an AutotuneFactory applied to a kernel; `ex` is the module executor calling it. Raises a
    located error where Python's call would fail or the subclass is not read (module docstring)."""
    name = callee.node.name if isinstance(callee, ClassValue) else "Autotuner"
    if isinstance(callee, AutotuneFactory):  # Triton's autotune(...)'s decorator(fn)
        if len(values) != 1 or kwargs:
            raise ex.src.error(node, "the decorator triton.autotune(...) returns takes the kernel as its one argument")
        a = callee.args
        values = [values[0], getattr(values[0], "arg_names", None)] + [a[k] for k in (
            "configs", "key", "reset_to_zero", "restore_value")]
        kwargs = {k: a[k] for k, _ in AUTOTUNER_PARAMS[6:]}
    for _ in range(16):  # a chain of subclasses, each passing its arguments up to its base
        if not isinstance(callee, ClassValue):
            break
        values, kwargs = _through_init(ex, callee, values, kwargs, node)
        callee = callee.base
    else:
        raise ex.src.error(node, "a chain of more than 16 Autotuner subclasses")
    try:
        args = bind(AUTOTUNER_PARAMS, values, kwargs, name)
    except SignatureError as e:
        raise ex.src.error(node, str(e)) from None
    fn = args["fn"]
    if not isinstance(fn, Kernel):
        raise ex.src.error(node, f"{name} wraps a @triton.jit function, not {type(fn).__name__}")
    return Kernel(fn.fn, fn.module, fn.wrappers + ("triton.autotune",), tuning=Tuning(args, name))


def _through_init(ex, cls: ClassValue, values: list, kwargs: dict, node: ast.AST) -> tuple[list, dict]:
    """The arguments `cls(*values, **kwargs)` passes to its base's `__init__`: the same when it defines none, else
    those of its `super().__init__(...)` call, evaluated over its bound parameters."""
    stores = assigned_fields(cls)
    if stores:
        raise cls.module.source.error(stores[0], f"`{cls.node.name}` assigns `self.{stores[0].attr}`, which holds "
                                                 "what Triton's Autotuner compiles: ttbuild reads the configs from "
                                                 "the arguments of Autotuner.__init__ only")
    init = cls.methods.get("__init__")
    if init is None:
        return values, kwargs
    call = super_init(init, cls.node.name)
    body = [s for s in init.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if call is None or not (isinstance(body[0], ast.Expr) and body[0].value is call):
        raise cls.module.source.error(init, f"`{cls.node.name}.__init__` must begin with `super().__init__(...)`, "
                                            "passing its parameters on: ttbuild reads an Autotuner subclass only then")
    home = ex.elsewhere(init) or ex
    frame = home.bind_call(Function(init), [_SELF] + list(values), kwargs, node)
    home.depth += 1
    try:
        return home.call_args(call, frame)
    finally:
        home.depth -= 1


_SELF = object()  # `self` of an Autotuner subclass under construction: never read before super().__init__
