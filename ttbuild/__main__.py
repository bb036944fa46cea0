"""`python -m ttbuild` / `ttbuild`: the command line in ttbuild.cli (the task graph and state DB of `doit` in the repo root).

`ttbuild package`, `ttbuild record` and `ttbuild tune` need only the runtime install.

A runtime-only install (`pip install ttbuild`, no `[compiler]` extra) runs `ttbuild package`,
`ttbuild tune` and `ttbuild --help`, and answers every other command with the line that installs the compiler (exit status 2).
"""

from __future__ import annotations

import gc
import sys
from typing import Callable, NoReturn

# Top-level modules of the compiler extra (pyproject.toml, [project.optional-dependencies] compiler).
COMPILER_MODULES = ("doit", "xxhash", "rich", "llvmlite", "mlir")


def main(argv: list[str] | None = None) -> int:
    """Run the ttbuild command line; returns its exit status (see ttbuild.cli)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["package"]:
        from ttbuild.wheel import main as package_main

        return package_main(args[1:])
    if args[:1] == ["record"]:  # runs where Triton and the project run: no compiler
        from ttbuild.record.cli import main as record_main

        return record_main(args[1:])
    if args[:1] == ["serve"]:
        from ttbuild.record.cli import serve_main

        return serve_main(args[1:])
    if args[:1] == ["tune"]:  # runs where the library is used: runtime, torch and a GPU, no compiler
        from ttbuild.runtime.tunecli import main as tune_main

        return tune_main(args[1:])
    from ttbuild.cli import main as cli_main  # imports nothing of the compiler: `--help` works everywhere

    try:
        return cli_main(args)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in COMPILER_MODULES:
            raise
        print(f"ttbuild: building kernels needs the compiler ({exc.name} is not installed): "
              "pip install 'ttbuild[compiler]'", file=sys.stderr)
        return 2


def exit_with(command: Callable[[], int]) -> NoReturn:
    """Run `command` (a command line's main, returning its exit status) as this process's last
    work and exit with its status. The build graph it makes (about 500,000 objects in cycles for
    3000 variants) is never collected: collecting it after the build and again at interpreter
    shutdown cost 0.6 s of a 3.5 s no-op rebuild, to free memory the OS takes back whole
    (ttbuild.collector.exit_after_phase; frozen objects are left out of every collection, Python
    docs `gc.freeze`). atexit handlers and stream flushes still run."""
    from ttbuild.collector import exit_after_phase

    exit_after_phase()
    status = command()
    gc.freeze()
    sys.exit(status)


def run() -> NoReturn:
    """The `ttbuild` console script and `python -m ttbuild`."""
    exit_with(main)


if __name__ == "__main__":
    run()
