"""`ttbuild` commands on a project: build output and summary, list, explain, show, clean, --shard, -j, failures, the TTY display."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttbuild.cli import parse_shard
from ttbuild.graph import in_shard, load_variants

BAD_VARIANT = '''
[[variant]]
name = "bad_fp32"
file = "bad.py"
kernel = "bad_kernel"
signature = "*fp32:16,i32"
constexprs = { BLOCK_SIZE = 1024 }
'''
BAD_KERNEL = '''import triton
import triton.language as tl

@triton.jit
def bad_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    with open("x") as f:
        pass
'''


@pytest.fixture
def proj(tmp_path, new_project):
    p = new_project(tmp_path / "p")
    p.env = {"TTBUILD_CACHE": "off"}
    return p


def test_a_noop_ci_log_is_the_summary_alone(proj):
    """Without a terminal a build prints a line per task that ran, came from the cache, failed
    or was skipped, then the summary: a no-op prints no task line (issue 14: 15,000 lines for
    3000 variants before); `-v` lists the up-to-date tasks too."""
    assert proj.ttbuild("build").rc == 0
    proj.env["TTBUILD_LIST_UPTODATE"] = "0"
    quiet = proj.ttbuild("build")
    assert quiet.rc == 0 and not quiet.ran and not quiet.uptodate, quiet.text
    lines = quiet.out.strip().splitlines()
    assert len(lines) <= 12 and "ttbuild: 0 stages ran" in quiet.out, quiet.out
    verbose = proj.ttbuild("build", "-v")
    assert verbose.uptodate and len(verbose.out.splitlines()) > len(verbose.uptodate), verbose.out


def _names(proj):
    return [v.name for v in load_variants(proj.kernels)]


def test_build_then_noop_then_summary_counts(proj):
    first = proj.ttbuild("build")
    assert first.rc == 0, first.text
    again = proj.ttbuild()  # no command = build
    assert again.rc == 0 and again.ran == set() and again.uptodate == first.ran, again.text
    stages_ran = {n for n in first.ran if not n.startswith("meta:")}
    total = re.search(r"^total\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", first.out, re.M)
    assert total and int(total.group(1)) == len(stages_ran) < len(first.ran), first.out
    # the sentence under the table says what its total row says (issue 32: "11 stages ran" under 13)
    assert f"ttbuild: {len(stages_ran)} stages ran," in first.out, first.out
    assert re.search(rf"^meta\s+{len(first.ran) - len(stages_ran)}\s", first.out, re.M), first.out
    assert re.search(rf"^total\s+0\s+0\s+0\s+{len(stages_ran)}\s+0\s+0", again.out, re.M), again.out
    # Same task graph and DB as `doit` in the project root.
    assert proj.doit().ran == set()


def test_comment_edit_is_cut_off_early_and_counted(proj):
    assert proj.ttbuild("build").rc == 0
    proj.edit("axpy.py", "def axpy_kernel", "# a comment\ndef axpy_kernel")
    run = proj.ttbuild("build")
    assert {n.split(":")[0] for n in run.ran} == {"parse"}, run.text
    cut = re.search(r"^ttir\s+(\d+)\s+(\d+)\s+(\d+)", run.out, re.M)
    assert cut and cut.group(3) == "2", run.out  # both axpy ttir tasks: parse wrote the same bytes


def test_list_and_explain_follow_edits(proj, tmp_path):
    out = proj.ttbuild("list")
    assert out.rc == 0 and out.out.count("needs build") == len(_names(proj)), out.text
    assert proj.ttbuild("build").rc == 0
    out = proj.ttbuild("list")
    assert out.out.count("up-to-date") == len(_names(proj)) and "need a build" in out.out, out.text
    assert "0 need a build" in out.out

    proj.edit("variants.toml", "num_warps = 8\n\n[[variant]]\nname = \"add_kernel_fp16\"",
              "num_warps = 2\n\n[[variant]]\nname = \"add_kernel_fp16\"")
    proj.edit("axpy.py", ", a * x + y,", ", a * x - y,")
    listed = proj.ttbuild("list").out
    lines = {line.split()[0]: line for line in listed.splitlines()[:-1]}
    assert "needs build (ttgir, llir, ptx, cubin)" in lines["add_kernel_fp32_w8"], listed
    assert "needs build (parse)" in lines["axpy_fp32"] and "up-to-date" in lines["add_kernel_fp32"], listed

    ex = proj.ttbuild("explain", "add_kernel_fp32_w8")
    assert ex.rc == 0, ex.text
    assert "num_warps: 8 -> 2  (ttgir and later)" in ex.out
    assert re.search(r"parse\s+up to date", ex.out) and re.search(r"ttgir\s+would run", ex.out), ex.out
    assert "would run: ttgir, llir, ptx, cubin" in ex.out

    ex = proj.ttbuild("explain", "axpy_fp32")
    assert "options: unchanged" in ex.out and "input changed: kernels/axpy.py" in ex.out, ex.out
    assert re.search(r"ttir\s+may run", ex.out) and "would run: parse" in ex.out, ex.out

    assert proj.ttbuild("build").rc == 0
    ex = proj.ttbuild("explain", "axpy_fp32")
    assert "would run: nothing" in ex.out, ex.out

    # A stage implementation bumped: every variant's ttgir key changes, and explain says why.
    fake_ttgir = Path(proj.pythonpath.split(os.pathsep)[-1]) / "fake_stages" / "ttgir.py"
    local = tmp_path / "stages"
    shutil.copytree(fake_ttgir.parent, local / "fake_stages")
    (local / "fake_stages" / "ttgir.py").write_text(fake_ttgir.read_text().replace("VERSION = 1", "VERSION = 2", 1))
    proj.pythonpath = os.pathsep.join([proj.pythonpath.split(os.pathsep)[0], str(local)])
    ex = proj.ttbuild("explain", "axpy_fp32")
    assert "ttgir stage VERSION: 1 -> 2" in ex.out and "would run: ttgir, llir, ptx, cubin" in ex.out, ex.out

    bad = proj.ttbuild("explain", "axpy_fp3")
    assert bad.rc == 2 and "did you mean axpy_fp32" in bad.err, bad.text


def test_show_prints_the_stage_file(proj):
    assert proj.ttbuild("show", "axpy_fp32", "--stage", "ttgir").rc == 2  # not built yet
    assert proj.ttbuild("build").rc == 0
    path = proj.ttbuild("show", "axpy_fp32", "--stage", "ttgir", "--path").out.strip()
    shown = proj.ttbuild("show", "axpy_fp32", "--stage", "ttgir")
    assert shown.rc == 0 and shown.out == (proj.root / path).read_text(), shown.text
    assert path.startswith("artifacts/ttgir/") and path.endswith("axpy_kernel.ttgir")
    loc = proj.ttbuild("show", "axpy_fp32", "--stage", "parse", "--role", "loc")
    assert '"nodes"' in loc.out


def test_clean_removes_what_ttbuild_wrote_only(proj):
    assert proj.ttbuild("build").rc == 0
    (proj.artifacts / "mine.txt").write_text("keep")
    assert proj.ttbuild("clean").rc == 0
    assert sorted(p.name for p in proj.artifacts.iterdir()) == [".ttbuild.lock", "mine.txt"]
    run = proj.ttbuild("build")
    assert run.rc == 0 and run.uptodate == set() and run.ran


def test_clean_orphans_removes_only_what_no_variant_produces(proj):
    """Issue 14: a changed option leaves the old chain's stage outputs behind; `clean --orphans`
    removes those and nothing the current list produces (the next build runs nothing); a broken
    list removes nothing."""
    assert proj.ttbuild("build").rc == 0
    toml = proj.kernels / "variants.toml"
    toml.write_text(toml.read_text().replace("num_warps = 8", "num_warps = 2", 1))
    assert proj.ttbuild("build").rc == 0
    before = {p.relative_to(proj.artifacts).as_posix() for p in proj.artifacts.glob("*/*") if p.is_dir()}
    run = proj.run(proj.ttbuild_argv("clean", "--orphans"))
    assert run.returncode == 0, run.stdout + run.stderr
    after = {p.relative_to(proj.artifacts).as_posix() for p in proj.artifacts.glob("*/*") if p.is_dir()}
    n = int(re.search(r"removed (\d+) orphan", run.stdout).group(1))
    assert n > 0 and len(before - after) == n and after <= before
    again = proj.ttbuild("build")
    assert again.rc == 0 and again.ran == set(), again.text
    (proj.kernels / "variants.toml").write_text("[[variant]\n")
    broken = proj.run(proj.ttbuild_argv("clean", "--orphans"))
    assert broken.returncode == 3 and "variants.toml" in broken.stderr
    assert {p.relative_to(proj.artifacts).as_posix() for p in proj.artifacts.glob("*/*") if p.is_dir()} == after


@given(st.text(min_size=1, max_size=20), st.integers(1, 8))
def test_every_variant_name_lands_in_exactly_one_shard(name, n):
    assert sum(in_shard(name, i, n) for i in range(1, n + 1)) == 1


def test_parse_shard_rejects_nonsense():
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "1", "a/b", "1/0"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_shard(bad)


def test_shards_split_the_library_and_together_build_it(tmp_path, new_project, proj):
    assert proj.ttbuild("build").rc == 0
    whole = proj.artifact_bytes()
    # Variants built through cubin end in a meta task; `until` variants stop earlier.
    names = {v.name for v in load_variants(proj.kernels) if v.until == "cubin"}
    shard_proj = new_project(tmp_path / "s")
    shard_proj.env = {"TTBUILD_CACHE": "off"}
    seen = []
    for i in (1, 2, 3):
        run = shard_proj.ttbuild("build", "--shard", f"{i}/3")
        assert run.rc == 0, run.text
        metas = {n.split(":", 1)[1] for n in run.ran | run.uptodate if n.startswith("meta:")}
        assert metas == {n for n in names if in_shard(n, i, 3)}
        seen.extend(metas)
    assert sorted(seen) == sorted(names)
    assert shard_proj.artifact_bytes() == whole


def test_parallel_build_gives_the_same_bytes(tmp_path, new_project, proj):
    assert proj.ttbuild("build").rc == 0
    par = new_project(tmp_path / "par")
    par.env = {"TTBUILD_CACHE": "off"}
    run = par.ttbuild("build", "-j", "2")
    assert run.rc == 0 and run.ran == proj.ttbuild("build").uptodate, run.text
    assert par.artifact_bytes() == proj.artifact_bytes()
    assert par.ttbuild("build", "-j", "2").ran == set()


def test_failure_prints_its_diagnostic_once_in_the_summary(proj, new_project):
    (proj.kernels / "bad.py").write_text(BAD_KERNEL)
    with open(proj.kernels / "variants.toml", "a") as fh:
        fh.write(BAD_VARIANT)
    run = proj.ttbuild("build", "--continue")
    assert run.rc == 1, run.text  # README: a failed variant exits 1, --continue or not (doit said 2)
    assert len(re.findall(r"bad\.py:6:\d+: error:", run.out)) == 1, run.out
    summary = run.out[run.out.index("ttbuild: "):]
    assert re.search(r"FAILED ttir:\S+  bad_kernel \(bad.py\) -> bad_fp32\n.*\nbad\.py:6:\d+: error:", summary), summary
    assert "meta:axpy_fp32" in run.ran  # --continue: the rest of the library still builds
    stop = new_project(proj.root.parent / "stop", source=proj.root)
    stop.env = proj.env
    shutil.rmtree(stop.artifacts)
    first_fail = stop.ttbuild("build")
    assert first_fail.rc == 1 and len(first_fail.ran) < len(run.ran), first_fail.text


def test_bad_variant_list_exits_3_with_location(proj):
    with open(proj.kernels / "variants.toml", "a") as fh:
        fh.write('\n[[variant]]\nfile = "axpy.py"\nkernel = "axpy_kernel"\nsignature = "*fp99"\n')
    for cmd in (["build"], ["list"]):
        run = proj.ttbuild(*cmd)
        assert run.rc == 3 and "variants.toml:" in run.err and "Traceback" not in run.err, run.text


def test_terminal_gets_the_live_display_and_a_table(proj):
    """On a TTY (CI unset) the output is rich's display: no per-task lines, a boxed summary table."""
    master, slave = os.openpty()
    env = proj.run_env()
    env.pop("CI", None)
    env["COLUMNS"] = "120"
    proc = subprocess.Popen([sys.executable, *proj.ttbuild_argv("build")], cwd=proj.root, env=env,
                            stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    out = b"".join(chunks).decode("utf-8", "replace")
    assert not re.search(r"^\.  parse:", out, re.M), out
    assert "ttgir" in out and "cached" in out and "total" in out, out
    assert "┃" in out or "│" in out, out  # rich's table, not the plain summary
    from ttbuild.buildrecord import read_record

    assert read_record(proj.artifacts)["complete"] is True  # the live display records the build too


def test_list_and_explain_import_no_compiler(proj):
    """Task loading and status checks stay cheap: no MLIR, llvmlite, CUDA or rich import."""
    assert proj.ttbuild("build").rc == 0
    code = ("import sys, io\nfrom ttbuild.cli import main\n"
            "for argv in (['list'], ['explain', 'axpy_fp32'], ['show', 'axpy_fp32']):\n"
            "    assert main(argv, stage_package='fake_stages') == 0\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mlir', 'llvmlite', 'cuda', 'rich'))\n"
            "print('HEAVY=' + ','.join(heavy))\n")
    out = proj.run(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("HEAVY="), out.stdout[-500:]


def test_tasks_pickle_for_worker_processes(proj):
    """`-j N` hands tasks to worker processes: every action, its arguments, the checker and
    doit's pickle-safe task state must survive pickling (spawn-safe, not only fork)."""
    import pickle
    import sys as _sys

    from ttbuild.graph import generate_tasks
    from ttbuild.graph.state import XXHashChecker

    _sys.path.insert(0, proj.pythonpath.split(os.pathsep)[-1])
    try:
        tasks = [t for t in generate_tasks(proj.kernels, proj.artifacts, "fake_stages") if t.get("actions")]
    finally:
        _sys.path.pop(0)
    assert tasks
    for task in tasks:
        (func, args), = task["actions"]
        func2, args2 = pickle.loads(pickle.dumps((func, args)))
        assert func2 is func and args2 == args
    assert pickle.loads(pickle.dumps(XXHashChecker)) is XXHashChecker


def test_stand_in_stages_never_answer_for_the_real_compiler(tmp_path, new_project):
    """The stage package is part of the action key: a cache filled by other stage modules
    (the tests' fakes) gives the real compiler no hits."""
    shared = {"TTBUILD_CACHE_DIR": str(tmp_path / "shared-cache")}
    fake = new_project(tmp_path / "fake")
    fake.env = dict(shared)
    assert fake.ttbuild("build").rc == 0
    real = new_project(tmp_path / "real", "real")
    real.env = dict(shared)
    run = real.ttbuild("build")
    assert run.rc == 0 and run.cached == set() and run.ran, run.text
