"""Build state on disk: doit's xxh3_64 file checker, the artifacts lock and the sweep of temp files a killed build left."""

from __future__ import annotations

import os
from pathlib import Path

from doit.dependency import FileChangedChecker, SqliteDB

from ttbuild.fileio import TMP_PREFIX, file_digest


class XXHashChecker(FileChangedChecker):
    """doit `check_file_uptodate` checker comparing xxh3_64 digests of file contents.

    State saved per dependency: [mtime_ns, size, inode, digest]. When mtime, size and inode
    all match the saved state the file is taken as unchanged without reading it; otherwise
    its digest decides. So a parent stage that reruns and writes identical bytes does not
    rerun its children (early cutoff). The inode is part of the fast path because atomic
    writes always make a new inode: a replaced file is re-hashed even on filesystems with
    coarse mtimes.
    """

    def check_modified(self, file_path, file_stat, state):
        """doit's check: True when the file changed since `state` ([mtime_ns, size, inode, xxh3_64 digest]): a size
        change, else mtime and inode equal means unchanged, else the digest decides."""
        if not isinstance(state, (list, tuple)) or len(state) != 4:
            return True
        mtime_ns, size, inode, digest = state
        if file_stat.st_size != size:
            return True
        if file_stat.st_mtime_ns == mtime_ns and file_stat.st_ino == inode:
            return False
        return file_digest(file_path) != digest

    def get_state(self, dep, current_state):
        """The state to save for `dep`: None when mtime, size and inode still match `current_state` (nothing to
        save), else a new [mtime_ns, size, inode, digest]."""
        st = os.stat(dep)
        if (isinstance(current_state, (list, tuple)) and len(current_state) == 4
                and current_state[:3] in ([st.st_mtime_ns, st.st_size, st.st_ino],
                                          (st.st_mtime_ns, st.st_size, st.st_ino))):
            return None
        return [st.st_mtime_ns, st.st_size, st.st_ino, file_digest(dep)]


class PreloadedSqliteDB(SqliteDB):
    """doit's `sqlite3` backend (same file, same table, same JSON rows: plain `doit` reads what
    this writes) that, past its first 64 lookups, reads every remaining task's row with one
    query instead of one query per task: a no-op rebuild of 3000 variants looks up all 15,800
    of them (0.26 s one by one, 0.16 s at once, most of it decoding the rows), while `ttbuild
    explain` asks for a handful. Installed for ttbuild's own doit runs under the `sqlite3` name
    (ttbuild.cli.build), so DOIT_CONFIG and dodo.py stay as they are."""

    ONE_BY_ONE = 64
    _rows: dict | None = None
    _lookups = 0

    def _get_task_data(self, task_id):
        if self._rows is None:
            self._lookups += 1
            if self._lookups <= self.ONE_BY_ONE:
                return super()._get_task_data(task_id)
            self._rows = {row["task_id"]: row["task_data"]
                          for row in self._conn.execute("select task_id, task_data from doit")}
        return self._rows.pop(task_id, None) or {}

    def in_(self, task_id):
        """Whether doit's database holds a row for `task_id` (the batch read, the write cache, or the table)."""
        return task_id in self._cache or bool(self._rows and task_id in self._rows) or super().in_(task_id)

    def remove(self, task_id):
        """Drop `task_id`'s saved state (from the batch read too)."""
        if self._rows:
            self._rows.pop(task_id, None)
        super().remove(task_id)

    def remove_all(self):
        """Drop every task's saved state."""
        self._rows = {}
        super().remove_all()

    def dump(self):
        """doit's dump; a database that cannot be written (sqlite's "database or disk is full",
        a read-only file) is recorded in SAVE_ERRORS for the build to report, not raised into
        doit, which would print a traceback: the build's files are whole (written atomically),
        only its record is lost, and the next build reruns what this one ran."""
        import sqlite3

        try:
            super().dump()
        except sqlite3.Error as exc:
            SAVE_ERRORS.append(f"{exc} ({self.name})")


# Why the last run's doit state could not be saved (PreloadedSqliteDB.dump), for ttbuild.cli.build.
SAVE_ERRORS: list[str] = []


LOCK_FILE = ".ttbuild.lock"
CLEAN_MARK = ".ttbuild.clean"  # present while no build runs and the last one ended cleanly


_HELD: set[int] = set()  # descriptors of the BuildLocks this process holds
_HOOKED = False


def holder(path) -> str:
    """What a lock file says about its holder ("pid N: command"), or "" when it says nothing."""
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return ""


def announce_wait(path, holder: str = "") -> None:
    """The `on_wait` of every ttbuild build and command: one line on stderr naming the lock and
    its holder."""
    import sys

    who = f" (held by {holder})" if holder else ""
    print(f"ttbuild: waiting for another ttbuild on {path}{who}", file=sys.stderr, flush=True)


def _in_child() -> None:
    """After fork, in the child: let go of the parent's lock (a worker must never keep the
    artifacts folder locked after its parent died: flock belongs to the open file, which the
    child's copy of the descriptor keeps alive) and, on Linux, die with the parent (SIGKILL when
    it exits: prctl PR_SET_PDEATHSIG), so no orphan worker goes on writing into a folder a new
    build owns."""
    for fd in list(_HELD):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _install_fork_hook() -> None:
    global _HOOKED
    if not _HOOKED and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_in_child)
        _HOOKED = True


class BuildLock:
    """An exclusive `flock` on `<artifacts>/.ttbuild.lock`, held while a build runs.

    Two builds on one artifacts/ (`ttbuild build`, `doit`, or one of each) then run one after
    the other: the second checks up-to-date status only after the first saved its state, so it
    finds that work done instead of repeating it. The kernel drops the lock when its holder
    dies (SIGKILL included), so a killed build never wedges the next: processes forked while it
    is held (doit's `-j` workers) close their copy of the descriptor and die with the parent
    (_in_child). The file records the holder's pid and command for a build that has to wait.
    Not reentrant: take it once per process (flock locks belong to the open file, and a second
    open would wait on the first).
    """

    def __init__(self, artifacts_dir: str | os.PathLike):
        self.path = Path(artifacts_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, on_wait=None) -> "BuildLock":
        """Block until the lock is ours; `on_wait(path, holder)` is called once if we have to
        wait (holder: what the lock file says about the process holding it, or "")."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait(self.path, holder(self.path))
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        _HELD.add(fd)
        _install_fork_hook()
        # who holds it, for a build that has to wait (the lock is the flock, not this text)
        try:
            import sys

            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {' '.join(sys.argv) or 'python'}\n".encode(), 0)
        except OSError:
            pass
        return self

    def release(self) -> None:
        """Release the build lock: clear the holder line and close the descriptor (which drops the flock).
        Idempotent."""
        if self._fd is not None:
            _HELD.discard(self._fd)
            try:
                os.ftruncate(self._fd, 0)  # the holder line lasts as long as the hold
            except OSError:
                pass
            os.close(self._fd)  # closing the last descriptor of the open file drops the lock
            self._fd = None

    def __enter__(self) -> "BuildLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def sweep_temp_files(artifacts_dir: str | os.PathLike) -> int:
    """Delete temp files a killed build left behind (`atomic_write`'s `.tmp-*`; nobody ever
    reads them: readers only see files after their os.replace). Call only under BuildLock,
    where no other build is mid-write. Returns how many were removed."""
    n = 0
    for root, _dirs, files in os.walk(artifacts_dir):
        for name in files:
            if name.startswith(TMP_PREFIX):
                try:
                    os.unlink(os.path.join(root, name))
                    n += 1
                except OSError:
                    pass
    return n


def begin_build(artifacts_dir: str | os.PathLike) -> int:
    """Under BuildLock, as a build starts: sweep temp files (sweep_temp_files) unless the last
    build ended cleanly, and mark the folder as being built. Only a build that was killed, or
    that lost a worker, can have left temp files; the walk over every artifact costs a no-op
    rebuild of 3000 variants a tenth of a second, so a clean history skips it. Returns how many
    files were removed."""
    mark = Path(artifacts_dir) / CLEAN_MARK
    swept = 0 if mark.exists() else sweep_temp_files(artifacts_dir)
    try:
        mark.unlink()
    except FileNotFoundError:
        pass
    return swept


def end_build(artifacts_dir: str | os.PathLike, clean: bool) -> None:
    """Under BuildLock, as a build ends: `clean` (no task failed) marks the folder so that the
    next build skips the sweep (begin_build)."""
    if clean:
        try:
            (Path(artifacts_dir) / CLEAN_MARK).touch()
        except OSError:
            pass
