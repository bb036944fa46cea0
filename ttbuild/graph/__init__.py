"""The build graph: variant list -> chained stage keys -> doit tasks; importing it never imports MLIR or llvmlite.

`dodo.py` and `python -m ttbuild` both wire `doit_config()` and `task_creators()` from here.
"""

from __future__ import annotations

from pathlib import Path

from ttbuild.stages import StageSet

from .doitstate import keep_skipped_state
from .keys import chain, stage_key, stage_options, xxh3_hex
from .tasks import DEP_FILE, TASK_GROUPS, doit_config, generate_tasks, output_paths
from .variants import Variant, VariantError, load_variants

__all__ = [
    "DEP_FILE", "TASK_GROUPS", "Variant", "VariantError", "chain", "doit_config", "generate_tasks",
    "in_shard", "load_variants", "namespace", "output_paths", "stage_key", "stage_options", "xxh3_hex",
]


def namespace(kernels_dir: str | Path = "kernels", artifacts_dir: str | Path = "artifacts",
              stage_package: "StageSet | str | None" = None, shard: tuple[int, int] | None = None,
              config: dict | None = None, tasks: list[dict] | None = None) -> dict:
    """A doit namespace (what a dodo module holds): DOIT_CONFIG plus one task creator.

    stage_package: the `ttbuild.stages.StageSet` that compiles (or its package's name; default
    the compiler's own).

    shard: (i, n), 1 <= i <= n, keeps only the variants `in_shard` assigns to shard i (a CI
    matrix job builds one shard; stage tasks two shards share are built by both, and the
    cache makes the second one a hit). config: entries that override DOIT_CONFIG (the CLI's
    reporter and `continue`). tasks: what `generate_tasks` yielded for this project's variants
    a moment ago (the build's prefetch walked them), used as they are instead of loading the
    list and generating them again (1000 variants: 0.3-0.4 s); doit consumes the dicts, so a
    list serves one namespace. A bad variant list surfaces as doit's InvalidDodoFile, which doit
    prints as `ERROR: <file:line:col ...>` and exit status 3, without a traceback.
    """

    keep_skipped_state()  # a fixed kernel reruns only what its fix changed (ttbuild.graph.doitstate)

    def task_ttbuild():
        """ttbuild kernels: parse -> ttir -> ttgir -> llir -> ptx -> cubin -> meta."""
        from doit.exceptions import InvalidDodoFile

        from ttbuild.errors import CompilationError

        if tasks is not None:
            yield from tasks
            return
        keep_going = {**doit_config(artifacts_dir), **(config or {})}.get("continue", False)
        row_errors: list = []
        try:
            variants = load_variants(kernels_dir, row_errors if keep_going else None)
            if shard is not None:
                variants = [v for v in variants if in_shard(v.name, *shard)]
            yield from generate_tasks(kernels_dir, artifacts_dir, stage_package, variants=variants)
        except (VariantError, CompilationError) as exc:  # a bad row, or its unreadable decorators
            raise InvalidDodoFile(exc.render()) from None
        # With --continue (plain doit always continues) a bad row fails on its own: a task that
        # reports its diagnostic, while every other variant builds.
        for index, err in row_errors:
            yield {"basename": "meta", "name": f"row{index}", "actions": [(_bad_row, [err.render()])],
                   "uptodate": [False], "doc": f"variants.toml row #{index} (not built)"}

    cfg = {**doit_config(artifacts_dir), **(config or {})}
    if hasattr(cfg.get("reporter"), "for_project"):  # the build record names the kernels folder
        cfg["reporter"] = cfg["reporter"].for_project(kernels_dir, shard)
    return {"DOIT_CONFIG": cfg, "task_ttbuild": task_ttbuild}


def _bad_row(message: str):
    """doit action of a variants.toml row that failed validation: fails with its diagnostic."""
    from doit.exceptions import TaskFailed

    return TaskFailed(message)


def in_shard(variant_name: str, i: int, n: int) -> bool:
    """True when variant `variant_name` belongs to shard `i` of `n` (1-based): xxh3_64 of the
    name modulo n, so the split depends on nothing but the name (not the list's order, the
    machine or Python's per-process hash seed) and every variant lands in exactly one shard.
    Raises ValueError unless 1 <= i <= n."""
    if not 1 <= i <= n:
        raise ValueError(f"shard {i}/{n}: need 1 <= I <= N")
    return int(xxh3_hex(variant_name), 16) % n == i - 1
