"""The values a module-level read produces: opaque externals, project modules, @jit kernels, constexprs, versions, device facts; standard library only."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# Triton 3.6, the language ttbuild compiles: what `triton.__version__` and
# `importlib.metadata.version("triton")` answer when a module checks the version.
TRITON_VERSION = "3.6.0"
WARP_SIZE = 32  # every NVIDIA GPU ttbuild targets (CUDA C Programming Guide, "Compute Capabilities")

# The triton modules an `import` may name (Triton 3.6's package layout): a `try:` whose import
# names one of these resolves; one that names another triton module raises ImportError, as Python
# would, and the `except ImportError` branch runs.
TRITON_MODULES = frozenset({
    "triton", "triton.language", "triton.language.core", "triton.language.math", "triton.language.semantic",
    "triton.language.standard", "triton.language.extra", "triton.language.extra.libdevice",
    "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice", "triton.runtime", "triton.runtime.jit",
    "triton.runtime.autotuner", "triton.runtime.driver", "triton.compiler", "triton.testing", "triton.tools",
    "triton.tools.tensor_descriptor", "triton.backends", "triton.knobs",
})


class NeedsValue(Exception):
    """Raised when an opaque value's truth, equality or arithmetic is asked for: the evaluator
    turns it into a located error naming the construct."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class External:
    """A value of a module the reader does not read (triton, torch, os...): its dotted path.
    Truth and equality are unknown (NeedsValue), so nothing silently takes a branch on it."""

    path: str

    def __bool__(self):
        raise NeedsValue(f"`{self.path}`")

    def __eq__(self, other):
        if isinstance(other, External):
            return self.path == other.path
        raise NeedsValue(f"`{self.path}`")

    def _unknown(self, *_):
        raise NeedsValue(f"`{self.path}`")

    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __iter__ = _unknown

    def __hash__(self):
        return hash(self.path)


@dataclass(frozen=True, eq=False)
class Opaque:
    """The result of calling something the reader cannot run (`torch.cuda.is_available()`):
    usable as long as nobody needs its value."""

    what: str
    why: str = ""  # how it came to be unknown, said after its name (a call into a package outside the roots)

    def __bool__(self):
        raise NeedsValue(f"`{self.what}`{self.why}")

    def __eq__(self, other):
        raise NeedsValue(f"`{self.what}`{self.why}")

    def _unknown(self, *_):
        raise NeedsValue(f"`{self.what}`{self.why}")

    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __iter__ = _unknown

    def __hash__(self):
        return id(self)


@dataclass(eq=False)
class Unreadable:
    """A name whose binding could not be read (a statement the reader refuses, an undecidable
    `if`): the located error is raised when, and only when, a kernel needs the name."""

    error: Exception


@dataclass(eq=False)
class ModuleValue:
    """A module of the project: its dotted `name`, file (as diagnostics name it) and namespace."""

    name: str
    file: str
    is_package: bool = False
    namespace: dict = field(default_factory=dict)
    source: object = None  # the values.Source of its text, to place errors
    tree: ast.Module | None = None
    stars: list = field(default_factory=list)  # third-party modules of `from X import *`: names unknown


@dataclass(frozen=True)
class Constexpr:
    """`tl.constexpr(value)` at module level: a global a kernel may read (Triton's rule)."""

    value: object


@dataclass(frozen=True, eq=False)
class Kernel:
    """A `@jit` function: its def, the module whose globals it sees, and the wrappers applied
    (dotted paths, innermost first: `triton.jit`, `triton.heuristics`, `triton.autotune`); `tuning`
    is the autotuner.Tuning of an Autotuner constructed by the project's code (a decorator factory
    of its own), which the decorator reader takes where it sees no `@triton.autotune`."""

    fn: ast.FunctionDef
    module: ModuleValue
    wrappers: tuple[str, ...] = ("triton.jit",)
    tuning: object = None

    @property
    def arg_names(self) -> list[str]:
        """JITFunction.arg_names: the parameter names, in order."""
        a = self.fn.args
        return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


@dataclass(frozen=True, eq=False)
class ConstexprFunction:
    """`@triton.constexpr_function`: a Python function a kernel calls on constexprs at compile time."""

    fn: ast.FunctionDef
    module: ModuleValue


@dataclass(frozen=True, eq=False)
class Wrapper:
    """`triton.heuristics({...})`, `triton.autotune(...)`, `triton.jit(**options)`: applied to a
    function it makes (or wraps) a Kernel; its arguments are read by ttbuild.frontend.autotune."""

    path: str


@dataclass(frozen=True, order=True)
class Version:
    """`packaging.version.Version(text)` for release versions ("3.6.0", "2.4"): compares as
    packaging does on the release numbers (trailing zeros ignored)."""

    release: tuple

    @classmethod
    def parse(cls, text: str) -> "Version":
        """The Version of "3.6.0", "v2.4" ...: its leading dotted numbers, trailing zeros dropped. Raises ValueError
        (as packaging's InvalidVersion) when there are none."""
        m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
        if not m:
            raise ValueError(f"Invalid version: {text!r}")
        parts = [int(p) for p in m.group(1).split(".")]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return cls(tuple(parts))


@dataclass(frozen=True)
class DeviceProperties:
    """`torch.cuda.get_device_properties(...)` of the variant's target: the facts one target fixes, and the
    SM count and name of the row's GPU model (None when it names none)."""

    capability: int
    sm_count: int | None = None
    name: str | None = None

    @property
    def major(self) -> int:
        """The target's major compute capability (9 for cuda:90)."""
        return self.capability // 10

    @property
    def minor(self) -> int:
        """The target's minor compute capability (0 for cuda:90)."""
        return self.capability % 10

    @property
    def shared_memory_per_block(self) -> int:  # the static limit, 48 KB on every target
        return 49152

    @property
    def shared_memory_per_block_optin(self) -> int:
        """Fixed by the compute capability (CUDA C++ Programming Guide, "Technical Specifications
        per Compute Capability"; the same rule as ttbuild.target.Target.max_shared_bytes, which
        this leaf package may not import: tests/pyeval check they agree)."""
        major, minor = divmod(self.capability, 10)
        if major >= 10 and major != 12 or (major, minor) == (9, 0):
            return 232448
        if (major, minor) in ((8, 0), (8, 7)):
            return 166912
        return 101376 if major in (8, 12) or major > 9 else 98304


@dataclass(frozen=True)
class GPUTarget:
    """`triton.runtime.driver.active.get_current_target()` on the variant's target: Triton 3.6's
    GPUTarget (python/triton/backends/compiler.py) with backend "cuda", arch the capability (90)."""

    capability: int

    @property
    def backend(self) -> str:
        return "cuda"

    @property
    def arch(self) -> int:
        return self.capability

    @property
    def warp_size(self) -> int:
        return WARP_SIZE


# Triton 3.6's parameters of the decorators a project may inspect (`"cache_results" in
# inspect.signature(triton.autotune).parameters`), python/triton/runtime/autotuner.py and jit.py.
SIGNATURES = {
    "triton.autotune": ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "pre_hook",
                        "post_hook", "warmup", "rep", "use_cuda_graph", "do_bench", "cache_results"),
    "triton.heuristics": ("values",),
    "triton.jit": ("fn", "version", "repr", "launch_metadata", "do_not_specialize", "do_not_specialize_on_alignment",
                   "debug", "noinline"),
}


@dataclass(frozen=True)
class Signature:
    """`inspect.signature(f)` of a triton decorator in SIGNATURES: `.parameters` names them."""

    names: tuple

    @property
    def parameters(self) -> dict:
        return dict.fromkeys(self.names)
