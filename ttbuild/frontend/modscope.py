"""A kernel's globals as its module had them once Python executed it: fills the parse stage's imports, globals and @jit functions from ttbuild.pyeval's static module reader.

The file's own scan (canon.scan_module) places what a plain module spells out; this fills in what
only executing the module tells: imports under `if <version check>:` and `try/except ImportError`,
aliases (`fast_tanh = libdevice.tanh`), `triton`/`tl` re-exported by another project module,
constexpr globals of other modules, and kernels made by call (`f = triton.jit(f)`). Rule source:
Triton 3.6 (python/triton/runtime/jit.py, a JITFunction reads `fn.__globals__` when it compiles).
"""

from __future__ import annotations

import ast
import math

from ttbuild.errors import CompilationError
from ttbuild.pyeval.modules import Project, lookup, read_module
from ttbuild.pyeval.objects import Constexpr, ConstexprFunction, External, Kernel, ModuleValue, Opaque

_LITERALS = (int, float, bool, str, type(None))


class ModuleScope:
    """The executed module `module` of `project`, seen from the kernel file `file`, whose own
    scan is `info` (a canon.ModuleInfo, completed in place)."""

    def __init__(self, project: Project, module: str, info, file: str):
        self.project, self.info, self.file = project, info, file
        self.mod: ModuleValue = read_module(project, module)
        self.home: dict[str, ModuleValue] = {}  # @jit function name -> the module whose globals it sees
        # @triton.constexpr_function helpers a kernel calls: name -> their source (the ttir stage runs them)
        self.constexpr_functions: dict[str, str] = {}

    def find_kernel(self, kernel: str) -> None:
        """Adds `kernel` to the jit functions when executing the module makes it one (by call,
        through a re-exported triton); a name bound to something else is refused at its binding."""
        if kernel in self.info.jit_functions:
            return
        value = lookup(self.mod, kernel)
        if isinstance(value, Kernel):
            self.add(kernel, value)
        elif value is not None and not isinstance(value, Opaque):
            raise CompilationError(f"`{kernel}` in {self.file} is a {type(value).__name__} once the module has run, "
                                   "not a @triton.jit function")

    def add(self, name: str, value: Kernel) -> None:
        self.info.jit_functions[name] = value.fn
        self.home[name] = value.module

    def place(self, function: str, names: set[str]) -> set[str]:
        """Resolve the global `names` a @jit function reads in the module it was defined in; returns
        the names it reads through a project module (`ext.program_id`, now a name of its own)."""
        mod = self.home.get(function, self.mod)
        added: set[str] = set()
        local = _locals(self.info.jit_functions[function])
        for name in sorted(names - local):
            if name in self.info.jit_functions and mod is self.mod:
                continue
            old = self.info.imports.get(name)
            if name in self.info.globals and mod is self.mod:
                continue
            if old is not None and not self._in_project(old) and mod is self.mod:
                continue
            value = lookup(mod, name)
            if isinstance(value, Opaque):
                fn = self.info.jit_functions[function]
                use = next((n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name), fn)
                raise CompilationError(f"@jit function `{function}` reads the global `{name}`, whose value "
                                       f"({value.what}) only the running program knows: ttbuild reads modules "
                                       "without running them", mod.source.loc(use))
            if isinstance(value, ModuleValue):
                added |= self._module_attributes(self.info.jit_functions[function], name, value)
            self._place(name, value)
        return added

    def _module_attributes(self, fn: ast.FunctionDef, name: str, module: ModuleValue) -> set[str]:
        """`ext.helper` in `fn`, `ext` a project module (`from pkg.utils import ext`): Python reads
        the attribute of the executed module when Triton visits it, so each such read of a @jit
        function, constexpr function, constexpr or triton name becomes the name `ext.helper` placed
        from that module (the node rewritten in place, its position kept)."""
        added = set()
        for parent in ast.walk(fn):
            for field, child in ast.iter_fields(parent):
                for i, node in enumerate(child if isinstance(child, list) else [child]):
                    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                            and node.value.id == name and isinstance(node.ctx, ast.Load)):
                        continue
                    value = lookup(module, node.attr)
                    if not isinstance(value, (Kernel, ConstexprFunction, Constexpr, External)):
                        continue
                    dotted = f"{name}.{node.attr}"
                    new = ast.copy_location(ast.Name(dotted, ast.Load()), node)
                    if isinstance(child, list):
                        child[i] = new
                    else:
                        setattr(parent, field, new)
                    self._place(dotted, value)
                    added.add(dotted)
        return added

    def _in_project(self, path: str) -> bool:
        parts = path.split(".")
        return any(".".join(parts[:i]) in self.project.files for i in range(1, len(parts) + 1))

    def _place(self, name: str, value) -> None:
        info = self.info
        if isinstance(value, Kernel):
            if name in info.jit_functions and info.jit_functions[name] is not value.fn:
                raise CompilationError(f"`{name}` names two different @jit functions of the project's modules; "
                                       f"{self.file} cannot inline both under one name")
            self.add(name, value)
        elif isinstance(value, External):
            info.imports[name] = value.path
        elif isinstance(value, ConstexprFunction):
            fn = value.fn
            fn = ast.FunctionDef(fn.name, fn.args, fn.body, [], fn.returns, fn.type_comment)
            self.constexpr_functions[name] = ast.unparse(ast.fix_missing_locations(fn))
        elif isinstance(value, Constexpr) and _json_value(value.value) is not _NO:
            info.globals[name] = {"constexpr": True, "value": _json_value(value.value)}
        elif _json_value(value) is not _NO and value is not None:
            info.globals[name] = {"constexpr": False, "value": _json_value(value)}


_NO = object()


def _json_value(value):
    if isinstance(value, float) and not math.isfinite(value):
        return _NO
    if isinstance(value, _LITERALS):
        return value
    if isinstance(value, tuple) and all(isinstance(v, _LITERALS) for v in value):
        return list(value)
    return _NO


def _locals(fn: ast.FunctionDef) -> set[str]:
    """Parameters and names a function assigns: they shadow module globals."""
    a = fn.args
    out = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    out |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return out
