"""A project's kernels through the build graph: rows by file or module; an edit reruns exactly the parses that depend on it.

The edit is to an imported module, or to an environment variable a module read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1] / "data" / "projects" / "mixproj"
NORM = {"row_rms", "scaled_squash", "total", "halves"}  # the rows whose module (mixpkg.ops.norm) imports the others


@pytest.fixture
def built(tmp_path, new_project):
    """The project built to TTIR once, with MIXPROJ_ROWS=2."""
    src = tmp_path / "src"
    shutil.copytree(PROJECT, src / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    proj = new_project(tmp_path / "p", "real", source=src)
    proj.env["MIXPROJ_ROWS"] = "2"
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text
    # every row to TTIR; `total` (MODE defaults to another module's constexpr) on to cubin and lib/
    assert {n.split(":")[0] for n in run.ran} == {"parse", "ttir", "ttgir", "llir", "ptx", "cubin", "meta"}
    assert len(run.ran) == 15 and (proj.artifacts / "lib" / "total.cubin").is_file(), run.text
    return proj


def _rows(run, stage: str) -> set[str]:
    """The rows (by the `-> name` of the task's doc) whose `stage` task ran."""
    return {run.docs[t].rsplit("-> ", 1)[1] for t in run.ran if t.startswith(stage + ":")}


def test_editing_an_imported_module_reruns_exactly_its_importers(built):
    built.edit("src/mixpkg/compat.py", "squash = tanh\n", "# the squashing function\nsquash = tanh\n")
    run = built.ttbuild("build")
    assert run.rc == 0, run.text
    assert _rows(run, "parse") == NORM  # not `plain`, whose module imports nothing of the project
    assert _rows(run, "ttir") == set()  # early cutoff: the parse outputs are unchanged


def test_a_semantic_edit_of_an_imported_module_reaches_ttir(built):
    built.edit("src/mixpkg/consts.py", "PLAIN_LIMIT = 7\n", "PLAIN_LIMIT = 9\n")
    run = built.ttbuild("build")
    assert run.rc == 0, run.text
    assert _rows(run, "parse") == NORM
    assert _rows(run, "ttir") == {"scaled_squash"}  # the one kernel whose default reads it


def test_changing_an_environment_variable_a_module_read_reruns_it(built):
    built.env["MIXPROJ_ROWS"] = "3"
    run = built.ttbuild("build")
    assert run.rc == 0, run.text
    assert _rows(run, "parse") == NORM
    assert _rows(run, "ttir") == {"scaled_squash"}
    built.env["UNRELATED_VARIABLE"] = "1"
    assert built.ttbuild("build").ran == set()


def test_a_module_row_that_names_nothing_is_refused_at_the_field(built):
    text = (built.kernels / "variants.toml").read_text().replace('module = "mixpkg.ops.plain"',
                                                                 'module = "mixpkg.ops.nothere"')
    (built.kernels / "variants.toml").write_text(text)
    run = built.ttbuild("build")
    assert run.rc != 0
    assert "variants.toml:" in run.text and "field 'module': no mixpkg/ops/nothere.py" in run.text
