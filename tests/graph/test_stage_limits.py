"""Per-stage time and memory limits (ttbuild.limits, issue 14 item 7): a runaway or crashing stage fails alone, located to its variant, and kills what it started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import warnings

import pytest

from ttbuild.errors import CompilerWarning, Loc, NotSupportedYet, ToolError
from ttbuild.limits import DEFAULT_MEMORY, DEFAULT_SECONDS, StageLimitError, StageLimits, run_limited
from ttbuild.units import parse_size as parse_bytes

LIMITS = StageLimits(30, 4 << 30)


@pytest.mark.parametrize("name, value, why", [
    ("TTBUILD_STAGE_MEMORY", "inf", "'inf' is not a size"), ("TTBUILD_STAGE_MEMORY", "nan", "'nan' is not a size"),
    ("TTBUILD_STAGE_MEMORY", "0.5", "less than one byte"), ("TTBUILD_STAGE_MEMORY", "1e400", "is not a size"),
    ("TTBUILD_STAGE_TIMEOUT", "inf", "is not a number of seconds"),
])
def test_a_limit_that_is_no_number_is_refused_not_dropped(name, value, why):
    """Issue 32: MEMORY=inf raised OverflowError; 0.5 became 0, which silently meant no limit."""
    with pytest.raises(ValueError, match=why):
        StageLimits.from_env({name: value})


def test_limits_from_the_environment():
    assert StageLimits.from_env({}) == StageLimits(DEFAULT_SECONDS, DEFAULT_MEMORY)
    assert StageLimits.from_env({"TTBUILD_STAGE_TIMEOUT": "2.5", "TTBUILD_STAGE_MEMORY": "512M"}) == \
        StageLimits(2.5, 512 << 20)
    off = StageLimits.from_env({"TTBUILD_STAGE_TIMEOUT": "0", "TTBUILD_STAGE_MEMORY": "off"})
    assert off == StageLimits(None, None) and not off.active
    assert [parse_bytes(t) for t in ("1024", "4k", "2GiB", "1.5G", "3TB")] == \
        [1024, 4096, 2 << 30, 3 << 29, 3 << 40]
    with pytest.raises(ValueError, match="TTBUILD_STAGE_TIMEOUT='ten' is not a number of seconds"):
        StageLimits.from_env({"TTBUILD_STAGE_TIMEOUT": "ten"})
    with pytest.raises(ValueError, match="TTBUILD_STAGE_TIMEOUT='-1'"):
        StageLimits.from_env({"TTBUILD_STAGE_TIMEOUT": "-1"})
    with pytest.raises(ValueError, match="TTBUILD_STAGE_MEMORY: '12Q' is not a size"):
        StageLimits.from_env({"TTBUILD_STAGE_MEMORY": "12Q"})


def _bytes(n: int) -> dict:
    return {"ptx": b"x" * n}


def _unsupported():
    raise NotSupportedYet("tt.frob", Loc("k.py", 7, 4, "    y = frob(x)\n"), "llir")


def _tool():
    raise ToolError("ptxas", "ptxas fatal: bad", "ptxas -arch=sm_90 k.ptx")


def _warn():
    warnings.warn(CompilerWarning("a non-boolean condition", node_id=12), stacklevel=2)
    return 1


def _env(name: str):
    return os.environ.get(name), os.getcwd()


def test_results_errors_and_warnings_come_back_from_the_runner():
    assert run_limited(f"{__name__}:_bytes", (3 << 20,), LIMITS, stage="ptx") == {"ptx": b"x" * (3 << 20)}
    with pytest.raises(NotSupportedYet) as info:
        run_limited(f"{__name__}:_unsupported", (), LIMITS, stage="llir")
    assert (info.value.op, info.value.loc, info.value.stage) == ("tt.frob", Loc("k.py", 7, 4, "    y = frob(x)\n"), "llir")
    assert info.value.render().endswith("    y = frob(x)\n        ^")
    with pytest.raises(ToolError) as tool_info:
        run_limited(f"{__name__}:_tool", (), LIMITS, stage="cubin")
    assert tool_info.value.repro == "ptxas -arch=sm_90 k.ptx"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_limited(f"{__name__}:_warn", (), LIMITS, stage="ttir") == 1
    (w,) = caught
    assert isinstance(w.message, CompilerWarning) and w.message.node_id == 12


def test_one_warm_runner_serves_the_stages_with_the_callers_environment(monkeypatch, tmp_path):
    runner = run_limited("os:getpid", (), LIMITS, stage="parse")
    assert runner != os.getpid()  # it ran elsewhere
    assert run_limited("os:getpid", (), LIMITS, stage="ttir") == runner  # and stays for the next stage
    monkeypatch.setenv("TTBUILD_LIMITS_PROBE", "7")
    monkeypatch.chdir(tmp_path)
    assert run_limited(f"{__name__}:_env", ("TTBUILD_LIMITS_PROBE",), LIMITS, stage="ttir") == ["7", str(tmp_path)]  # tuples come back as lists
    monkeypatch.delenv("TTBUILD_LIMITS_PROBE")
    assert run_limited(f"{__name__}:_env", ("TTBUILD_LIMITS_PROBE",), LIMITS, stage="ttir")[0] is None
    with pytest.raises(StageLimitError):
        run_limited("time:sleep", (30,), StageLimits(0.3, None), stage="ptx")
    assert run_limited("os:getpid", (), LIMITS, stage="parse") not in (runner, os.getpid())  # a new one


def _bug():
    return {"k": 1} / 2


def _not_data():
    return {"ptx": object()}


def test_other_exceptions_and_results_that_are_not_data_are_reported():
    with pytest.raises(RuntimeError, match=r"TypeError in the llir stage's runner process: unsupported operand") as info:
        run_limited(f"{__name__}:_bug", (), LIMITS, stage="llir")
    assert "Traceback" in str(info.value) and "_bug" in str(info.value)  # the runner's traceback
    with pytest.raises(RuntimeError, match="the ptx stage's result cannot be sent back: the stage runner cannot "
                                           "carry a object"):
        run_limited(f"{__name__}:_not_data", (), LIMITS, stage="ptx")


def test_no_limit_runs_in_process():
    assert run_limited("os:getpid", (), StageLimits(None, None), stage="parse") == os.getpid()


def _sleep_with_a_tool(marker: str) -> None:
    """A stage that starts a tool (as cubin starts ptxas), then never ends."""
    proc = subprocess.Popen(["sleep", "300"])
    with open(marker, "w") as fh:
        fh.write(str(proc.pid))
    time.sleep(300)


def test_time_limit_stops_the_stage_and_the_tools_it_started(tmp_path):
    marker = tmp_path / "tool.pid"
    start = time.monotonic()
    with pytest.raises(StageLimitError) as info:
        run_limited(f"{__name__}:_sleep_with_a_tool", (str(marker),), StageLimits(1.0, None), stage="cubin")
    assert time.monotonic() - start < 10
    assert info.value.kind == "time" and info.value.stage == "cubin"
    assert "the cubin stage ran past its time limit of 1 s" in str(info.value)
    assert "TTBUILD_STAGE_TIMEOUT" in str(info.value)
    tool = int(marker.read_text())
    for _ in range(100):  # the tool is killed with the stage's process group, then reaped by init
        try:
            os.kill(tool, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{tool}/stat") as fh:
            if fh.read().split(")")[-1].split()[0] == "Z":
                break
        time.sleep(0.05)
    else:
        pytest.fail(f"ptxas stand-in {tool} outlived its stage")


def _allocate(n: int) -> None:
    block = bytearray(n)
    block[::4096] = b"\1" * len(range(0, n, 4096))  # touch every page: resident, not just reserved
    time.sleep(300)


def test_memory_limit_stops_the_stage():
    start = time.monotonic()
    with pytest.raises(StageLimitError) as info:
        run_limited(f"{__name__}:_allocate", (512 << 20,), StageLimits(60, 256 << 20), stage="ttir")
    assert time.monotonic() - start < 30
    assert info.value.kind == "memory"
    assert "past its memory limit of 256M" in str(info.value) and "TTBUILD_STAGE_MEMORY" in str(info.value)


def test_a_crash_is_the_stage_failing_not_the_build():
    with pytest.raises(StageLimitError, match="the ptx stage's process was killed by SIGSEGV") as info:
        run_limited("os:kill", (0, signal.SIGSEGV), LIMITS, stage="ptx")
    assert info.value.kind == "crash"
    with pytest.raises(StageLimitError, match="exited with status 3"):
        run_limited("os:_exit", (3,), LIMITS, stage="ptx")


RUNAWAY = '''"""A kernel whose parse never ends (the fake stages sleep on the marker below)."""
# {marker}


def stuck_kernel(x_ptr, n):
    pass
'''
ROW = '''
[[variant]]
name = "stuck_fp32"
file = "stuck.py"
kernel = "stuck_kernel"
signature = "*fp32:16,i32"
'''


@pytest.mark.parametrize("marker,expect", [("FAKE_RUNAWAY", "the parse stage ran past its time limit of 2 s"),
                                           ("FAKE_CRASH", "the parse stage's process was killed by SIGSEGV")])
def test_a_runaway_or_crashing_kernel_fails_alone_in_a_continuing_build(project_copy, marker, expect):
    proj = project_copy("fake")
    (proj.kernels / "stuck.py").write_text(RUNAWAY.format(marker=marker))
    with open(proj.kernels / "variants.toml", "a") as fh:
        fh.write(ROW)
    proj.edit("axpy.py", ", a * x + y,", ", a * x - y,")  # another kernel that must still build
    proj.env["TTBUILD_STAGE_TIMEOUT"] = "2"
    start = time.monotonic()
    run = proj.ttbuild("build", "--continue", "-j", "2", timeout=120)
    assert time.monotonic() - start < 90
    assert run.rc != 0, run.text
    assert expect in run.text and "stuck_kernel" in run.text, run.text
    assert "Traceback" not in run.text, run.text
    assert "meta:axpy_fp32" in run.ran, run.text
    assert not (proj.artifacts / "lib" / "stuck_fp32.json").exists()
    assert not list(proj.artifacts.rglob(".tmp-*")), "temp files left behind"
    # fixed, it builds; nothing else reruns
    (proj.kernels / "stuck.py").write_text(RUNAWAY.format(marker="fixed"))
    again = proj.ttbuild("build", timeout=120)
    assert again.rc == 0, again.text
    assert (proj.artifacts / "lib" / "stuck_fp32.json").is_file()
