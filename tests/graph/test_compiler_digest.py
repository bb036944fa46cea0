"""Compiler edits invalidate (issue 14, item 1): every stage key names the source of what the stage runs (ttbuild.codedigest), so an edit reruns the stages it can affect, is never served from the cache, and `explain` says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ttbuild.codedigest import closure, stage_digest

REPO = Path(__file__).parents[2]
FAKE = Path(__file__).parents[1] / "fake_stages"


def test_closure_is_what_the_stage_runs():
    ttgir = closure("ttbuild.stages.ttgir")
    assert "ttbuild.backend.ttgir.remove_layout_conversions" in ttgir
    assert "ttbuild.backend.analysis.allocation" in ttgir
    # neither the build graph, the cache, the runtime nor other stages' code
    assert not [m for m in ttgir if m.startswith(("ttbuild.graph", "ttbuild.cache", "ttbuild.runtime",
                                                  "ttbuild.backend.llir", "ttbuild.frontend"))]
    ptx = closure("ttbuild.stages.ptx")
    assert "ttbuild.backend.nvptx.llvm" in ptx and "ttbuild.backend.ttgir.passes" not in ptx
    assert len({stage_digest(s) for s in ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")}) == 6


def test_statement_walk_finds_every_import_ast_walk_finds():
    """codedigest walks statement lists only (an import is a statement): on every file of
    ttbuild and the test doubles, it finds the same imports as a walk of the whole tree."""
    import ast

    from ttbuild.codedigest import _statements

    files = [*(REPO / "ttbuild").rglob("*.py"), *FAKE.rglob("*.py")]
    assert len(files) > 100
    for path in files:
        tree = ast.parse(path.read_bytes())
        want = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        got = [n for n in _statements(tree.body) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert sorted(map(id, got)) == sorted(map(id, want)), path
    nested = ast.parse("try:\n    pass\nexcept E:\n    import a\nelse:\n    import b\nfinally:\n"
                       "    import c\nmatch x:\n    case 1:\n        import d\n"
                       "def f():\n    class K:\n        def g(self):\n            with h:\n"
                       "                for i in j:\n                    import e\n")
    assert sorted(n.names[0].name for n in _statements(nested.body) if isinstance(n, ast.Import)) == list("abcde")


def _digest_in(root: Path, stage: str, **env) -> str:
    code = f"from ttbuild.codedigest import stage_digest; print(stage_digest({stage!r}))"
    return subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONPATH": str(root), "PATH": "", **env},
                          capture_output=True, text=True, check=True).stdout.strip()


def test_an_edit_changes_the_digest_of_the_stages_that_run_it_only(tmp_path):
    shutil.copytree(REPO / "ttbuild", tmp_path / "ttbuild", ignore=shutil.ignore_patterns("__pycache__"))
    before = {s: _digest_in(tmp_path, s) for s in ("ttgir", "ptx")}
    assert before == {"ttgir": stage_digest("ttgir"), "ptx": stage_digest("ptx")}
    llvm = tmp_path / "ttbuild" / "backend" / "nvptx" / "llvm.py"
    llvm.write_text(llvm.read_text().replace("def emit_ptx(", "def emit_ptx(  # edited\n    ", 1))
    after = {s: _digest_in(tmp_path, s) for s in ("ttgir", "ptx")}
    assert after["ptx"] != before["ptx"] and after["ttgir"] == before["ttgir"]
    runtime = tmp_path / "ttbuild" / "runtime" / "__init__.py"
    runtime.write_text(runtime.read_text() + "\n# edited\n")
    assert _digest_in(tmp_path, "ptx") == after["ptx"]


def _edit_fake_ptx(stages: Path) -> None:
    """What the reviewers did: change what the ptx stage emits, bump nothing."""
    f = stages / "fake_stages" / "ptx.py"
    f.write_text(f.read_text().replace('return lower("ptx", inputs, options)',
                                       'return {k: b"// edited\\n" + v for k, v in lower("ptx", inputs, options).items()}'))


def test_a_compiler_edit_reruns_its_stage_and_is_not_served_from_the_cache(tmp_path, new_project):
    stages = tmp_path / "stages"
    shutil.copytree(FAKE, stages / "fake_stages", ignore=shutil.ignore_patterns("__pycache__"))
    proj = new_project(tmp_path / "p")
    proj.pythonpath = f"{REPO}{os.pathsep}{stages}"
    proj.env = {"TTBUILD_CACHE_DIR": str(tmp_path / "cache")}
    remote = tmp_path / "shared"  # a remote tier too; the walk before the build finds no output missing
    remote.mkdir()
    first = proj.ttbuild("build", "--cache", str(remote))
    assert first.rc == 0, first.text
    _edit_fake_ptx(stages)
    second = proj.ttbuild("build", "-j", "2", "--cache", str(remote))
    assert second.rc == 0, second.text
    # outputs present but stale: stages compile, so the build keeps its worker processes
    assert "building in this process" not in second.out, second.out
    ptx_ran = {t for t in second.ran if t.startswith("ptx:")}
    assert ptx_ran, second.text                           # reran, not "up to date"
    assert not {t for t in second.cached if t.startswith("ptx:")}, second.text   # and not from the cache
    assert not {t for t in second.ran if t.startswith(("parse:", "ttir:", "ttgir:", "llir:"))}, second.text
    ptx_out = [p for p in (proj.artifacts / "ptx").rglob("*") if p.is_file()]
    assert ptx_out and all(p.read_bytes().startswith(b"// edited\n") for p in ptx_out)


def test_explain_names_a_compiler_edit(tmp_path, new_project):
    stages = tmp_path / "stages"
    shutil.copytree(FAKE, stages / "fake_stages", ignore=shutil.ignore_patterns("__pycache__"))
    proj = new_project(tmp_path / "p")
    proj.pythonpath = f"{REPO}{os.pathsep}{stages}"
    assert proj.ttbuild("build").rc == 0
    variant = proj.ttbuild("list").out.split()[0]
    _edit_fake_ptx(stages)
    out = proj.run(proj.ttbuild_argv("explain", variant)).stdout
    assert "compiler changed: the source ptx runs" in out, out
    assert "compiler changed (the source of what this stage runs" in out, out
    assert "ptx    would run" in out, out


def _digest_without_walk(root: Path, stage: str, **env) -> subprocess.CompletedProcess:
    """stage_digest in a fresh process whose import walk fails: answers only from the memo."""
    code = ("import ttbuild.codedigest as cd\n"
            "def walk(*a, **k): raise SystemExit('walked')\n"
            f"cd.closure = walk\nprint(cd.stage_digest({stage!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONPATH": str(root), "PATH": "", **env},
                          capture_output=True, text=True)


def test_the_digest_memo_answers_for_the_same_sources_only(tmp_path):
    """The first process of a source tree writes its digests beside the bytecode; a later one
    with the same sources skips the import walk; an edit anywhere in the package, a damaged
    memo or PYTHONDONTWRITEBYTECODE make it walk again."""
    shutil.copytree(REPO / "ttbuild", tmp_path / "ttbuild", ignore=shutil.ignore_patterns("__pycache__"))
    pycache = tmp_path / "ttbuild" / "__pycache__"
    assert _digest_in(tmp_path, "ptx", PYTHONDONTWRITEBYTECODE="1") == stage_digest("ptx")
    assert not list(pycache.glob("codedigest.*.json")) if pycache.exists() else True
    assert "walked" in _digest_without_walk(tmp_path, "ptx").stderr
    first = _digest_in(tmp_path, "ptx")
    assert first == stage_digest("ptx")
    (memo,) = pycache.glob("codedigest.*.json")
    hit = _digest_without_walk(tmp_path, "ptx")
    assert hit.returncode == 0, hit.stderr
    assert hit.stdout.strip() == first
    # an edit the ptx stage never runs still changes the tree: walked again, same digest, one memo
    runtime = tmp_path / "ttbuild" / "runtime" / "__init__.py"
    runtime.write_text(runtime.read_text() + "\n# edited\n")
    assert "walked" in _digest_without_walk(tmp_path, "ptx").stderr
    assert _digest_in(tmp_path, "ptx") == first
    (new_memo,) = pycache.glob("codedigest.*.json")
    assert new_memo != memo
    new_memo.write_text("{not json")
    assert "walked" in _digest_without_walk(tmp_path, "ptx").stderr
    assert _digest_in(tmp_path, "ptx") == first


def test_the_digest_memo_keeps_stage_packages_outside_ttbuild_apart(tmp_path):
    """A stage package of its own (test doubles, a plugin) is a second root: its entries sit in
    the same memo under its own sources' digest, beside ttbuild's stages', and an edit to it is
    seen although ttbuild's sources, and so the memo file, stay the same."""
    shutil.copytree(REPO / "ttbuild", tmp_path / "ttbuild", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "mystages").mkdir()
    (tmp_path / "mystages" / "__init__.py").write_text("")
    ptx = tmp_path / "mystages" / "ptx.py"
    ptx.write_text("VERSION = 1\n\ndef run(inputs, options):\n    from ttbuild.options import Options\n    return {}\n")

    def digest(module: str, walk: bool = True) -> subprocess.CompletedProcess:
        code = ("import ttbuild.codedigest as cd\n"
                + ("" if walk else "def walk(*a, **k): raise SystemExit('walked')\ncd.closure = walk\n")
                + f"print(cd.module_digest({module!r}))")
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": ""},
                              capture_output=True, text=True)

    mine, theirs = digest("mystages.ptx").stdout.strip(), digest("ttbuild.stages.ptx").stdout.strip()
    assert mine and theirs == stage_digest("ptx")
    (memo,) = (tmp_path / "ttbuild" / "__pycache__").glob("codedigest.*.json")
    # both answered from the one memo, neither entry pushed out by the other
    assert digest("mystages.ptx", walk=False).stdout.strip() == mine
    assert digest("ttbuild.stages.ptx", walk=False).stdout.strip() == theirs
    ptx.write_text(ptx.read_text().replace("return {}", "return {'ptx': b''}"))
    assert "walked" in digest("mystages.ptx", walk=False).stderr
    edited = digest("mystages.ptx").stdout.strip()
    assert edited and edited != mine
    assert list((tmp_path / "ttbuild" / "__pycache__").glob("codedigest.*.json")) == [memo]
    assert digest("ttbuild.stages.ptx", walk=False).stdout.strip() == theirs
