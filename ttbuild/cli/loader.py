"""The CLI's view of a project: kernels and artifacts paths, the doit namespace, the loaded tasks and doit's state DB.

`ttbuild` and `doit` (dodo.py) build the same namespace from `ttbuild.build.namespace`, so they
share one task graph and one `artifacts/.doit.db`. Nothing here imports MLIR or llvmlite.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = ".ttbuild.lock"
STAGE_PACKAGE_ENV = "TTBUILD_STAGE_PACKAGE"


@dataclass(frozen=True)
class Project:
    """Where a build reads kernels and writes artifacts, and which stage package compiles them
    (`ttbuild.stages`; `$TTBUILD_STAGE_PACKAGE` swaps in test doubles)."""

    kernels: Path
    artifacts: Path
    stage_package: str = "ttbuild.stages"
    shard: tuple[int, int] | None = None

    @classmethod
    def from_args(cls, kernels: str | None, artifacts: str | None, shard=None) -> "Project":
        return cls(Path(kernels or "kernels"), Path(artifacts or "artifacts"),
                   os.environ.get(STAGE_PACKAGE_ENV) or "ttbuild.stages", shard)

    def namespace(self, config: dict | None = None) -> dict:
        from ttbuild.build import namespace

        return namespace(self.kernels, self.artifacts, self.stage_package, self.shard, config)

    def variants(self):
        """The variants this project builds (after sharding). Raises VariantError."""
        from ttbuild.build import in_shard, load_variants

        variants = load_variants(self.kernels)
        if self.shard is not None:
            variants = [v for v in variants if in_shard(v.name, *self.shard)]
        return variants

    def tasks(self) -> dict:
        """name -> doit Task, with doit's implicit task_dep (file_dep producers) filled in."""
        from doit.control import TaskControl
        from doit.loader import load_tasks

        task_list = load_tasks(self.namespace(), allow_delayed=False)
        TaskControl(task_list)  # adds task_dep for every file_dep another task produces
        return {t.name: t for t in task_list}

    def dependency(self):
        """doit's Dependency manager over `artifacts/.doit.db` with ttbuild's checker (read it, then close())."""
        from doit.dependency import Dependency, SqliteDB

        from ttbuild.build.fileio import XXHashChecker
        from ttbuild.build.graph import DEP_FILE

        self.artifacts.mkdir(parents=True, exist_ok=True)
        return Dependency(SqliteDB, str(self.artifacts / DEP_FILE), checker_cls=XXHashChecker)


@contextlib.contextmanager
def build_lock(artifacts: Path, wait_message: str = "waiting for another ttbuild on {path}"):
    """Hold an exclusive `flock` on `artifacts/.ttbuild.lock` for the duration of a build.

    Two builds on one artifacts/ then run one after the other: the second finds the first's
    results up to date, so work is neither duplicated nor interleaved in doit's DB. The kernel
    drops the lock when the holder dies (SIGKILL included), so a killed build never wedges the
    next one. Forked `-j` workers inherit the same open file description, hence the same lock.
    """
    artifacts.mkdir(parents=True, exist_ok=True)
    path = artifacts / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("ttbuild: " + wait_message.format(path=path), file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)  # releases the lock
