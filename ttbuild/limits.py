"""Per-stage time and memory limits: stages run in a forked runner process that the build watches and kills past its limits.

Issue 14, item 7: one runaway compile (a huge unrolled block, a pass that goes quadratic) must not
block a `--continue` build, and a stage that crashes the process (a segfault in LLVM) must fail
alone. `ttbuild.graph.actions.run_stage` passes the limits of the build's environment to
`ttbuild.compiler.run_stage`, which runs the stage's `run` through `run_limited` on a cache miss
only. `ttbuild.compile()`, the in-memory driver, runs in-process.

Each build process (doit's worker) forks one runner at its first compiled stage and sends it
the stages one after another, with the caller's environment and working directory; the runner
stays warm (its imports, MLIR contexts, LLVM target machines), so a stage costs the build about
a millisecond more than in-process. A stage past a limit gets the runner's process group killed
(the runner and the tools it started, ptxas) and the next stage a fresh runner, forked as the
first was (Python's multiprocessing forkserver works this way, without the limits).

Configuration (read by `StageLimits.from_env` for each stage the build runs):
- `TTBUILD_STAGE_TIMEOUT`: wall-clock seconds per stage, default 600; `0` or `off`: none.
- `TTBUILD_STAGE_MEMORY`: resident memory of the stage's process, in bytes or with a K/M/G/T
  suffix (binary units), default 16G; `0` or `off`: none. Tools the stage starts (ptxas) are
  limited by the timeout only.
With both off, stages run in the worker's own process.
"""

from __future__ import annotations

import base64
import builtins
import faulthandler
import gc
import importlib
import json
import math
import os
import select
import signal
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ttbuild.errors import CompilationError, CompilerWarning, Loc, TTBuildError
from ttbuild.units import format_size, parse_duration, parse_size

DEFAULT_SECONDS = 600.0
DEFAULT_MEMORY = 16 << 30
_POLL_S = 0.05  # how often the build samples the runner's memory


class StageLimitError(CompilationError):
    """A stage killed at its time or memory limit, or whose process died (a signal, an exit
    without a result). Rendered without a source location: the limit belongs to the stage, not
    to a line; `kind` is "time", "memory" or "crash"."""

    def __init__(self, message: str, *, stage: str, kind: str):
        self.kind = kind
        super().__init__(message, stage=stage)


@dataclass(frozen=True)
class StageLimits:
    """Limits of one stage run: `seconds` of wall-clock time, `rss_bytes` of resident memory of
    its process; None is no limit. `active` when either is set."""

    seconds: float | None = DEFAULT_SECONDS
    rss_bytes: int | None = DEFAULT_MEMORY

    def __post_init__(self):
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"a stage time limit must be positive seconds, not {self.seconds!r}")
        if self.rss_bytes is not None and self.rss_bytes <= 0:
            raise ValueError(f"a stage memory limit must be positive bytes, not {self.rss_bytes!r}")

    @property
    def active(self) -> bool:
        return self.seconds is not None or self.rss_bytes is not None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "StageLimits":
        """The limits `TTBUILD_STAGE_TIMEOUT` and `TTBUILD_STAGE_MEMORY` set (module docstring).
        Raises ValueError naming the variable for a value that is not a number or a size."""
        env = os.environ if environ is None else environ
        return cls(_setting(env, "TTBUILD_STAGE_TIMEOUT", DEFAULT_SECONDS, _seconds),
                   _setting(env, "TTBUILD_STAGE_MEMORY", DEFAULT_MEMORY, _memory))


def _setting(env: Mapping[str, str], name: str, default, parse):
    """`env[name]` through `parse(name, text)`: the default when unset, None for 0 / off / none."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in ("0", "off", "none"):
        return None
    return parse(name, raw)


def _seconds(name: str, raw: str) -> float:
    try:
        seconds = parse_duration(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number of seconds") from None
    if not 0 < seconds < math.inf:
        raise ValueError(f"{name}={raw!r}: give positive seconds, or 0 (or off) for none")
    return seconds


def _memory(name: str, raw: str) -> int | None:
    try:
        return parse_size(raw) or None
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _rss(pid: int) -> int | None:
    """Resident bytes of process `pid` (/proc/<pid>/statm's second field), None where /proc is
    not there (then only the time limit holds)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        data = os.read(fd, min(n - got, 1 << 20))
        if not data:
            return b""
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# The runner protocol: length-prefixed JSON documents, bytes as base64 (no pickle: what the pipe
# carries is data, and only ttbuild's own error and warning classes are rebuilt from it).
def _enc(v):
    if isinstance(v, (bytes, bytearray)):
        return {"$b": base64.b64encode(v).decode("ascii")}
    if isinstance(v, Loc):
        return {"$loc": [v.file, v.line, v.col, v.source_line]}
    if isinstance(v, dict):
        return {"$d": [[k, _enc(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple)):
        return [_enc(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"the stage runner cannot carry a {type(v).__name__}")


def _dec(v):
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        if "$b" in v:
            return base64.b64decode(v["$b"])
        if "$loc" in v:
            return Loc(*v["$loc"])
        return {k: _dec(x) for k, x in v["$d"]}
    return v


def _frame(doc) -> bytes:
    data = json.dumps(doc, separators=(",", ":")).encode()
    return len(data).to_bytes(8, "little") + data


def _resolve(target: str) -> Callable[..., Any]:
    """`"package.module:function"` -> the function (imported in the runner, as the build would)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _error_doc(exc: BaseException, stage: str) -> dict:
    """An exception as data: ttbuild's own errors (TTBuildError) with their attributes, so the
    build raises the same error, location included; anything else as a RuntimeError naming its
    type and carrying the runner's traceback."""
    cls = type(exc)
    if isinstance(exc, TTBuildError):
        try:
            return {"class": f"{cls.__module__}:{cls.__qualname__}", "args": _enc(list(exc.args)),
                    "state": _enc(dict(exc.__dict__))}
        except TypeError:
            pass
    text = "".join(traceback.format_exception(exc)).rstrip()
    return {"class": None, "text": f"{cls.__name__} in the {stage} stage's runner process: {exc}\n{text}"}


def _error_of(doc: dict) -> BaseException:
    if doc["class"]:
        cls = _resolve(doc["class"])
        if isinstance(cls, type) and issubclass(cls, TTBuildError):
            exc = cls.__new__(cls)
            exc.args = tuple(_dec(doc["args"]))
            exc.__dict__.update(_dec(doc["state"]))
            return exc
    return RuntimeError(doc.get("text", "the stage failed in its runner process"))


def _warning_doc(w) -> dict | None:
    m = w.message
    if isinstance(m, CompilerWarning):
        return {"compiler": _enc({"message": m.message, "node_id": m.node_id, "loc": m.loc})}
    return {"category": w.category.__name__, "text": str(m)}


def _warning_of(doc: dict) -> tuple[Warning, type]:
    if "compiler" in doc:
        f = _dec(doc["compiler"])
        return CompilerWarning(f["message"], node_id=f["node_id"], loc=f["loc"]), CompilerWarning
    category = getattr(builtins, doc["category"], UserWarning)
    if not (isinstance(category, type) and issubclass(category, Warning)):
        category = UserWarning
    return category(doc["text"]), category


def _outcome(target: str, args: list, stage: str) -> bytes:
    """The framed outcome of one call: {"ok": result} or {"error": ...}, with the warnings it issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = _resolve(target)(*args)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the build
            doc: dict = {"error": _error_doc(exc, stage)}
        else:
            try:
                doc = {"ok": _enc(result)}
            except TypeError as exc:  # a result that is not data: the stage broke its contract
                doc = {"error": {"class": None, "text": f"the {stage} stage's result cannot be sent back: {exc}"}}
    doc["warnings"] = [_warning_doc(w) for w in caught]
    return _frame(doc)


def _serve(requests: int, replies: int) -> None:
    """The runner's loop, in the forked child: read a framed request (target, args, environ,
    cwd, stage), run it there, write the framed outcome; leave with os._exit (no atexit handler, no flush of the
    build's buffers) when the build closes its end or dies."""
    code = 0
    try:
        os.setpgid(0, 0)  # the build kills the group: ptxas and other tools die with the stage
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the build's; it kills the runner
        faulthandler.disable()  # a crash is reported by the build, by signal: no stack dump here
        gc.freeze()  # inherited objects are never collected here: no copy-on-write of their pages by the collector
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        while True:
            header = _read_exact(requests, 8)
            if not header:
                break
            request = json.loads(_read_exact(requests, int.from_bytes(header, "little")))
            environ = request["environ"]
            if environ != os.environ:
                os.environ.clear()
                os.environ.update(environ)
            if request["cwd"] != os.getcwd():
                os.chdir(request["cwd"])
            _write_all(replies, _outcome(request["target"], _dec(request["args"]), request["stage"]))
    except BaseException:  # noqa: BLE001
        code = 70
    finally:
        os._exit(code)


class _Runner:
    """One forked runner of this process: its pid and the two pipe ends the build holds."""

    def __init__(self):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the runner's coverage is the build's result
            os.close(req_w)
            os.close(rep_r)
            _serve(req_r, rep_w)
        os.close(req_r)
        os.close(rep_w)
        try:
            os.setpgid(pid, pid)  # as the runner does: whichever runs first, a kill finds the group
        except OSError:
            pass
        self.pid, self.requests, self.replies, self.owner = pid, req_w, rep_r, os.getpid()

    def close_pipes(self) -> None:
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self, kill: bool) -> int | None:
        """Close the pipes (the runner then leaves), or SIGKILL its process group first; reap
        it and return its wait status (None when it was not ours to reap, or closed before)."""
        if not self.pid:
            return None
        if kill:
            for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
                try:
                    target()
                    break
                except (ProcessLookupError, PermissionError):
                    continue
        self.close_pipes()
        pid, self.pid = self.pid, 0
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return None


_RUNNER: _Runner | None = None
_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    """In a forked child of the build (a doit worker, a runner): the parent's runner is not
    this process's; close its pipe ends so that the runner still sees its build leave."""
    global _RUNNER
    if _RUNNER is not None:
        _RUNNER.close_pipes()
    _RUNNER = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _crash(stage: str, status: int | None) -> StageLimitError:
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        why = f"was killed by {name}" + (" (out of memory?)" if sig == signal.SIGKILL else "")
    elif status is not None:
        why = f"exited with status {os.WEXITSTATUS(status)}"
    else:
        why = "ended"
    return StageLimitError(f"the {stage} stage's process {why} before giving a result", stage=stage, kind="crash")


def run_limited(target: str, args: tuple, limits: StageLimits, *, stage: str) -> Any:
    """`function(*args)` for `target` = "package.module:function" (a stage's `run`), in this
    process's runner under `limits`; returns what it returns, raises what it raised (ttbuild's
    own errors as themselves, location included; any other exception as a RuntimeError with the
    runner's traceback) and issues again the warnings it issued. Arguments and result are data:
    bytes, str, numbers, None, lists, tuples (as lists), dicts with str keys, Loc. The runner
    gets this process's environment and working directory with each call.

    Raises StageLimitError ("time" / "memory") after killing the runner's process group at a
    limit, or ("crash") when the runner died without a result (a signal, the kernel's OOM
    killer); the next call forks a new runner. A KeyboardInterrupt here kills the runner too.
    Runs `fn` in-process when no limit is active or the platform cannot fork.
    """
    global _RUNNER
    if not limits.active or not hasattr(os, "fork"):
        return _resolve(target)(*args)
    request = _frame({"target": target, "args": _enc(list(args)), "environ": dict(os.environ),
                      "cwd": os.getcwd(), "stage": stage})
    with _LOCK:
        if _RUNNER is None or _RUNNER.owner != os.getpid():
            _RUNNER = _Runner()
        runner = _RUNNER
        ok = False
        try:
            start = time.monotonic()
            try:
                _write_all(runner.requests, request)
            except BrokenPipeError:  # the runner died between stages: report it, fork another next time
                raise _crash(stage, runner.close(kill=True)) from None
            reply = _await(runner, limits, stage, start)
            ok = True
            if limits.rss_bytes is not None and (_rss(runner.pid) or 0) > limits.rss_bytes // 2:
                ok = False  # what earlier stages left in its heap must not count against the next
        finally:
            if not ok:
                _RUNNER = None
                runner.close(kill=True)
    doc = json.loads(reply)
    for w in doc["warnings"]:
        message, category = _warning_of(w)
        warnings.warn(message, category, stacklevel=2)
    if "error" in doc:
        raise _error_of(doc["error"])
    return _dec(doc["ok"])


def _await(runner: _Runner, limits: StageLimits, stage: str, start: float) -> bytes:
    """Read the runner's framed reply, watching the time since `start` and its memory; raises
    StageLimitError at a limit or when the runner's pipe closes first (the caller kills it)."""
    buf = bytearray()
    need = 8
    while True:
        waited = time.monotonic() - start
        if limits.seconds is not None and waited >= limits.seconds:
            raise StageLimitError(
                f"the {stage} stage ran past its time limit of {limits.seconds:g} s and was stopped "
                f"(TTBUILD_STAGE_TIMEOUT sets the limit in seconds, 0 for none)", stage=stage, kind="time")
        timeout = _POLL_S if limits.rss_bytes is not None else None
        if limits.seconds is not None:
            left = max(limits.seconds - waited, 0.0)
            timeout = left if timeout is None else min(timeout, left)
        ready, _, _ = select.select([runner.replies], [], [], timeout)
        if ready:
            data = os.read(runner.replies, 1 << 20)
            if not data:
                raise _crash(stage, runner.close(kill=False))
            buf += data
            if need == 8 and len(buf) >= 8:
                need = 8 + int.from_bytes(buf[:8], "little")
            if need > 8 and len(buf) >= need:  # a JSON document is never empty: the body follows the header
                return bytes(buf[8:need])
            continue
        if limits.rss_bytes is not None:
            rss = _rss(runner.pid)
            if rss is not None and rss > limits.rss_bytes:
                raise StageLimitError(
                    f"the {stage} stage used {rss / (1 << 20):.0f} MiB, past its memory limit of "
                    f"{format_size(limits.rss_bytes)}, and was stopped (TTBUILD_STAGE_MEMORY sets the limit, "
                    f"0 for none)", stage=stage, kind="memory")
