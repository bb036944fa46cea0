"""ttbuild: Triton-language kernels compiled ahead of time as an incremental build; `jit` marks kernels.

`ttbuild.compile(...)` compiles one kernel in memory (ttbuild.compiler). Importing this package is
cheap: it pulls in neither MLIR, llvmlite, doit nor CUDA, so the
runtime (`ttbuild.runtime`) and kernel source files (`@ttbuild.jit`) can import it anywhere.
"""

from .errors import CompilationError, TTBuildError  # the errors `ttbuild.compile` raises (standard library only)

__version__ = "0.1.0"
__all__ = ["CompilationError", "JITFunction", "TTBuildError", "compile", "jit"]


class JITFunction:
    """A `@jit` function as seen from Python: a marker that keeps the function and its name.

    ttbuild never runs kernel bodies in Python; the compiler reads the source file's AST. Calling
    a JITFunction from Python raises TypeError, as in Triton outside a kernel.
    """

    def __init__(self, fn, **options):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.options = options

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"{self.__name__} is a @jit kernel: build it with `doit` and launch it through "
            f"ttbuild.runtime.load('artifacts').{self.__name__}[grid](...)")

    def __repr__(self):
        return f"JITFunction({self.__name__})"


def jit(fn=None, **options):
    """Mark a Triton-language function as a kernel or device function (`@ttbuild.jit`)."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)


def __getattr__(name: str):
    # `ttbuild.compile` loads the driver on first use: `import ttbuild` stays free of doit,
    # MLIR and llvmlite (kernel files and the runtime import it).
    if name == "compile":
        from ttbuild.compiler import compile

        return compile
    raise AttributeError(f"module 'ttbuild' has no attribute {name!r}")
