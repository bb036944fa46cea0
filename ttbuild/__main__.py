"""`python -m ttbuild` / `ttbuild`: runs the same task graph as dodo.py through doit's DoitMain.

Usage: `ttbuild [--kernels DIR] [--artifacts DIR] [doit command and arguments]`, e.g.
`ttbuild` (build everything), `ttbuild list --all`, `ttbuild -n 2`, `ttbuild clean`.
Paths default to ./kernels and ./artifacts in the working directory.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run doit over the ttbuild graph; returns doit's exit status (0 ok, 1 a task failed,
    3 a bad variant list or command line)."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from ttbuild.build import namespace

    args = list(sys.argv[1:] if argv is None else argv)
    dirs = {"--kernels": "kernels", "--artifacts": "artifacts"}
    rest = []
    while args:
        arg = args.pop(0)
        flag, eq, value = arg.partition("=")
        if flag in dirs:
            if not eq:
                if not args:
                    print(f"ttbuild: {flag} needs a directory", file=sys.stderr)
                    return 3
                value = args.pop(0)
            dirs[flag] = value
        else:
            rest.append(arg)
    loader = ModuleTaskLoader(namespace(dirs["--kernels"], dirs["--artifacts"]))
    return DoitMain(loader).run(rest)


if __name__ == "__main__":
    sys.exit(main())
