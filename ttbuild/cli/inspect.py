"""`ttbuild list`, `explain VARIANT`, `show VARIANT --stage S`: read the task graph and doit's saved state, build nothing.

Status comes from doit's own `Dependency.get_status` over `artifacts/.doit.db`, the check
`doit run` makes, so `list` and `build` never disagree. `explain` adds what doit's DB keeps
from the last build: the variant's options (saved by its `meta` task's config_changed) and each
file dependency's saved state, and compares them with now.

A variants.toml row that fails on its own (a schema error, an `@triton.autotune` /
`@triton.heuristics` decorator that cannot be read) is handled as a continuing build handles
it (`meta:row<N>`, ttbuild.graph.namespace): the row is left out and its located diagnostic
printed, the other rows are listed or shown. `list` then exits 3 (a bad variant list, as the
build without --continue); `show` / `explain` exit 3 when the variant asked for may be one of
that row's (a warning otherwise).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from .loader import Project

# Which stage options come from which variant field (docs/CONTRACTS.md, stage table).
FIELD_STAGE = {"file": "parse", "kernel": "parse", "signature": "ttir", "params": "ttir",
               "constexprs": "ttir", "num_warps": "ttgir", "num_ctas": "ttgir", "num_stages": "ttgir",
               "target": "ttgir", "disable_mma_v3": "ttgir", "disable_tma": "ttir", "enable_fp_fusion": "llir", "debug": "llir", "arch": "ptx",
               "ptxas_options": "cubin", "until": "meta", "name": "meta", "index": "meta"}


@dataclass
class TaskState:
    """One task of a variant: `status` is "up-to-date", "run" (doit would execute it now),
    "after" (runs only if a task it depends on produces different bytes) or "new" (never built
    under this key); `reasons` are human-readable."""

    name: str
    stage: str
    status: str
    reasons: list


def _config_now(task) -> str | None:
    """The string a task's config_changed up-to-date check compares (its stage, VERSION, code
    digest and options, as ttbuild.graph.tasks writes them), or None."""
    from doit.tools import config_changed

    for u in task.uptodate:
        obj = u[0] if isinstance(u, tuple) else u
        if isinstance(obj, config_changed):
            return obj.config if isinstance(obj.config, str) else None
    return None


def _config_reasons(saved: str | None, now: str | None) -> list[str]:
    """What changed in a stage task's config: the compiler (code digest), the VERSION, options."""
    try:
        before, after = json.loads(saved), json.loads(now)
    except (TypeError, ValueError):
        return []
    out = []
    if before.get("code") != after.get("code"):
        out.append("compiler changed (the source of what this stage runs: ttbuild.codedigest)")
    if before.get("version") != after.get("version"):
        out.append(f"stage VERSION {before.get('version')} -> {after.get('version')}")
    if before.get("options") != after.get("options"):
        out.append("options changed")
    return out


def _describe(reasons: dict, db_has: bool, config: list[str] | None = None) -> list[str]:
    out = []
    if not db_has:
        out.append("never built")
    for path in reasons.get("changed_file_dep", []):
        out.append(f"input changed: {path}")
    for path in reasons.get("missing_target", []):
        if db_has:
            out.append(f"output missing: {path}")
    for path in reasons.get("missing_file_dep", []):
        out.append(f"input not built yet: {path}")
    if reasons.get("uptodate_false") and db_has:
        out.extend(config or ["options or ttbuild version changed since the last build"])
    if reasons.get("checker_changed"):
        out.append("file checker changed")
    for key in ("added_file_dep", "removed_file_dep"):
        for path in reasons.get(key) or []:
            out.append(f"{key.split('_')[0]} input: {path}")
    return out


def variant_states(project: Project, variant, tasks: dict, dep) -> list[TaskState]:
    """Status of each task `variant` builds (its stage chain, then its meta task), in order."""
    from ttbuild.graph import chain

    names = [f"{n.stage}:{n.key}" for n in chain(variant, project.stages)]
    if variant.until == "cubin":
        names.append(f"meta:{variant.name}")
    states, pending = [], set()
    for name in names:
        task = tasks[name]
        db_has = dep._in(name)  # before get_status: doit's SqliteDB caches a miss as an empty entry
        res = dep.get_status(task, tasks, get_log=True)
        upstream = [d for d in task.task_dep if d in pending]
        if not db_has and not name.startswith("meta:"):
            status, reasons = "new", ["new stage key: never built with these inputs' options and stage version"]
        elif upstream:
            # What doit reports now for a task behind a pending one is moot: its input is
            # about to be rewritten; whether it runs depends on the new bytes.
            status = "after"
            reasons = [f"runs if {', '.join(upstream)} writes different bytes (else cut off early)"]
        elif res.status != "up-to-date" or not db_has:
            config = _config_reasons(dep.get_values(name).get("_config_changed"), _config_now(task)) \
                if not name.startswith("meta:") else None
            status, reasons = "run", _describe(res.reasons, db_has, config)
        else:
            status, reasons = "up-to-date", []
        if status != "up-to-date":
            pending.add(name)
        states.append(TaskState(name, name.split(":")[0], status, reasons))
    return states


@dataclass
class RowFailure:
    """A variants.toml row that does not load, so its variants are unknown: `text` is its
    diagnostic as the build log prints it (file:line:col, source line, caret); name, kernel and
    file are the row's own when it gives them as strings."""

    index: int
    text: str
    name: str | None = None
    kernel: str | None = None
    file: str | None = None

    @property
    def label(self) -> str:
        return f"variants.toml row #{self.index}" + (f" ({self.name})" if self.name else "")

    def may_define(self, variant: str) -> bool:
        """Whether `variant` may be one of this row's: the row's name, or an autotune /
        heuristics expansion of it (`<name>.c0...`); any name when the row names none."""
        return self.name is None or variant == self.name or variant.startswith(self.name + ".")


def _rows(project: Project) -> list:
    """The [[variant]] tables of the project's variants.toml as TOML reads them ([] if it cannot)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised only on 3.10
        import tomli as tomllib

    from ttbuild.graph.variants import VARIANTS_FILE

    try:
        rows = tomllib.loads((project.kernels / VARIANTS_FILE).read_text(encoding="utf-8")).get("variant")
    except (OSError, ValueError):  # tomllib.TOMLDecodeError is a ValueError
        return []
    return rows if isinstance(rows, list) else []


def load(project: Project) -> tuple[list, list[RowFailure]]:
    """The project's variants and the rows that failed on their own, the way a continuing build
    loads them (ttbuild.graph.load_variants with row_errors; each diagnostic rendered by the
    build log's ttbuild.locs.render_error). Raises VariantError for a list that
    fails as a whole (TOML syntax, an unknown top-level key)."""
    from ttbuild.locs import render_error

    row_errors: list = []
    variants = project.variants(row_errors)
    rows = _rows(project) if row_errors else []
    failures = []
    for index, exc in row_errors:
        row = rows[index - 1] if 0 < index <= len(rows) and isinstance(rows[index - 1], dict) else {}
        given = {k: row.get(k) if isinstance(row.get(k), str) else None for k in ("name", "kernel", "file")}
        failures.append(RowFailure(index, render_error(exc, None), **given))
    return variants, failures


def write_row_failures(failures: list[RowFailure], err, lead: str = "ERROR:") -> None:
    """Each failed row's label and diagnostic on `err` (`ERROR:` as ttbuild prints a bad
    variant list; `ttbuild: warning:` where the command could still do its work)."""
    for f in failures:
        err.write(f"{lead} {f.label} does not load; its variants are left out:\n{f.text}\n")
    err.flush()


def _find(project: Project, name: str, err=None):
    """The variant called `name`, or None when it may belong to a row that does not load (that
    row's diagnostic is printed; the caller exits 3). Rows that fail elsewhere are warned about.
    An unknown name with no failed row to blame: SystemExit (status 2) with close matches."""
    err = err or sys.stderr
    variants, failures = load(project)
    for v in variants:
        if v.name == name:
            write_row_failures(failures, err, "ttbuild: warning:")
            return v
    import difflib

    suspects = [f for f in failures if f.may_define(name)]
    if suspects:
        write_row_failures(suspects, err)
        rows = ", ".join(f"#{f.index}" for f in suspects)
        err.write(f"ttbuild: error: variant {name!r} is not available: {project.kernels}/variants.toml "
                  f"row{'s' if len(suspects) > 1 else ''} {rows}, which may define it, does not load\n")
        return None
    write_row_failures(failures, err, "ttbuild: warning:")
    names = [v.name for v in variants] + [f.name for f in failures if f.name]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise SystemExit(f"ttbuild: error: no variant {name!r} in {project.kernels}/variants.toml{hint}")


def cmd_list(project: Project, out=None, err=None) -> int:
    """One line per variant: `up-to-date` or `needs build (stage, ...)`, then a count. A row that
    does not load gets a line saying so, its diagnostic goes to `err`, and the status is 3."""
    out = out or sys.stdout
    err = err or sys.stderr
    tasks, dep = project.tasks(), project.dependency()
    try:
        variants, failures = load(project)
        stale = 0
        width = max([len(v.name) for v in variants] + [len(f.name or f"row #{f.index}") for f in failures],
                    default=0)
        # file order: a row's variants, or its failure, where the row stands (sort is stable)
        for entry in sorted([*variants, *failures], key=lambda e: e.index):
            if isinstance(entry, RowFailure):
                what = f"  {entry.kernel} ({entry.file})" if entry.kernel and entry.file else ""
                out.write(f"{entry.name or f'row #{entry.index}':<{width}}{what}  error: does not load "
                          f"(variants.toml row #{entry.index}; diagnostic on stderr)\n")
                continue
            states = variant_states(project, entry, tasks, dep)
            todo = [s.stage for s in states if s.status in ("run", "new")]
            if todo:
                stale += 1
            status = "up-to-date" if not todo else f"needs build ({', '.join(todo)})"
            out.write(f"{entry.name:<{width}}  {entry.kernel} ({entry.file}) until {entry.until}  {status}\n")
        failed = f"; {len(failures)} variants.toml row{'s' if len(failures) != 1 else ''} failed to load" \
            if failures else ""
        out.write(f"{len(variants)} variants, {len(variants) - stale} up to date, {stale} need a build{failed}\n")
    finally:
        dep.close()
    if failures:
        out.flush()
        write_row_failures(failures, err)
        return 3  # a bad variant list, as `ttbuild build` without --continue says for such a row
    return 0


def option_changes(old: dict, new: dict) -> list[str]:
    """`field: old -> new (stage)` for every variant field whose value changed."""
    lines = []
    for key in sorted(set(old) | set(new)):
        if key in ("index",) or old.get(key) == new.get(key):
            continue
        lines.append(f"{key}: {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}"
                     f"  ({FIELD_STAGE.get(key, 'meta')} and later)")
    return lines


def cmd_explain(project: Project, name: str, out=None) -> int:
    """Which of VARIANT's tasks would run and why; the option changes since its last build."""
    from ttbuild.graph.tasks import variant_doc

    out = out or sys.stdout
    variant = _find(project, name)
    if variant is None:
        return 3
    tasks, dep = project.tasks(), project.dependency()
    try:
        states = variant_states(project, variant, tasks, dep)
        saved = dep.get_values(f"meta:{variant.name}").get("_config_changed")
    finally:
        dep.close()
    out.write(f"{variant.name}: {variant.kernel} ({variant.file})\n")
    if saved:
        before = json.loads(saved)
        changes = option_changes(before.get("variant", {}), variant_doc(variant))
        now = project.stages.versions
        for stage, version in (before.get("versions") or {}).items():
            if now.get(stage) != version:
                changes.append(f"{stage} stage VERSION: {version} -> {now.get(stage)}  ({stage} and later)")
        from ttbuild.codedigest import module_digest

        for stage, code in (before.get("code") or {}).items():
            if module_digest(project.stages.module_name(stage)) != code:
                changes.append(f"compiler changed: the source {stage} runs  ({stage} and later)")
        out.write("options or stage versions changed since the last build:\n" if changes else
                  "options: unchanged since the last build\n")
        for line in changes:
            out.write(f"  {line}\n")
    else:
        out.write("options: no earlier build of this variant recorded\n")
    labels = {"up-to-date": "up to date", "run": "would run", "new": "would run", "after": "may run"}
    for s in states:
        out.write(f"  {s.stage:<6} {labels[s.status]:<11} {s.name}\n")
        for reason in s.reasons:
            out.write(f"         - {reason}\n")
    runs = [s.stage for s in states if s.status in ("run", "new")]
    out.write(f"would run: {', '.join(runs) if runs else 'nothing'}\n")
    return 0


def cmd_show(project: Project, name: str, stage: str, role: str | None = None,
             path_only: bool = False, out=None) -> int:
    """Print VARIANT's output file of STAGE (text), or its path and size (binary cubin, or --path)."""
    from ttbuild.graph import chain, output_paths

    out = out or sys.stdout
    variant = _find(project, name)
    if variant is None:
        return 3
    nodes = {n.stage: n for n in chain(variant, project.stages)}
    if stage not in nodes:
        raise SystemExit(f"ttbuild: error: variant {name} builds {', '.join(nodes)} only (until = "
                         f"{variant.until!r}), not {stage}")
    outputs = project.stages[stage].outputs
    role = role or outputs[0]
    if role not in outputs:
        raise SystemExit(f"ttbuild: error: stage {stage} writes {', '.join(outputs)}, not {role}")
    path = output_paths(project.artifacts, stage, nodes[stage].key, variant.kernel, project.stages)[role]
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        raise SystemExit(f"ttbuild: error: {path} is not built yet (run `ttbuild build`)") from None
    if path_only:
        out.write(path + "\n")
        return 0
    try:
        text = data.decode("utf-8")
        if "\0" in text:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
    except UnicodeDecodeError:
        out.write(f"{path}: binary, {len(data)} bytes\n")
        return 0
    out.write(text)  # exactly the file: `ttbuild show ... > x.ttgir` reproduces it
    return 0
