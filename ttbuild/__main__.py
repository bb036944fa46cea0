"""`python -m ttbuild` / `ttbuild`: the command line in ttbuild.cli (same task graph and state DB as `doit` in the repo root); `ttbuild package` and `ttbuild tune` need only the runtime install.

A runtime-only install (`pip install ttbuild`, no `[compiler]` extra) runs `ttbuild package`
and answers every other command with the line that installs the compiler (exit status 2).
"""

from __future__ import annotations

import sys

# Top-level modules of the compiler extra (pyproject.toml, [project.optional-dependencies] compiler).
COMPILER_MODULES = ("doit", "xxhash", "rich", "llvmlite", "mlir")


def main(argv: list[str] | None = None) -> int:
    """Run the ttbuild command line; returns its exit status (see ttbuild.cli)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["package"]:
        from ttbuild.wheel import main as package_main

        return package_main(args[1:])
    if args[:1] == ["tune"]:  # runs where the library is used: runtime, torch and a GPU, no compiler
        from ttbuild.runtime.tuner import main as tune_main

        return tune_main(args[1:])
    try:
        from ttbuild.cli import main as cli_main
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in COMPILER_MODULES:
            raise
        print(f"ttbuild: building kernels needs the compiler ({exc.name} is not installed): "
              "pip install 'ttbuild[compiler]'", file=sys.stderr)
        return 2
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
