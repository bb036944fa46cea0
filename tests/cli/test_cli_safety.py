"""Builds survive SIGKILL at any point and two builds at once on one artifacts/: same bytes as a clean build, no duplicated work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest


def _project(tmp_path, name, new_project, **env):
    proj = new_project(tmp_path / name)
    proj.env = {"TTBUILD_CACHE_DIR": str(tmp_path / f"cache-{name}"),
                "TTBUILD_FAKE_RUNLOG": str(tmp_path / f"runlog-{name}"), **env}
    return proj


def _runlog(proj) -> list[str]:
    path = proj.env["TTBUILD_FAKE_RUNLOG"]
    return open(path).read().split() if os.path.exists(path) else []


def _start(proj, *args, tool: str = "ttbuild") -> subprocess.Popen:
    env = proj.run_env()
    env["CI"] = "1"
    argv = proj.ttbuild_argv("build", *args) if tool == "ttbuild" else ["-m", "doit", *args]
    return subprocess.Popen([sys.executable, *argv], cwd=proj.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory, new_project):
    proj = _project(tmp_path_factory.mktemp("clean"), "clean", new_project)
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text
    return proj.artifact_bytes(), len(_runlog(proj))


@pytest.mark.parametrize("jobs,after", [("1", 1), ("1", 6), ("1", 14), ("1", 24), ("2", 9)])
def test_sigkill_midway_then_rerun_equals_clean_build(jobs, after, tmp_path, new_project, clean_build):
    """Kill the build (and its workers) with SIGKILL once `after` stages have executed, then
    build again: the artifacts equal a clean build's, and no stage result is lost or torn."""
    expected, n_stages = clean_build
    proj = _project(tmp_path, "k", new_project, TTBUILD_FAKE_DELAY="0.05")
    proc = _start(proj, "-j", jobs)
    deadline = time.monotonic() + 120
    while len(_runlog(proj)) < after and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it finished first: the assertion below says so
    proc.wait(timeout=30)
    proc.stdout.close()
    assert len(_runlog(proj)) < n_stages, "the build finished before the kill; kill earlier"

    proj.env.pop("TTBUILD_FAKE_DELAY")
    rerun = proj.ttbuild("build")
    assert rerun.rc == 0, rerun.text
    assert proj.artifact_bytes() == expected  # temp files of killed writes are swept too
    # Settled: the next build runs nothing, the cache holds only good entries.
    assert proj.ttbuild("build").ran == set()
    verify = proj.run(["-m", "ttbuild", "cache", "verify"])
    assert verify.returncode == 0 and "dropped 0 blobs, 0 entries" in verify.stdout, verify.stdout + verify.stderr


@pytest.mark.parametrize("first_tool,second_tool", [("ttbuild", "ttbuild"), ("doit", "ttbuild"), ("ttbuild", "doit")])
def test_two_builds_at_once_neither_corrupt_nor_duplicate(first_tool, second_tool, tmp_path, new_project,
                                                          clean_build):
    """Two builds on one artifacts/ at the same time (`ttbuild build` or plain `doit`): the
    second waits on the lock, then finds everything up to date; together they run each stage once."""
    expected, n_stages = clean_build
    proj = _project(tmp_path, "c", new_project, TTBUILD_FAKE_DELAY="0.05", TTBUILD_CACHE="off")
    first = _start(proj, tool=first_tool)
    while not _runlog(proj) and first.poll() is None:  # bounded by the build itself
        time.sleep(0.01)
    second = _start(proj, tool=second_tool)
    out1, _ = first.communicate(timeout=300)
    out2, _ = second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, out1 + out2
    assert "waiting for another ttbuild" in out2, out2
    assert len(_runlog(proj)) == n_stages
    assert proj.artifact_bytes() == expected


def test_killing_only_the_parent_of_a_parallel_build_wedges_nothing(tmp_path, new_project, clean_build):
    """The review's reproduction: SIGKILL the parent of `ttbuild build -j 2` only (not its
    process group). Its workers die with it and never keep the inherited lock, so the next build
    runs at once (no 'waiting'), finishes, and equals a clean build."""
    expected, n_stages = clean_build
    proj = _project(tmp_path, "p", new_project, TTBUILD_FAKE_DELAY="0.2")
    proc = _start(proj, "-j", "2")
    deadline = time.monotonic() + 120
    while len(_runlog(proj)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)  # the parent alone
    proc.wait(timeout=30)
    proc.stdout.close()
    time.sleep(0.5)  # PR_SET_PDEATHSIG delivers at once; give the kernel a moment
    ps = subprocess.run(["ps", "-s", str(proc.pid), "-o", "pid=,stat="], capture_output=True, text=True).stdout
    workers = [line.split()[0] for line in ps.splitlines() if line.split() and not line.split()[1].startswith("Z")]
    assert workers == [], f"orphan workers of the killed build still run: {ps}"
    proj.env.pop("TTBUILD_FAKE_DELAY")
    rerun = subprocess.run([sys.executable, *proj.ttbuild_argv("build")], cwd=proj.root,
                           env=dict(proj.run_env(), CI="1"), capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "waiting for another ttbuild" not in rerun.stderr, rerun.stderr
    assert proj.artifact_bytes() == expected


def test_a_waiting_build_names_the_holder(tmp_path, new_project, clean_build):
    proj = _project(tmp_path, "w", new_project, TTBUILD_FAKE_DELAY="0.05", TTBUILD_CACHE="off")
    first = _start(proj)
    while not _runlog(proj) and first.poll() is None:
        time.sleep(0.01)
    second = _start(proj)
    out1, _ = first.communicate(timeout=300)
    out2, _ = second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, out1 + out2
    assert f"(held by pid {first.pid}: " in out2, out2
