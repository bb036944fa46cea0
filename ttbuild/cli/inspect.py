"""`ttbuild list`, `explain VARIANT`, `show VARIANT --stage S`: read the task graph and doit's saved state, build nothing.

Status comes from doit's own `Dependency.get_status` over `artifacts/.doit.db`, the check
`doit run` makes, so `list` and `build` never disagree. `explain` adds what doit's DB keeps
from the last build: the variant's options (saved by its `meta` task's config_changed) and each
file dependency's saved state, and compares them with now.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from .loader import Project

# Which stage options come from which variant field (docs/CONTRACTS.md, stage table).
FIELD_STAGE = {"file": "parse", "kernel": "parse", "signature": "ttir", "params": "ttir",
               "constexprs": "ttir", "num_warps": "ttgir", "num_ctas": "ttgir", "num_stages": "ttgir",
               "target": "ttgir", "enable_fp_fusion": "llir", "debug": "llir", "arch": "ptx",
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
    from ttbuild.graph import chain, stage_versions

    names = [f"{n.stage}:{n.key}" for n in chain(variant, stage_versions(project.stage_package))]
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


def _find(project: Project, name: str):
    variants = project.variants()
    for v in variants:
        if v.name == name:
            return v
    import difflib

    close = difflib.get_close_matches(name, [v.name for v in variants], n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise SystemExit(f"ttbuild: error: no variant {name!r} in {project.kernels}/variants.toml{hint}")


def cmd_list(project: Project, out=None) -> int:
    """One line per variant: `up-to-date` or `needs build (stage, ...)`, then a count."""
    out = out or sys.stdout
    tasks, dep = project.tasks(), project.dependency()
    try:
        variants = project.variants()
        stale = 0
        width = max((len(v.name) for v in variants), default=0)
        for v in variants:
            states = variant_states(project, v, tasks, dep)
            todo = [s.stage for s in states if s.status in ("run", "new")]
            if todo:
                stale += 1
            status = "up-to-date" if not todo else f"needs build ({', '.join(todo)})"
            out.write(f"{v.name:<{width}}  {v.kernel} ({v.file}) until {v.until}  {status}\n")
        out.write(f"{len(variants)} variants, {len(variants) - stale} up to date, {stale} need a build\n")
    finally:
        dep.close()
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
    from ttbuild.graph import stage_versions
    from ttbuild.graph.tasks import variant_doc

    out = out or sys.stdout
    variant = _find(project, name)
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
        now = stage_versions(project.stage_package)
        for stage, version in (before.get("versions") or {}).items():
            if now.get(stage) != version:
                changes.append(f"{stage} stage VERSION: {version} -> {now.get(stage)}  ({stage} and later)")
        from ttbuild.codedigest import stage_digest

        for stage, code in (before.get("code") or {}).items():
            if stage_digest(stage, project.stage_package) != code:
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
    from ttbuild.graph import chain, output_paths, stage_versions
    from ttbuild.graph.keys import OUTPUT_ROLES

    out = out or sys.stdout
    variant = _find(project, name)
    nodes = {n.stage: n for n in chain(variant, stage_versions(project.stage_package))}
    if stage not in nodes:
        raise SystemExit(f"ttbuild: error: variant {name} builds {', '.join(nodes)} only (until = "
                         f"{variant.until!r}), not {stage}")
    role = role or OUTPUT_ROLES[stage][0]
    if role not in OUTPUT_ROLES[stage]:
        raise SystemExit(f"ttbuild: error: stage {stage} writes {', '.join(OUTPUT_ROLES[stage])}, not {role}")
    path = output_paths(project.artifacts, stage, nodes[stage].key, variant.kernel)[role]
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
