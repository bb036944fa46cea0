"""The one FileCheck helper of the tests: run the `filecheck` package's FileCheck over IR text, with the CHECK lines from a side file or a string."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FILECHECK = Path(sys.executable).parent / "filecheck"  # console script of the `filecheck` package


def filecheck(text: bytes | str, checks: Path | str, tmp_path: Path, *, prefix: str | None = None) -> None:
    """Assert that `text` (IR of any stage) matches `checks`: a check file (Path), or the CHECK
    lines themselves (str). `prefix` selects another check prefix (FileCheck --check-prefix).
    The assertion message carries FileCheck's report and the input."""
    inp = tmp_path / "filecheck.input"
    inp.write_bytes(text.encode() if isinstance(text, str) else text)
    if isinstance(checks, str):
        chk = tmp_path / "filecheck.checks"
        chk.write_text(checks)
    else:
        chk = checks
    cmd = [str(FILECHECK), str(chk), "--input-file", str(inp)] + (["--check-prefix", prefix] if prefix else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr + "\n--- input ---\n" + inp.read_text(errors="replace")
