"""ttbuild/'s size rules (issue 29): modules <= 600 lines, lines <= 200 characters, no new 80+ line function, public docstrings >= 90 %."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "ttbuild"
MAX_FILE_LINES = 600
MAX_LINE_CHARS = 200
LONG_FUNCTION = 80
# The functions of LONG_FUNCTION lines or more that remain (issue 29 allows three; one is left): a new one
# fails, and one split below the limit must leave this list.
LONG_ALLOWED = {
    "graph/tasks.py:generate_tasks",
}
MIN_DOCSTRING_COVERAGE = 0.90


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        yield path.relative_to(ROOT).as_posix(), text, ast.parse(text)


def _defs(tree):
    """(qualified name, node) of every function and class, nested ones included."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield prefix + child.name, child
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)
    yield from walk(tree, "")


def test_no_module_over_600_lines_and_no_line_over_200_characters():
    big, wide = [], []
    for rel, text, _ in _modules():
        lines = text.splitlines()
        if len(lines) > MAX_FILE_LINES:
            big.append(f"{rel}: {len(lines)} lines")
        wide += [f"{rel}:{i}: {len(line)} characters" for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS]
    assert not big and not wide, "\n".join(big + wide)


def test_no_new_function_of_80_lines_or_more():
    long = {}
    for rel, _, tree in _modules():
        for name, node in _defs(tree):
            if not isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 >= LONG_FUNCTION:
                long[f"{rel}:{name.rsplit('.', 1)[-1]}"] = node.end_lineno - node.lineno + 1
    new = sorted(set(long) - LONG_ALLOWED)
    assert not new, f"functions of {LONG_FUNCTION}+ lines (split them into named steps): " + \
        ", ".join(f"{n} ({long[n]} lines)" for n in new)
    gone = sorted(LONG_ALLOWED - set(long))
    assert not gone, f"no longer {LONG_FUNCTION}+ lines, take them off LONG_ALLOWED: {', '.join(gone)}"


def test_public_docstring_coverage_is_at_least_90_percent():
    """Every function and class (methods and nested ones included) whose name does not start
    with `_` counts; at least MIN_DOCSTRING_COVERAGE of them carry a docstring."""
    public, missing = 0, []
    for rel, _, tree in _modules():
        for name, node in _defs(tree):
            if node.name.startswith("_"):
                continue
            public += 1
            if not ast.get_docstring(node):
                missing.append(f"{rel}:{node.lineno} {name}")
    coverage = 1 - len(missing) / public
    assert coverage >= MIN_DOCSTRING_COVERAGE, (
        f"public docstring coverage {coverage:.1%} < {MIN_DOCSTRING_COVERAGE:.0%}; without one:\n" + "\n".join(missing))
