"""A broken kernel fails only its own tasks, with file:line:col + source line + caret, and leaves no partial files."""

from __future__ import annotations

import re

import pytest

BAD_KERNEL = '''"""A kernel the tests break on purpose."""
import triton
import triton.language as tl


@triton.jit
def bad_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)
'''
GOOD_LINE = "    x = tl.load(x_ptr + offsets, mask=mask)\n"
BAD_LINE_NO = 11

BAD_VARIANT = '''
[[variant]]
name = "bad_fp32"
file = "bad.py"
kernel = "bad_kernel"
signature = "*fp32:16,*fp32:16,i32"
constexprs = { BLOCK_SIZE = 1024 }
'''

# (case, replacement for GOOD_LINE, the source line the caret must sit under, expected col or None)
CASES = {
    "syntax": ("    x = tl.load(x_ptr + offsets, mask=mask\n", "x = tl.load(x_ptr + offsets, mask=mask", None),
    "with": ('    with open("x") as f:\n        x = tl.load(x_ptr + offsets, mask=mask)\n',
             'with open("x") as f:', 5),
    "unknown_tl": ("    x = tl.frobnicate(tl.load(x_ptr + offsets, mask=mask))\n",
                   "x = tl.frobnicate(tl.load(x_ptr + offsets, mask=mask))", None),
}
FAKE_CASES = {"syntax", "with"}  # the fake stages know no tl functions


def _kernel_of(doc: str) -> str:
    return doc.split()[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_kernel_fails_alone_then_builds_once_fixed(stages, case, project_copy):
    if stages == "fake" and case not in FAKE_CASES:
        pytest.skip("needs the real frontend")
    proj = project_copy(stages)
    replacement, src_line, col = CASES[case]
    (proj.kernels / "bad.py").write_text(BAD_KERNEL.replace(GOOD_LINE, replacement))
    with open(proj.kernels / "variants.toml", "a") as fh:
        fh.write(BAD_VARIANT)
    # Change another kernel in the same run: it must still build through cubin.
    proj.edit("axpy.py", ", a * x + y,", ", a * x - y,")
    lib_before = {p.name: p.read_bytes() for p in (proj.artifacts / "lib").iterdir()}

    run = proj.doit()
    assert run.rc != 0
    failed_tasks = {n for n, kind in run.failed.items() if kind == "TaskFailed"}
    assert len(failed_tasks) == 1, run.text
    (failed,) = failed_tasks
    assert _kernel_of(run.docs[failed]) == "bad_kernel"
    # The diagnostic: file:line:col, the source line, a caret under the column.
    where = re.search(rf"bad\.py:{BAD_LINE_NO}:(\d+): error: ", run.out)
    assert where, run.out
    if col is not None:
        assert int(where.group(1)) == col
    caret = re.search(rf"\n[ \t]*{re.escape(src_line)}\n([ \t]*)\^", run.out)
    assert caret, run.out
    # Other kernels built through cubin in the same run; nothing of bad_fp32 was written.
    axpy_ran = {n.split(":")[0] for n in run.ran if _kernel_of(run.docs[n]) == "axpy_kernel"}
    assert axpy_ran == {"parse", "ttir", "ttgir", "llir", "ptx", "cubin", "meta"}
    lib_after = {p.name: p.read_bytes() for p in (proj.artifacts / "lib").iterdir()}
    assert set(lib_after) == set(lib_before)
    assert lib_after["axpy_fp32.json"] != lib_before["axpy_fp32.json"]
    assert not list(proj.artifacts.rglob(".tmp-*")), "temp files left behind"
    failed_stage, failed_key = failed.split(":")
    # Everything below the failed task is skipped, one line each; nothing else is.
    order = ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")
    assert {n.split(":")[0] for n in run.skipped} == set(order[order.index(failed_stage) + 1:]) | {"meta"}
    assert "meta:bad_fp32" in run.skipped and len(run.skipped) == 6 - order.index(failed_stage)
    assert "UnmetDependency" not in run.out and "1 task(s) failed" in run.out
    assert not (proj.artifacts / failed_stage / failed_key).exists() or \
        not any((proj.artifacts / failed_stage / failed_key).iterdir())

    (proj.kernels / "bad.py").write_text(BAD_KERNEL)
    fixed = proj.doit()
    assert fixed.rc == 0, fixed.text
    assert {_kernel_of(fixed.docs[n]) for n in fixed.ran} == {"bad_kernel"}
    assert (proj.artifacts / "lib" / "bad_fp32.json").is_file()
    assert (proj.artifacts / "lib" / "bad_fp32.cubin").is_file()
    assert proj.doit().ran == set()


def test_bad_variant_list_is_reported_at_its_line(stages, project_copy):
    proj = project_copy(stages)
    toml = proj.kernels / "variants.toml"
    text = toml.read_text()
    toml.write_text(text.replace("num_warps = 8", "num_wraps = 8", 1))
    bad_line = 1 + toml.read_text().splitlines().index("num_wraps = 8")
    # plain doit always continues: the bad row fails on its own, the others build
    run = proj.doit()
    assert run.rc in (1, 2)
    assert f"variants.toml:{bad_line}:1: error: variant #2 (add_kernel_fp32_w8): field 'num_wraps': " \
           f"unknown field; did you mean 'num_warps'?" in run.text
    assert "\n    num_wraps = 8\n    ^" in run.text
    assert "Traceback" not in run.text
    assert "meta:add_kernel_fp32" in run.text and "meta:row2" in run.text


def test_failed_task_removes_its_stale_outputs_and_the_fix_rebuilds_that_kernel(stages, project_copy):
    proj = project_copy(stages)
    before = proj.doit()
    (parse_task,) = [n for n in before.uptodate
                     if n.startswith("parse:") and _kernel_of(before.docs[n]) == "axpy_kernel"]
    parse_dir = proj.artifacts / "parse" / parse_task.split(":")[1]
    good = (parse_dir / "axpy_kernel.json").read_bytes()
    source = (proj.kernels / "axpy.py").read_text()
    proj.edit("axpy.py", "    pid = tl.program_id(0)\n", "    pid = tl.program_id(0\n")

    run = proj.doit()
    assert run.rc != 0
    assert set(run.failed) == {parse_task}
    # make's .DELETE_ON_ERROR: no output of a failed task survives to be consumed later.
    assert sorted(p.name for p in parse_dir.iterdir()) == []
    assert not list(proj.artifacts.rglob(".tmp-*"))

    (proj.kernels / "axpy.py").write_text(source)
    fixed = proj.doit()
    assert fixed.rc == 0, fixed.text
    # Issue 14: the tasks skipped behind the failure keep their saved state (ttbuild.graph.
    # doitstate), so the fix reruns the failed parse alone; its output is as before, so the
    # stages after it are up to date, and only the metadata tasks (whose lib/ files the failed
    # run removed) run again. The other kernels stay up to date.
    axpy = {n for n in before.uptodate if _kernel_of(before.docs[n]) == "axpy_kernel"}
    metas = {n for n in axpy if n.startswith("meta:")}
    assert fixed.ran == {parse_task} | metas, fixed.text
    assert (axpy - {parse_task} - metas) <= fixed.uptodate
    assert (parse_dir / "axpy_kernel.json").read_bytes() == good
    assert proj.doit().ran == set()
