"""The names a static module read recognises (jit and its wrappers, env and version reads, device probes) and its namespace views.

Standard library only, as the rest of ttbuild.pyeval.
"""

from __future__ import annotations

import ast

_JIT = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"}
_WRAPPERS = {"triton.heuristics", "triton.autotune", "triton.runtime.heuristics", "triton.runtime.autotune",
             "triton.runtime.autotuner.heuristics", "triton.runtime.autotuner.autotune"}
_CONSTEXPR = {"triton.language.constexpr", "triton.language.core.constexpr"}
_CONSTEXPR_FUNCTION = {"triton.constexpr_function", "triton.language.constexpr_function",
                       "triton.language.core.constexpr_function"}
_ENV_GET = {"os.environ.get", "os.getenv"}
_VERSION = {"packaging.version.parse", "packaging.version.Version", "pkg_resources.parse_version"}
# A third-party `Version(...)` of a string (re-exported by a project's helper module) is packaging's.
_VERSION_NAMES = {"Version", "parse_version"}
# Which device the program runs on, as the variant's target (a CUDA GPU) answers it.
_DEVICE_PROBES = {"torch.cuda.is_available": True, "torch.xpu.is_available": False, "torch.npu.is_available": False,
                  "torch.mlu.is_available": False, "torch.mps.is_available": False,
                  "torch.backends.mps.is_available": False, "transformers.utils.is_torch_npu_available": False,
                  "transformers.utils.is_torch_xpu_available": False,
                  "transformers.utils.import_utils.is_torch_npu_available": False}
_CACHES = {"functools.cache", "functools.lru_cache"}  # decorators that leave what a call returns unchanged
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_OPERATORS = {"operator.ge": lambda a, b: a >= b, "operator.gt": lambda a, b: a > b,
              "operator.le": lambda a, b: a <= b, "operator.lt": lambda a, b: a < b,
              "operator.eq": lambda a, b: a == b, "operator.ne": lambda a, b: a != b}


class _Bindings:
    """The evaluator's view of a namespace: every name is a known value (kind "value")."""

    def __init__(self, ns: dict):
        self.ns = ns
        self.imports: dict[str, str] = {}

    @property
    def bindings(self):
        """The evaluator's view of the namespace (_View): each name bound as ("value", value)."""
        return _View(self.ns)


class _View:
    """A namespace as the evaluator's bindings read it: get(name) -> ("value", binding)."""

    def __init__(self, ns):
        self.ns = ns

    def get(self, name, default=None):
        """("value", the binding) for a bound `name`, else `default`."""
        return ("value", self.ns[name]) if name in self.ns else default

    def __contains__(self, name):
        return name in self.ns


def _handler_names(handler: ast.ExceptHandler) -> set[str] | None:
    """The exception class names an `except` catches (None: a bare `except:` catches all)."""
    if handler.type is None:
        return None
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The module-level names a statement binds (imports, defs, classes, assignment targets)."""
    out = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
    return out
