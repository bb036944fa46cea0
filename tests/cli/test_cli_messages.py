"""The command line answers environment problems and bad input with one line or a located diagnostic, never a traceback (issue 14, item 8): `-o` naming a file, `list | head`, Ctrl-C, variants.toml rows that do not load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest


@pytest.fixture
def proj(tmp_path, new_project):
    p = new_project(tmp_path / "p")
    p.env = {"TTBUILD_CACHE": "off", "TTBUILD_FAKE_RUNLOG": str(tmp_path / "runlog")}
    return p


def test_artifacts_option_naming_a_file(proj):
    (proj.root / "afile").write_text("x")
    run = proj.run(proj.ttbuild_argv("build", "-o", "afile"))
    assert run.returncode == 2
    assert "the artifacts folder afile is a file" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_list_into_a_closed_pipe(proj):
    assert proj.ttbuild("build").rc == 0
    env = dict(proj.run_env(), CI="1")
    p = subprocess.Popen([sys.executable, *proj.ttbuild_argv("list")], cwd=proj.root, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # `| head -1`
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_ctrl_c_says_interrupted_without_a_traceback(proj, tmp_path):
    proj.env["TTBUILD_FAKE_DELAY"] = "0.2"
    env = dict(proj.run_env(), CI="1")
    p = subprocess.Popen([sys.executable, *proj.ttbuild_argv("build")], cwd=proj.root, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "runlog").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, out, err)
    assert "ttbuild: interrupted" in err and "Traceback" not in err, err
    # and the folder is fine: the next build finishes
    del proj.env["TTBUILD_FAKE_DELAY"]
    assert proj.ttbuild("build").rc == 0
    assert os.path.isdir(proj.artifacts / "lib")


def test_a_bad_row_fails_alone_with_continue(proj):
    """A schema error in one variants.toml row: without --continue the list is refused (status 3,
    nothing built); with it the other variants build and the row fails with its diagnostic."""
    vt = proj.kernels / "variants.toml"
    vt.write_text(vt.read_text() + '\n[[variant]]\nname = "broken"\nfile = "vector_add.py"\n'
                  'kernel = "add_kernel"\nsignature = "*fp33,i32"\n')
    strict = proj.ttbuild("build")
    assert strict.rc == 3 and "unknown dtype 'fp33'" in strict.text and strict.ran == set(), strict.text
    loose = proj.ttbuild("build", "--continue")
    assert loose.rc in (1, 2), loose.text  # doit: a task failed
    assert "unknown dtype 'fp33'" in loose.text
    assert any(t.startswith("meta:add_kernel") for t in loose.ran), loose.text
    assert (proj.artifacts / "lib" / "add_kernel_fp32.json").is_file()


TUNED_KERNEL = '''import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({'BLOCK': 64}, pre_hook=lambda *a: None)], key=['n'])
@triton.jit
def tuned_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
'''
GOOD_AND_UNREADABLE_ROWS = '''[[variant]]
name = "add_kernel_fp32"
file = "vector_add.py"
kernel = "add_kernel"
signature = "*fp32:16,*fp32:16,*fp32:16,i32"
constexprs = { BLOCK_SIZE = 1024 }

[[variant]]
name = "tuned.at"
file = "tuned.py"
kernel = "tuned_kernel"
signature = "*fp32:16,i32"
autotune = true
'''
PRE_HOOK = "tuned.py:5:65: error: triton.Config(pre_hook=...)"


@pytest.fixture
def unreadable(proj):
    """One good row, then a row whose @triton.autotune decorator cannot be read (a pre_hook)."""
    (proj.kernels / "tuned.py").write_text(TUNED_KERNEL)
    (proj.kernels / "variants.toml").write_text(GOOD_AND_UNREADABLE_ROWS)
    return proj


def _build_diagnostic(proj) -> str:
    """The bad row's diagnostic as `ttbuild build --continue` prints it (its FAILED block)."""
    loose = proj.ttbuild("build", "--continue")
    assert loose.rc in (1, 2) and "meta:row2" in loose.failed, loose.text
    head = "FAILED meta:row2  variants.toml row #2 (not built)\n"
    assert head in loose.out, loose.out
    diag = loose.out[loose.out.index(head) + len(head):].rstrip("\n")
    assert diag.startswith(PRE_HOOK) and diag.endswith("^"), diag  # file:line:col, the line, a caret
    return diag


def test_list_shows_a_row_whose_decorators_cannot_be_read(unreadable):
    """`list` on a row that fails in the meta step (decorators read before parse): no traceback;
    the good row is listed, the bad one has a line and its located diagnostic (the build's, on
    stderr), and the status is 3, a bad variant list."""
    proj = unreadable
    run = proj.ttbuild("list")
    assert run.rc == 3 and "Traceback" not in run.text, run.text
    lines = run.out.splitlines()
    assert len(lines) == 3, run.out
    assert lines[0].startswith("add_kernel_fp32 ") and "needs build (parse" in lines[0], run.out
    assert lines[1].startswith("tuned.at ") and "error: does not load (variants.toml row #2" in lines[1], run.out
    assert lines[2] == "1 variants, 0 up to date, 1 need a build; 1 variants.toml row failed to load", run.out
    assert "ERROR: variants.toml row #2 (tuned.at) does not load" in run.err, run.err
    diag = _build_diagnostic(proj)
    assert diag in run.err, run.err
    again = proj.ttbuild("list")  # the good row built: up to date; the bad one still fails the list
    assert again.rc == 3 and again.out.splitlines()[0].endswith("up-to-date"), again.text
    assert diag in again.err and "Traceback" not in again.text, again.text


def test_show_beside_a_row_whose_decorators_cannot_be_read(unreadable):
    """`show` of a good variant works (the bad row is a warning with its located diagnostic);
    a variant of the bad row is refused with that diagnostic and status 3; no traceback."""
    proj = unreadable
    diag = _build_diagnostic(proj)
    path = proj.ttbuild("show", "add_kernel_fp32", "--stage", "ttgir", "--path")
    assert path.rc == 0 and path.out.startswith("artifacts/ttgir/"), path.text
    shown = proj.ttbuild("show", "add_kernel_fp32", "--stage", "ttgir")
    assert shown.rc == 0 and shown.out == (proj.root / path.out.strip()).read_text(), shown.text
    assert "ttbuild: warning: variants.toml row #2 (tuned.at) does not load" in shown.err, shown.err
    assert diag in shown.err and "Traceback" not in shown.text, shown.text
    for name in ("tuned.at.c0", "tuned.at"):
        bad = proj.ttbuild("show", name, "--stage", "ttgir")
        assert bad.rc == 3 and bad.out == "" and "Traceback" not in bad.text, bad.text
        assert diag in bad.err and f"variant {name!r} is not available" in bad.err, bad.err
    unknown = proj.ttbuild("show", "add_kernel_fp33", "--stage", "ttgir")
    assert unknown.rc == 2 and "did you mean add_kernel_fp32" in unknown.err, unknown.text
    assert "Traceback" not in unknown.text, unknown.text


def test_build_without_continue_stops_at_a_row_whose_decorators_cannot_be_read(unreadable):
    """`build` (no --continue) on the same list: status 3, a bad variant list, with the row's
    located diagnostic and no traceback (the reader's error was not caught there)."""
    run = unreadable.ttbuild("build")
    assert run.rc == 3 and "Traceback" not in run.text, run.text
    assert PRE_HOOK in run.text, run.text


def _can_mount() -> bool:
    """Root with `unshare -m` (a private mount namespace): a full or read-only folder can be made."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs root and unshare -m to mount a full or read-only artifacts folder")
@pytest.mark.parametrize("mount, needles", [
    *(("mount -t tmpfs -o size=" + size + " tmpfs {art}", ("ENOSPC",)) for size in ("24k", "48k", "96k")),
    ("mount --bind {art} {art} && mount -o remount,bind,ro {art}",
     ("the artifacts folder cannot be written: Read-only file system (EROFS)",)),
], ids=["disk-full-24k", "disk-full-48k", "disk-full-96k", "read-only"])
def test_a_full_or_read_only_artifacts_folder_is_a_message(proj, mount, needles):
    """Issue 32: a full disk (a stage's write, sqlite's "database or disk is full" when doit saves
    its state) and a read-only artifacts folder ended in tracebacks; each is now one message
    naming the errno (ENOSPC, EROFS) and exit status 1. The sizes put the full disk under a stage
    write, lib/ or the state database."""
    import shlex

    proj.artifacts.mkdir(exist_ok=True)
    script = mount.format(art=proj.artifacts) + " && exec " + shlex.join([sys.executable, *proj.ttbuild_argv("build")])
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=proj.root, env=dict(proj.run_env(), CI="1"),
                         capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 1 and "Traceback" not in text, text
    assert all(n in text for n in needles), text


@pytest.mark.parametrize("value", ["inf", "0.5"])
def test_a_stage_memory_limit_that_is_no_size_stops_the_build_once(proj, value):
    """Issue 32: TTBUILD_STAGE_MEMORY=inf raised OverflowError in every stage; 0.5 meant no limit."""
    proj.env["TTBUILD_STAGE_MEMORY"] = value
    run = proj.ttbuild("build")
    assert run.rc == 2 and "Traceback" not in run.text and not run.ran, run.text
    assert run.err.count("TTBUILD_STAGE_MEMORY") == 1, run.err
