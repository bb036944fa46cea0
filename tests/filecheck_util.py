"""The one FileCheck helper of the tests and the golden-file convention: FileCheck over IR text with CHECK lines from a side file next to the kernel (or a string)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
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


# The golden convention: a kernel's CHECK lines live in a side file next to the kernel file,
# `<stem>.<stage>.check` or `<stem>.<variant>.<stage>.check` (stage: ttir, ttgir, llir, ptx).
# With a variant name, the variant comes from the folder's variants.toml; without one, the file's
# `# VARIANT: kernel=<name> signature=<sig> constexprs=<json>` line says what to build.
VARIANT_LINE = re.compile(r"# VARIANT: kernel=(\S+) signature=(\S+) constexprs=(.*)")


@dataclass(frozen=True)
class Golden:
    """One golden side file: `check`, the kernel `source` it sits next to, the `variant` named in
    its file name (or None), and the `stage` whose output it checks."""
    check: Path
    source: Path
    variant: str | None
    stage: str

    def variant_lines(self) -> list[tuple[str, list[str], dict]]:
        """(kernel, signature entries, constexprs) of each `# VARIANT:` line of the check file."""
        return [(k, s.split(","), json.loads(c)) for k, s, c in VARIANT_LINE.findall(self.check.read_text())]


def goldens(folder: Path, stage: str | None = None) -> list[Golden]:
    """The golden side files of `folder` (of one `stage`, or all), sorted by name."""
    out = []
    for check in sorted(folder.glob("*.check")):
        parts = check.name.split(".")
        stem, st = parts[0], parts[-2]
        variant = ".".join(parts[1:-2]) or None
        source = next((folder / f"{stem}{ext}" for ext in (".py", ".ttir") if (folder / f"{stem}{ext}").is_file()), None)
        assert source is not None, f"{check}: no kernel file {stem}.py / {stem}.ttir next to it"
        if stage is None or st == stage:
            out.append(Golden(check, source, variant, st))
    return out
