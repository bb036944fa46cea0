"""ttbuild.pyeval is a leaf: standard library, ttbuild.errors and itself; the frontend reaches it, never the runtime."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PYEVAL = Path(__file__).resolve().parents[2] / "ttbuild" / "pyeval"
FRONTEND = PYEVAL.parent / "frontend"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    out |= {("." * n.level) + (n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return out


def test_pyeval_imports_only_the_standard_library_errors_and_itself():
    for path in PYEVAL.glob("*.py"):
        for name in _imports(path):
            ok = name.startswith(".") or name == "ttbuild.errors" or name.split(".")[0] in sys.stdlib_module_names
            assert ok, f"{path.name} imports {name}"


def test_no_arrow_from_the_frontend_into_the_runtime():
    for path in FRONTEND.glob("*.py"):
        assert not any(n.startswith(("ttbuild.runtime", "..runtime")) for n in _imports(path)), path.name
