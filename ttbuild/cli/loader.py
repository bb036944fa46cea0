"""The CLI's view of a project: kernels and artifacts paths, the doit namespace, the loaded tasks and doit's state DB.

`ttbuild` and `doit` (dodo.py) build the same namespace from `ttbuild.graph.namespace`, so they
share one task graph and one `artifacts/.doit.db`. Nothing here imports MLIR or llvmlite.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from ttbuild.graph.state import BuildLock, announce_wait

from . import DEFAULT_STAGE_PACKAGE  # one definition (the CLI's defaults too)


@dataclass(frozen=True)
class Project:
    """Where a build reads kernels and writes artifacts, and which stage package compiles them
    (`ttbuild.stages`; tests pass another through `ttbuild.cli.main(argv, stage_package=...)`)."""

    kernels: Path
    artifacts: Path
    stage_package: str = DEFAULT_STAGE_PACKAGE
    shard: tuple[int, int] | None = None

    @classmethod
    def from_args(cls, kernels: str | None, artifacts: str | None, shard=None,
                  stage_package: str = DEFAULT_STAGE_PACKAGE) -> "Project":
        return cls(Path(kernels or "kernels"), Path(artifacts or "artifacts"), stage_package, shard)

    def namespace(self, config: dict | None = None, tasks: list[dict] | None = None) -> dict:
        from ttbuild.graph import namespace

        return namespace(self.kernels, self.artifacts, self.stage_package, self.shard, config, tasks)

    def variants(self, row_errors: list | None = None):
        """The variants this project builds (after sharding). Raises VariantError. With
        `row_errors` (a list), a row that fails on its own (a schema error, a decorator that
        cannot be read) is skipped and appended there as (row index, CompilationError), as a
        continuing build does (ttbuild.graph.load_variants)."""
        from ttbuild.graph import in_shard, load_variants

        variants = load_variants(self.kernels, row_errors)
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
        from doit.dependency import Dependency

        from ttbuild.graph.state import PreloadedSqliteDB, XXHashChecker
        from ttbuild.graph.tasks import DEP_FILE

        self.artifacts.mkdir(parents=True, exist_ok=True)
        return Dependency(PreloadedSqliteDB, str(self.artifacts / DEP_FILE), checker_cls=XXHashChecker)


@contextlib.contextmanager
def build_lock(artifacts: Path):
    """Hold artifacts/' BuildLock (ttbuild.graph.state) around a command that is not a doit
    run (`clean`); a build takes it in its reporter. Says so on stderr when it has to wait."""
    lock = BuildLock(artifacts).acquire(on_wait=announce_wait)
    try:
        yield lock.path
    finally:
        lock.release()
