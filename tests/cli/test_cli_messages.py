"""The command line answers environment problems with one line, never a traceback (issue 14, item 8): `-o` naming a file, `list | head`, Ctrl-C."""

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
