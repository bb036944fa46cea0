"""`python -m ttbuild` / `ttbuild`: the command line in ttbuild.cli (same task graph and state DB as `doit` in the repo root)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ttbuild command line; returns its exit status (see ttbuild.cli)."""
    from ttbuild.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
