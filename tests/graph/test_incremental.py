"""Incremental behaviour of the doit graph: which tasks rerun after each kind of edit, asserted exactly.

Every test runs on a private copy of a project built once per session (its artifacts/ and
doit DB copied along, which also shows the state survives a move), on the fake stage set
and on the real compiler (skipped until all stage modules exist).
"""

from __future__ import annotations

import re
import sys

import pytest

from ttbuild.graph import chain, load_variants
from ttbuild.stages import StageSet

STAGE_PKG = {"fake": "fake_stages", "real": "ttbuild.stages"}


def _kernel_of(doc: str) -> str:
    return doc.split()[0]


def _settled(proj):
    """Run doit on an untouched copy: nothing may run; returns that run (task docs)."""
    run = proj.doit()
    assert run.rc == 0, run.text
    assert run.ran == set(), f"copy of a built project reran {sorted(run.ran)}"
    assert run.uptodate, run.text
    return run


def _keys(proj, stages, variant_name, monkeypatch, fake_root):
    monkeypatch.syspath_prepend(str(fake_root))
    (v,) = [v for v in load_variants(proj.kernels) if v.name == variant_name]
    return {node.stage: node.key for node in chain(v, StageSet(STAGE_PKG[stages]))}


def test_noop_rebuild_runs_no_action(stages, project_copy):
    proj = project_copy(stages)
    first = _settled(proj)
    second = proj.doit()
    assert second.rc == 0
    assert second.ran == set()
    assert second.uptodate == first.uptodate
    # Every stage of every variant, and one meta per variant built through cubin, is in the graph.
    groups = {name.split(":")[0] for name in first.uptodate}
    assert groups == {"parse", "ttir", "ttgir", "llir", "ptx", "cubin", "meta"}
    names = {v.name for v in load_variants(proj.kernels) if v.until == "cubin"}
    assert {n.split(":", 1)[1] for n in first.uptodate if n.startswith("meta:")} == names


def test_comment_and_blank_line_edit_reruns_only_that_parse(stages, project_copy):
    proj = project_copy(stages)
    before = _settled(proj)
    proj.edit("axpy.py", "    pid = tl.program_id(0)\n",
              "    # which block of the vector this program owns\n\n    pid = tl.program_id(0)\n")
    after = proj.doit()
    assert after.rc == 0, after.text
    axpy_parse = {n for n in before.uptodate
                  if n.startswith("parse:") and _kernel_of(before.docs[n]) == "axpy_kernel"}
    assert len(axpy_parse) == 1
    assert after.ran == axpy_parse
    assert after.uptodate == before.uptodate - axpy_parse


def test_num_warps_change_reruns_ttgir_to_cubin_of_that_variant(stages, project_copy, monkeypatch,
                                                                 fake_stage_root):
    proj = project_copy(stages)
    _settled(proj)
    old = _keys(proj, stages, "axpy_fp32", monkeypatch, fake_stage_root)
    toml = proj.kernels / "variants.toml"
    text = toml.read_text()
    block = re.search(r'name = "axpy_fp32".*?num_warps = 4', text, re.S)
    assert block, "kernels/variants.toml no longer has axpy_fp32 with num_warps = 4"
    toml.write_text(text[:block.start()] + block.group(0)[:-1] + "2" + text[block.end():])
    new = _keys(proj, stages, "axpy_fp32", monkeypatch, fake_stage_root)

    after = proj.doit()
    assert after.rc == 0, after.text
    expected = {f"{s}:{new[s]}" for s in ("ttgir", "llir", "ptx", "cubin")} | {"meta:axpy_fp32"}
    assert after.ran == expected
    # parse and ttir are shared with the old configuration: same keys, not rerun.
    assert new["parse"] == old["parse"] and new["ttir"] == old["ttir"]
    assert {f"parse:{old['parse']}", f"ttir:{old['ttir']}"} <= after.uptodate
    assert all(new[s] != old[s] for s in ("ttgir", "llir", "ptx", "cubin"))
    meta = (proj.artifacts / "lib" / "axpy_fp32.json").read_text()
    assert '"num_warps": 2' in meta


def test_editing_one_kernel_leaves_other_kernels_untouched(stages, project_copy):
    proj = project_copy(stages)
    before = _settled(proj)
    proj.edit("axpy.py", ", a * x + y,", ", a * x - y,")
    after = proj.doit()
    assert after.rc == 0, after.text
    axpy = {n for n in before.uptodate if _kernel_of(before.docs[n]) == "axpy_kernel"}
    assert after.ran == axpy
    assert after.uptodate == before.uptodate - axpy


@pytest.mark.parametrize("which", ["llir", "ttir", "lib-json", "lib-cubin"])
def test_deleting_an_output_rebuilds_just_its_task(stages, project_copy, which):
    proj = project_copy(stages)
    before = _settled(proj)
    if which.startswith("lib-"):
        ext = which.split("-")[1]
        victim = proj.artifacts / "lib" / f"add_kernel_fp32_w8.{ext}"
        owner = "meta:add_kernel_fp32_w8"
    else:
        owner = next(n for n in before.uptodate
                     if n.startswith(which + ":") and "add_kernel_fp32_w8" in before.docs[n])
        victim = proj.artifacts / which / owner.split(":")[1] / f"add_kernel.{which}"
    content = victim.read_bytes()
    victim.unlink()
    after = proj.doit()
    assert after.rc == 0, after.text
    # The task rewrites the same bytes, so the xxhash checker stops the rebuild there.
    assert after.ran == {owner}
    assert victim.read_bytes() == content


def test_changed_stage_output_reruns_only_its_consumers(stages, project_copy):
    proj = project_copy(stages)
    before = _settled(proj)
    ptx_task = next(n for n in before.uptodate if n.startswith("ptx:") and "axpy_fp16" in before.docs[n])
    cubin_task = next(n for n in before.uptodate if n.startswith("cubin:") and "axpy_fp16" in before.docs[n])
    target = proj.artifacts / "ptx" / ptx_task.split(":")[1] / "axpy_kernel.ptx"
    target.write_bytes(target.read_bytes() + b"\n// hand edit\n")
    after = proj.doit()
    assert after.rc == 0, after.text
    # The ptx file is cubin's input and one of the hashes meta records; doit tracks
    # targets by existence only, so the ptx task itself does not rerun.
    assert after.ran == {cubin_task, "meta:axpy_fp16"}


HEAVY = ("mlir", "llvmlite", "cuda", "triton", "torch")

LOAD_ONLY = """
import sys
from doit.cmd_base import DodoTaskLoader
from doit.doit_cmd import DoitMain
rc = DoitMain(DodoTaskLoader()).run(["list", "--all", "-f", "dodo.py"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print("HEAVY=" + ",".join(heavy))
sys.exit(rc)
"""


def test_loading_the_task_list_imports_no_compiler(stages, fresh_project):
    import os
    import subprocess

    proj = fresh_project(stages)
    env = dict(os.environ, PYTHONPATH=proj.pythonpath)
    proc = subprocess.run([sys.executable, "-c", LOAD_ONLY.format(heavy=HEAVY)], cwd=proj.root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "meta:add_kernel_fp32" in proc.stdout
    assert "HEAVY=\n" in proc.stdout, proc.stdout.splitlines()[-1]


def test_reordering_or_deleting_rows_reruns_nothing_else(stages, project_copy):
    """Issue 14, incremental edges: a variant's place in variants.toml is no input of its build,
    so moving rows reruns nothing, and deleting one reruns nothing else (its lib/ files go)."""
    proj = project_copy(stages)
    _settled(proj)
    toml = proj.kernels / "variants.toml"
    head, *rows = re.split(r"(?m)^\[\[variant\]\]", toml.read_text())
    blocks = ["[[variant]]" + b.rstrip("\n") + "\n" for b in rows]
    assert len(blocks) >= 3
    toml.write_text(head + "\n".join(reversed(blocks)))
    moved = proj.doit()
    assert moved.rc == 0 and moved.ran == set(), moved.text
    gone = re.search(r'name = "([^"]+)"', blocks[0]).group(1)
    toml.write_text(head + "\n".join(blocks[1:]))
    deleted = proj.doit()
    assert deleted.rc == 0 and deleted.ran == set(), deleted.text
    assert not (proj.artifacts / "lib" / f"{gone}.json").exists()
