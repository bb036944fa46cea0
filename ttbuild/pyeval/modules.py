"""Reads a project's modules statically, as Python would have executed them under Triton 3.6; standard library only.

Imports resolve from the source files given (never imported), module-level `if`/`try` are decided as
under Triton 3.6, and every fact read is recorded.

What a module-level statement means follows Python (the language reference, "The import
system", "Compound statements"); what triton answers follows Triton 3.6 (objects.TRITON_*).
The reader records what it read in `Project.read_env` (environment variables and their values)
and `Project.read_target` (whether a device fact was read); the build keys the parse stage by
them (docs/CONTRACTS.md, "Project modules").
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Callable, Mapping

from ttbuild.errors import CompilationError, Loc

from . import autotuner, branches, device, enums
from .evaluator import Evaluator
from .extensions import _NOT, Extensions
from .modnames import (
    _CACHES,
    _CONSTEXPR,
    _CONSTEXPR_FUNCTION,
    _ENV_GET,
    _IMPORT_ERRORS,
    _JIT,
    _OPERATORS,
    _VERSION,
    _VERSION_NAMES,
    _WRAPPERS,
    _Bindings,
    _bound_names,
    _handler_names,
)
from .objects import (
    SIGNATURES,
    TRITON_MODULES,
    TRITON_VERSION,
    Constexpr,
    ConstexprFunction,
    DeviceProperties,
    External,
    Kernel,
    ModuleValue,
    NeedsValue,
    Opaque,
    Signature,
    Unreadable,
    Version,
    Wrapper,
)
from .tritonnames import TRITON_ATTRIBUTES
from .values import Function, PythonError, Source, UnknownValue, catches, short


class _ImportFailed(Exception):
    """An import Python would refuse (a triton module 3.6 lacks, a project module absent)."""

    def __init__(self, name: str, node: ast.AST | None, src: Source | None):
        super().__init__(name)
        self.name, self.node, self.src = name, node, src


class Project:
    """The modules of a project, read on demand from `files` (dotted module name -> (file as
    diagnostics name it, source bytes), packages under their own name with is_package from a
    trailing `__init__.py`); `env` answers os.environ reads (a missing name: None);
    `capability` is the target's compute capability (90), or None when the target is unknown;
    `sm_count` and `device_name` those of the row's GPU model, None when it names none.
    `is_external(name)` says whether a non-project, non-triton module resolves (default: yes,
    a third-party import is an opaque value)."""

    def __init__(self, files: Mapping[str, tuple[str, bytes]], env: Mapping[str, str | None] | None = None,
                 capability: int | None = None, is_external: Callable[[str], bool] | None = None,
                 strict_env: bool = False, sm_count: int | None = None, device_name: str | None = None):
        self.files, self.env, self.capability = files, dict(env or {}), capability
        # the GPU model's facts when the row names one (ttbuild.target.GPU_MODELS), else None
        self.sm_count, self.device_name = sm_count, device_name
        self.strict_env = strict_env  # a name outside `env` is an error (the build keyed only those)
        self.is_external = is_external or (lambda name: True)
        self.modules: dict[str, ModuleValue] = {}
        self.home: dict[ast.FunctionDef, ModuleValue] = {}  # a def -> the module whose globals it reads
        self.read_env: dict[str, str | None] = {}
        self.read_target = False

    def module(self, name: str, node: ast.AST | None = None, src: Source | None = None) -> ModuleValue:
        """The module `name` executed (once; a cycle sees the partly executed module, as Python's)."""
        if name in self.modules:
            return self.modules[name]
        parent, _, _ = name.rpartition(".")
        if name not in self.files:
            if not self.is_namespace(name):
                raise _ImportFailed(name, node, src)
            if parent:
                self.module(parent, node, src)
            # a folder without __init__.py: an implicit namespace package (PEP 420), nothing to run
            mod = self.modules[name] = ModuleValue(name, name.replace(".", "/"), True)
            if parent in self.modules:
                self.modules[parent].namespace.setdefault(name.rpartition(".")[2], mod)
            return mod
        if parent:  # Python runs the packages above a module first
            self.module(parent, node, src)
        file, data = self.files[name]
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        mod = ModuleValue(name, file, file.endswith("__init__.py"), source=Source(file, text))
        self.modules[name] = mod
        try:
            mod.tree = ast.parse(text, filename=file)
        except RecursionError:
            del self.modules[name]
            raise CompilationError("expression nested too deeply for Python's parser", Loc(file, 1, 0)) from None
        except SyntaxError as e:
            del self.modules[name]
            line = e.lineno or 1
            raise CompilationError(f"invalid syntax: {e.msg}", Loc(file, line, max((e.offset or 1) - 1, 0),
                                                                   (e.text or "").rstrip("\n"))) from None
        if parent and parent in self.modules:
            self.modules[parent].namespace.setdefault(name.rpartition(".")[2], mod)
        try:
            _Executor(self, mod).run(mod.tree.body)
        except _ImportFailed:
            del self.modules[name]  # as Python: a module whose import failed is not kept
            raise
        return mod

    def is_namespace(self, name: str) -> bool:
        """Whether `name` is a folder of the project holding modules but no __init__.py."""
        return any(m.startswith(name + ".") for m in self.files)

    def resolves(self, name: str) -> bool:
        """Whether `import name` succeeds: a project module, a triton module of 3.6, or another
        package (opaque) when is_external says so."""
        if name in self.files:
            return True
        if name == "triton" or name.startswith("triton."):
            return name in TRITON_MODULES
        return self.is_external(name)


class _Executor(Extensions, Evaluator):
    """Executes one module's top-level statements over its namespace."""

    why = ("imports, if/try on version checks and environment variables, literals, names, calls of "
           "triton.jit/heuristics/autotune/constexpr and of simple functions of the project")
    what = "reads the project's modules statically"

    def __init__(self, project: Project, mod: ModuleValue):
        super().__init__(mod.source, _Bindings(mod.namespace))
        self.project, self.mod = project, mod

    # ------------------------------------------------------------- statements

    def run(self, body, frame=None):
        """Execute a module's top-level `body` over its namespace (`frame` None), statement by statement; a failed
        import leaves its names Unreadable (raised when read) instead of stopping the module. With a `frame`, a
        function body as the base Evaluator runs it."""
        if frame is not None:
            return super().run(body, frame)
        ns = self.mod.namespace
        for stmt in body:
            try:
                self.statement(stmt, ns)
            except _ImportFailed:
                raise
            except CompilationError as e:
                for name in _bound_names(stmt):
                    ns[name] = Unreadable(e)
            except RecursionError:
                err = self.src.error(stmt, "statement nested too deeply to read")
                for name in _bound_names(stmt):
                    ns[name] = Unreadable(err)
        return False, None

    def statement(self, stmt: ast.stmt, ns: dict) -> None:
        """Execute one top-level statement into `ns`: imports (project modules read, others External), assignments,
        defs and classes, `if` on a decidable condition, try/except around imports. Raises a located error for
        what cannot be decided without running the file."""
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                self.import_module(a.name, stmt)
                if a.asname:
                    ns[a.asname] = self.module_value(a.name, stmt)
                else:
                    head = a.name.split(".")[0]
                    ns[head] = self.module_value(head, stmt)
        elif isinstance(stmt, ast.ImportFrom):
            base = self.absolute(stmt)
            self.import_module(base, stmt)
            for a in stmt.names:
                if a.name == "*":
                    self.import_star(base, stmt, ns)
                else:
                    ns[a.asname or a.name] = self.from_import(base, a.name, stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self.project.home[stmt] = self.mod
            value = Function(stmt)
            for dec in reversed(stmt.decorator_list):
                dec_value = self.eval(dec, None)
                if isinstance(dec_value, External) and dec_value.path in _CACHES:
                    continue  # a memoized function returns what the function returns
                value = self.apply(dec_value, [value], dec) if not isinstance(value, Opaque) else value
                if isinstance(value, Kernel) and value.tuning is not None and value.tuning.at is None:
                    value = replace(value, tuning=replace(value.tuning, loc=self.src.loc(dec),
                                                          at=(dec.lineno, dec.col_offset)))
            ns[stmt.name] = value
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = self.eval(stmt.value, None)
            for t in targets:
                self.bind_global(t, value, ns)
        elif isinstance(stmt, ast.If):
            try:
                test = self.truth(stmt.test)
            except CompilationError as e:  # neither branch is known: what they bind alike is known
                branches.join(self.run, ns, stmt, e)
                return
            self.run(stmt.body if test else stmt.orelse)
        elif isinstance(stmt, ast.Try):
            self.run_try(stmt)
        elif isinstance(stmt, ast.ClassDef) and (
                cls := autotuner.class_value(self, stmt) or enums.enum_class(self, stmt)) is not None:
            ns[stmt.name] = cls
        elif isinstance(stmt, (ast.Expr, ast.Pass, ast.Assert)):
            return  # a docstring, a call for its effect (registering an op...): binds nothing
        else:
            for name in _bound_names(stmt):  # a class, a loop, a with...: its names are opaque
                ns[name] = Opaque(f"{name} (bound by a `{type(stmt).__name__.lower()}` statement)")

    def run_try(self, stmt: ast.Try) -> None:
        """`try: <imports> except ImportError:` takes the first branch whose imports resolve, as Python."""
        try:
            for s in stmt.body:
                self.statement(s, self.mod.namespace)
        except _ImportFailed as e:
            for handler in stmt.handlers:
                names = _handler_names(handler)
                if names is None or names & _IMPORT_ERRORS:
                    if handler.name:
                        self.mod.namespace[handler.name] = Opaque(f"the ImportError of `{e.name}`")
                    self.run(handler.body)
                    break
            else:
                raise
        else:
            self.run(stmt.orelse)
        self.run(stmt.finalbody)

    def bind_global(self, target: ast.AST, value, ns: dict) -> None:
        """Bind an assignment `target` (a name, or a tuple / list of them, unpacked) to `value` in `ns`. Raises a
        located error when the value does not unpack to the targets' count."""
        if isinstance(target, ast.Name):
            ns[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (list, tuple)) or len(value) != len(target.elts):
                raise self.src.error(target, f"cannot unpack `{short(target)}`")
            for t, v in zip(target.elts, value):
                self.bind_global(t, v, ns)
        else:
            raise self.cannot(target, "module-level assignments to names and tuples of names")

    def other_statement(self, stmt: ast.stmt, frame):
        """In a function body: `try`/`except` of an ImportError or of an error Python raises where the evaluator
        does (PythonError: a missing key...), and imports (Liger-style version helpers). A construct the reader
        refuses is no Python exception: no handler takes it."""
        if isinstance(stmt, ast.Try):
            try:
                returned, value = super().run(stmt.body, frame)
            except (_ImportFailed, PythonError) as e:
                kind = e.kind if isinstance(e, PythonError) else "ImportError"
                handler = next((h for h in stmt.handlers if catches(_handler_names(h), kind)
                                or kind == "ImportError" and _handler_names(h) & _IMPORT_ERRORS), None)
                if handler is None:
                    raise
                returned, value = super().run(handler.body, frame)
            else:
                if not returned:
                    returned, value = super().run(stmt.orelse, frame)
            return returned, value
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            ns: dict = {}
            self.statement(stmt, ns)
            frame.vars.update(ns)
            return False, None
        return super().other_statement(stmt, frame)

    # ------------------------------------------------------------- imports

    def absolute(self, stmt: ast.ImportFrom) -> str:
        """The absolute module name an ImportFrom names (its `level` resolved against this module's package, as
        importlib does). Raises a located error for a relative import beyond the top-level package."""
        if not stmt.level:
            return stmt.module or ""
        parts = self.mod.name.split(".")
        package = parts if self.mod.is_package else parts[:-1]
        if not package or stmt.level - 1 >= len(package):  # Python's ImportError, located
            raise self.src.error(stmt, "attempted relative import beyond the top-level package")
        package = package[: len(package) - (stmt.level - 1)]
        return ".".join(package + ([stmt.module] if stmt.module else []))

    def import_module(self, name: str, node: ast.AST) -> None:
        """Run the project modules along `name`, or check that an external one resolves."""
        if name in self.project.files or self.project.is_namespace(name):
            self.project.module(name, node, self.src)
            return
        head = name.split(".")[0]
        if head in self.project.files or self.project.is_namespace(head) or not self.project.resolves(name):
            raise _ImportFailed(name, node, self.src)

    def import_star(self, base: str, node: ast.ImportFrom, ns: dict) -> None:
        """`from base import *`: a project module's `__all__`, else its names without a leading
        underscore (the language reference, "The import statement"); a third-party module's names
        are unknown, so a name this module cannot place becomes opaque instead of undefined."""
        if not (base in self.project.files or self.project.is_namespace(base)):
            self.mod.stars.append(base)
            return
        mod = self.project.module(base, node, self.src)
        public = mod.namespace.get("__all__")
        if isinstance(public, (list, tuple)) and all(isinstance(n, str) for n in public):
            for name in public:
                ns[name] = self.from_import(base, name, node)
            return
        ns.update({k: v for k, v in mod.namespace.items() if not k.startswith("_")})
        for star in mod.stars:  # what that module's own star imports may bind, this one may too
            if star not in self.mod.stars:
                self.mod.stars.append(star)

    def module_value(self, name: str, node: ast.AST):
        """The value `import name` binds: the project module (executed on first use), else an External reference."""
        if name in self.project.files or self.project.is_namespace(name):
            return self.project.module(name, node, self.src)
        return External(name)

    def from_import(self, base: str, name: str, node: ast.AST):
        """The value `from base import name` binds: a name of the project module `base` or its submodule, else an
        External `base.name`. Raises _ImportFailed where Python's import would fail."""
        if base in self.project.files or self.project.is_namespace(base):
            mod = self.project.module(base, node, self.src)
            if name in mod.namespace:
                return mod.namespace[name]
            if f"{base}.{name}" in self.project.files:
                return self.project.module(f"{base}.{name}", node, self.src)
            raise _ImportFailed(f"{base}.{name}", node, self.src)
        return External(f"{base}.{name}")

    # ------------------------------------------------------------- values

    def truth(self, node: ast.AST) -> bool:
        """bool() of a top-level condition. Raises a located error when it needs a value only the running program
        knows."""
        try:
            return bool(self.eval(node, None))
        except NeedsValue as e:
            raise self.src.error(node, f"cannot decide `{short(node)}` without running the file: it needs the "
                                       f"value of {e.what}, which only the running program knows") from None

    def eval(self, node, scope):
        """The base Evaluator's eval, with a NeedsValue turned into a located error naming the value it needs."""
        try:
            return super().eval(node, scope)
        except NeedsValue as e:
            raise UnknownValue(f"cannot evaluate `{short(node)}` without running the file: it needs the value of "
                               f"{e.what}", self.src.loc(node)) from None

    def module_name(self, name: str, node: ast.AST):
        """A name read at module level: the namespace's binding (an Unreadable one raises its error), True / False /
        None, a builtin. Raises NeedsValue for a name that is not bound."""
        ns = self.mod.namespace
        if name in ns:
            value = ns[name]
            if isinstance(value, Unreadable):
                raise value.error
            return value
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        if name in ("ImportError", "ModuleNotFoundError", "Exception", "int", "float", "str", "bool", "print"):
            return External(f"builtins.{name}")
        if self.mod.stars:  # perhaps bound by `from <third party> import *`: known only to the running program
            return Opaque(f"`{name}` (perhaps from `from {self.mod.stars[0]} import *`)")
        raise self.src.error(node, f"name `{name}` is not defined at module level in {self.src.file}")

    def attribute(self, value, node: ast.Attribute):
        """`value.attr` for module values (namespace members, submodules), External references (a longer dotted path,
        or a device fact such as torch.cuda.get_device_capability) and plain values. Raises a located error for a
        missing attribute."""
        attr = node.attr
        if isinstance(value, ModuleValue):
            if attr in value.namespace:
                found = value.namespace[attr]
                if isinstance(found, Unreadable):
                    raise found.error
                return found
            if f"{value.name}.{attr}" in self.project.files or self.project.is_namespace(f"{value.name}.{attr}"):
                return self.project.module(f"{value.name}.{attr}", node, self.src)
            raise self.src.error(node, f"module `{value.name}` has no attribute `{attr}`")
        if isinstance(value, External):
            if value.path == "triton" and attr == "__version__":
                return TRITON_VERSION
            if value.path == "torch.version" and attr == "hip":  # a CUDA target: not a ROCm build
                self.device_fact("torch.version.hip", node)
                return None
            return External(f"{value.path}.{attr}")
        found = self.value_attribute(value, attr, node)
        if found is not _NOT:
            return found
        return super().attribute(value, node)

    def _Call(self, node, scope):
        """`hasattr(triton.language, "name")` as Triton 3.6 answers it (tritonnames), and on project modules."""
        fn = node.func.id if isinstance(node.func, ast.Name) else None
        if fn == "getattr" and fn not in self.mod.namespace and len(node.args) in (2, 3) and not node.keywords:
            obj, name = (self.eval(a, scope) for a in node.args[:2])
            if isinstance(obj, (DeviceProperties, External, ModuleValue)) and isinstance(name, str):
                return self.attribute(obj, ast.copy_location(ast.Attribute(node.args[0], name, ast.Load()), node))
        if fn == "hasattr" and fn not in self.mod.namespace and len(node.args) == 2 and not node.keywords:
            obj, name = (self.eval(a, scope) for a in node.args)
            if isinstance(name, str) and isinstance(obj, External) and obj.path in TRITON_ATTRIBUTES:
                return name in TRITON_ATTRIBUTES[obj.path]
            if isinstance(name, str) and isinstance(obj, ModuleValue):
                return name in obj.namespace or f"{obj.name}.{name}" in self.project.files
        return super()._Call(node, scope)

    def call_value(self, value, node: ast.Call, scope):
        """Call `value` at module level: decorators (jit, autotune, heuristics) become Wrapper values for the
        decorator reader; known externals and Python callables are applied to evaluated arguments. Raises a
        located error for *args / **kwargs."""
        if isinstance(value, (Wrapper, External, Opaque, autotuner.ClassValue, enums.EnumClass, enums.BoundMethod)) \
                or callable(value):
            path = value.path if isinstance(value, (External, Wrapper)) else None
            if path in autotuner.AUTOTUNE and self.depth:  # a decorator factory of the project returns it
                args, kwargs = self.call_args(node, scope)
                try:
                    return autotuner.AutotuneFactory(autotuner.bind(autotuner.AUTOTUNE_PARAMS, args, kwargs, path))
                except autotuner.SignatureError as e:
                    raise self.src.error(node, str(e)) from None
            if isinstance(value, External) and (path in _WRAPPERS or (path in _JIT and not node.args)):
                return Wrapper(path)  # the arguments are the decorator reader's (ttbuild.frontend.autotune)
            args, kwargs = self.call_args(node, scope)
            return self.apply(value, args, node, kwargs)
        return super().call_value(value, node, scope)

    def elsewhere(self, fn: ast.FunctionDef):
        """An executor of the module `fn` was defined in, when that is another module (its body
        reads that module's globals, as a Python function does), else None."""
        home = self.project.home.get(fn)
        if home is None or home is self.mod:
            return None
        ex = _Executor(self.project, home)
        ex.depth, ex.deadline = self.depth, self.deadline
        return ex

    def call(self, fn: Function, node: ast.Call, scope):
        """Call a function defined in Python source: in this module through the base Evaluator, in another module by
        that module's executor (its body reads that module's globals)."""
        values, kwargs = self.call_args(node, scope)
        return self.apply(fn, values, node, kwargs)

    def nested_function(self, stmt: ast.FunctionDef, frame):
        """A closure defined in this module: its body reads this module's globals wherever it is called."""
        self.project.home[stmt] = self.mod
        return super().nested_function(stmt, frame)

    def apply(self, callee, values, node, kwargs=None):  # noqa: C901 - one case per known callee
        """Apply a known callee to evaluated `values` (and `kwargs`): functions of other modules, Wrapper decorators,
        device facts and the stdlib / builtin callables the reader allows. Raises a located error for other
        callees."""
        kwargs = kwargs or {}
        if isinstance(callee, Function):
            ex = self.elsewhere(callee.fn)
            if ex is not None:
                return ex.apply(callee, values, node, kwargs)
        if isinstance(callee, Wrapper):
            (fn,) = values
            return self.wrap(callee.path, fn, node)
        found = self.value_call(callee, values, kwargs, node)
        if found is not _NOT:
            return found
        if not isinstance(callee, External):
            if isinstance(callee, Opaque):
                return Opaque(f"{callee.what}(...)")
            return super().apply(callee, values, node, kwargs)
        path = callee.path
        if path in _JIT or path in _CONSTEXPR_FUNCTION:
            if len(values) != 1:
                raise self.src.error(node, f"`{short(node)}` takes the function to wrap as its one argument")
            (fn,) = values
            return self.wrap(path, fn, node)
        if path in _CONSTEXPR:  # `@tl.constexpr def f`: called at compile time, as Triton 3.6's constexpr.__call__
            return ConstexprFunction(values[0].fn, self.mod) if values and isinstance(values[0], Function) else Constexpr(
                values[0] if values else None)
        if path in _ENV_GET or path == "os.environ.__getitem__":
            name, default = (list(values) + [kwargs.get("default")])[:2]
            if not isinstance(name, str):
                raise self.src.error(node, "an environment variable's name must be a string literal or constant")
            if self.project.strict_env and name not in self.project.env:
                raise self.src.error(node, f"reads the environment variable {name!r}, whose name the build could not "
                                           "see: write the name as a string literal")
            value = self.project.env.get(name)
            self.project.read_env[name] = value
            return default if value is None else value
        if path in ("importlib.metadata.version", "importlib_metadata.version") and values == ["triton"]:
            return TRITON_VERSION
        if path == "importlib.import_module" and values and isinstance(values[0], str):
            if not self.project.resolves(values[0]):
                raise self.src.error(node, f"`{values[0]}` is no module ttbuild can read")
            return self.module_value(values[0], node)
        if path in _VERSION or (path.rpartition(".")[2] in _VERSION_NAMES and len(values) == 1
                                and isinstance(values[0], str)):
            if values and isinstance(values[0], (External, Opaque)):  # torch.__version__: the running program's
                return Opaque(f"{path}({getattr(values[0], 'path', None) or values[0].what})")
            try:
                return Version.parse(values[0])
            except (ValueError, IndexError) as e:
                raise self.src.error(node, str(e)) from None
        if path == "functools.lru_cache" and not values:  # lru_cache(maxsize=...): the decorator
            return External(path)
        if path == "inspect.signature" and len(values) == 1 and isinstance(values[0], External) \
                and values[0].path in SIGNATURES:
            return Signature(SIGNATURES[values[0].path])
        if path in _OPERATORS and len(values) == 2:
            return _OPERATORS[path](*values)
        if path in ("triton.cdiv", "triton.language.cdiv") and len(values) == 2:
            return -(-values[0] // values[1])
        if path == "triton.next_power_of_2" and len(values) == 1:
            n = int(values[0])
            return 1 if n <= 1 else 1 << (n - 1).bit_length()
        if path in device.CALLS:
            return self.device_fact(path, node)
        if path.startswith("builtins.") and path[9:] in ("int", "float", "str", "bool") and len(values) == 1:
            return {"int": int, "float": float, "str": str, "bool": bool}[path[9:]](values[0])
        return Opaque(f"{path}(...)", f", the result of a call into `{path.split('.')[0]}`, which is not under the project's "
                                      "source roots: ttbuild reads the project's modules and never runs other code")

    def device_fact(self, path: str, node: ast.AST):
        """The value of a device probe for the variant's target, recorded as read (ttbuild.pyeval.device.fact)."""
        return device.fact(self.project, path, node, self.src)

    def wrap(self, path: str, fn, node: ast.AST):
        """A decorator applied to `fn`: jit makes a Kernel, heuristics/autotune wrap one."""
        if path in _CONSTEXPR_FUNCTION:
            if not isinstance(fn, Function):
                raise self.src.error(node, "triton.constexpr_function applies to a function definition")
            return ConstexprFunction(fn.fn, self.mod)
        if isinstance(fn, Kernel):
            return replace(fn, wrappers=fn.wrappers + (path,))
        if isinstance(fn, Function) and (path in _JIT):
            return Kernel(fn.fn, self.mod, (path,))
        if isinstance(fn, Function):  # heuristics/autotune under a jit applied later: Triton needs jit first
            raise self.src.error(node, f"`{path}` wraps a @triton.jit function; apply triton.jit first")
        raise self.src.error(node, f"`{path}` is applied to {type(fn).__name__}, not a function")


class ProjectFunction:
    """A function of the project's modules handed to another evaluator (the decorator reader): called, it runs in
    the module executor of the module that defines it, on evaluated arguments."""

    def __init__(self, project: Project, fn: Function):
        self.project, self.fn = project, fn

    def call(self, values: list, kwargs: dict):
        """`fn(*values, **kwargs)` as the module's executor runs it; errors are located in the function's file."""
        home = self.project.home[self.fn.fn]
        return _Executor(self.project, home).apply(self.fn, values, self.fn.fn, kwargs)


def read_module(project: Project, name: str) -> ModuleValue:
    """Project.module(name), an import that fails (Python's ImportError) raised as a located
    CompilationError naming the import."""
    try:
        return project.module(name)
    except _ImportFailed as e:
        where = e.src.loc(e.node) if e.src is not None and e.node is not None else None
        raise CompilationError(f"cannot import `{e.name}`: it is neither a module of the project's source roots "
                               "nor one Triton 3.6 has (Python would raise ImportError here)", where) from None


def lookup(mod: ModuleValue, name: str):
    """The value `name` has in `mod` once executed; None when unbound. An Unreadable binding raises
    its located error."""
    value = mod.namespace.get(name)
    if isinstance(value, Unreadable):
        raise value.error
    return value
