"""The stage table (ttbuild.stages): one plan for every driver, declared options only, the graph above the driver."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ttbuild.compiler import compile as tt_compile
from ttbuild.compiler import run_stage
from ttbuild.stages import (
    DEFAULT,
    FILE,
    SOURCE,
    STAGES,
    DeclaredOptions,
    StageContractError,
    StageSet,
    declared_options,
)


def test_every_stage_is_declared_once_with_its_module_roles_and_files():
    assert DEFAULT.names == STAGES == ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")
    for stage in DEFAULT:
        module = DEFAULT.module(stage.name)
        assert isinstance(module.VERSION, int) and callable(module.run)
        assert set(stage.files) == set(stage.outputs) and stage.product == stage.outputs[0]
        assert stage.parent is None or stage.input in DEFAULT[stage.parent].outputs
    assert DEFAULT.stage_of_suffix(".ll") == "llir" and DEFAULT.stage_of_suffix(".cubin") is None


def test_plan_wires_each_stage_to_its_parent_or_the_source():
    steps = DEFAULT.plan("cubin")
    assert [s.stage.name for s in steps] == list(STAGES)
    assert steps[0].inputs == {"source": (SOURCE, "source")}
    assert steps[2].inputs == {"ttir": ("ttir", "ttir")}
    (ptx, cubin) = DEFAULT.plan("cubin", start="llir")
    assert ptx.inputs == {"llir": (SOURCE, "llir")} and cubin.inputs == {"ptx": ("ptx", "ptx")}
    # a debug ttir also reads the parse loc table, and only then
    debug = {s.stage.name: s.inputs for s in DEFAULT.plan("ttir", options={"ttir": {"debug": True}})}
    assert debug["ttir"] == {"json": ("parse", "json"), "loc": ("parse", "loc")}
    assert DEFAULT.plan("ttir", options={"ttir": {}})[1].inputs == {"json": ("parse", "json")}
    # extra input files the graph finds: only for a stage that declares them
    found = {"parse": {"helpers": (FILE, "kernels/helpers.py")}}
    assert DEFAULT.plan("parse", extra=found)[0].inputs == {"source": (SOURCE, "source"),
                                                            "helpers": (FILE, "kernels/helpers.py")}
    with pytest.raises(StageContractError, match="ttir declares no extra input"):
        DEFAULT.plan("ttir", extra={"ttir": {"x": (SOURCE, "x")}})
    with pytest.raises(ValueError, match="until must be one of"):
        DEFAULT.plan("sass")
    with pytest.raises(ValueError, match="nothing to run"):
        DEFAULT.plan("ptx", start="ptx")


def test_a_stage_reading_an_option_it_does_not_declare_is_an_error():
    opts = DeclaredOptions("llir", {"target": "cuda:90", "num_warps": 8})
    assert opts["target"] == "cuda:90" and opts.get("debug", False) is False  # declared, absent: its default
    with pytest.raises(StageContractError, match="llir read option 'num_warps'"):
        opts.get("num_warps")
    view = declared_options("llir", opts)
    assert view.arch == "sm_90a" and view.enable_fp_fusion is True
    with pytest.raises(StageContractError, match="llir read option 'num_warps'"):
        view.num_warps  # noqa: B018 (the read is the test)
    with pytest.raises(StageContractError, match="ptx read option 'target'"):
        DeclaredOptions("ptx", {"target": "cuda:90"})["target"]


def test_the_driver_hands_a_stage_only_its_declared_options(tmp_path, monkeypatch):
    pkg = tmp_path / "peeking_stages"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for stage in STAGES:
        (pkg / f"{stage}.py").write_text(textwrap.dedent(f"""
            VERSION = 1
            def run(inputs, options):
                {'options["num_warps"]' if stage == "llir" else 'None'}
                return {{role: b"x" for role in {DEFAULT[stage].outputs!r}}}
            """))
    monkeypatch.syspath_prepend(str(tmp_path))
    stages = StageSet("peeking_stages")
    out, cached = run_stage("ttgir", {"ttir": b""}, {"num_warps": 8}, package=stages)
    assert out == {"ttgir": b"x"} and not cached
    with pytest.raises(StageContractError, match="llir read option 'num_warps'"):
        run_stage("llir", {"ttgir": b""}, {"target": "cuda:90", "num_warps": 8}, package=stages)
    with pytest.raises(StageContractError):
        tt_compile("x", start="ttgir", until="llir", package=stages)


def test_the_driver_imports_neither_the_graph_nor_the_frontend():
    code = ("import sys, ttbuild.compiler; "
            "print(sorted(m for m in sys.modules if m.startswith(('ttbuild.graph', 'ttbuild.frontend', 'doit'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_stage_set_pickles_to_an_equal_one():
    """doit's -j workers receive each action's arguments pickled, the stage set among them."""
    import pickle

    for stages in (DEFAULT, StageSet("fake_stages")):
        stages.names  # noqa: B018 (memos are not pickled)
        assert pickle.loads(pickle.dumps(stages)) == stages
