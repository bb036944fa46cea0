"""Recorded specializations -> variant rows: one row per distinct specialization plus one generic fallback row per kernel, dtypes and constexprs; deduplicated, sorted, TOML.

Rules (Triton 3.6's specialization, python/triton/runtime/jit.py and backends/nvidia):
- a parameter Triton made `constexpr` that the kernel does not annotate so is an integer equal
  to 1 (its `== 1` specialization): the row names it in `constexprs`; the fallback row takes it
  as a runtime `i32` instead;
- `tt.divisibility 16` on a pointer or integer is `:16` in the signature; the fallback row has
  none, so an alignment or size never seen in recording still finds a variant;
- a `None` argument and a `tl.dtype` constexpr are constexprs of both rows, written
  `{ none = true }` and `{ dtype = "bf16" }` (ttbuild.cxvalue);
- a tuple constexpr or `maxnreg` has no row form yet: the specialization is skipped and
  reported (RecordError lists are returned, never raised);
- a compile of an autotune config that Triton's autotuner timed as inf, NaN or None (its
  OutOfResources) is dropped (failed_configs).
`file` is the kernel's source path relative to the project root (`root`), whose
`variants.toml` the build reads (docs/CONTRACTS.md "Recorded rows").
"""

from __future__ import annotations

import hashlib
import json
import os

from .. import cxvalue
from ..errors import TTBuildError
from .failed import failed_configs

INT_TYPES = ("i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOAT_TYPES = ("fp16", "bf16", "fp32", "fp64")
ROW_KEYS = ("name", "file", "kernel", "signature", "constexprs", "num_warps", "num_stages", "num_ctas", "target")
HEADER = "# Recorded by `ttbuild record` (docs/CONTRACTS.md \"Recorded rows\"): what the project launched under Triton.\n"


class RecordError(TTBuildError, ValueError):
    """A record that cannot become a row (outside the root, a None argument, ...): names the kernel and why."""


def target_of(capability) -> str:
    """[9, 0] -> "cuda:90"; None -> the default target."""
    if not capability:
        return "cuda:90"
    return f"cuda:{capability[0]}{capability[1]}"


def _entry(sig: str, div16: bool) -> str:
    if sig.startswith("*k"):  # a `const` pointer: same ABI
        sig = "*" + sig[2:]
    if div16 and (sig.startswith("*") or sig in INT_TYPES and sig != "i1"):
        return sig + ":16"
    return sig


def event_rows(ev: dict, root: str, targets=None) -> tuple[list[dict], list[str]]:
    """(rows, problems) of one compile event: the specialized row and its fallback (the same
    when nothing is specialized). `targets`: the targets to build (default: the recording GPU's)."""
    where = f"{ev.get('module')}.{ev.get('qualname')}"
    path = ev.get("path") or ""
    rel = os.path.relpath(path, root) if path else ""
    if not path or rel.startswith(".."):
        return [], [f"{where}: {path or 'no source file'} is outside the project root {root}"]
    if ev.get("maxnreg") is not None:
        return [], [f"{where}: maxnreg={ev['maxnreg']} has no row form yet"]
    sig, constexprs, generic_sig, generic_cx = [], {}, [], {}
    div16 = set(ev.get("div16", ()))
    annotated = set(ev.get("annotated", ()))
    for name in ev["params"]:
        kind = ev["signature"][name]
        if kind != "constexpr":
            if not (kind.startswith("*") or kind in INT_TYPES or kind in FLOAT_TYPES):
                return [], [f"{where}: argument {name} of type {kind} has no row form yet"]
            sig.append(_entry(kind, name in div16))
            generic_sig.append(_entry(kind, False))
            continue
        # a dtype arrives as {"dtype": ...} from the record hook and as the live tl.dtype on
        # serve's miss path; None and dtypes are constexprs of both rows (ttbuild.cxvalue)
        value = cxvalue.to_json(ev.get("constants", {}).get(name))
        if not (value is None or isinstance(value, (bool, int, float, str)) or cxvalue.dtype_of(value)):
            return [], [f"{where}: argument {name}={json.dumps(value, default=str)} has no row form yet"]
        constexprs[name] = value
        if name not in annotated and type(value) is int and value == 1:  # Triton's == 1 specialization
            generic_sig.append("i32")
        else:
            generic_cx[name] = value
    options = {k: ev.get(k) for k in ("num_warps", "num_stages", "num_ctas")}
    if ev.get("enable_fp_fusion") is False:  # the build's options; written only off their defaults
        options["enable_fp_fusion"] = False
    if ev.get("debug"):
        options["debug"] = True
    rel = rel.replace(os.sep, "/")
    tlist = list(targets) if targets else [target_of(ev.get("capability"))]
    rows = []
    for t in tlist:
        for s, cx in ((sig, constexprs), (generic_sig, generic_cx)):
            row = {"file": rel, "kernel": ev["kernel"], "signature": ",".join(s), "constexprs": dict(sorted(cx.items())),
                   **options, "target": t}
            row["name"] = row_name(row)
            rows.append(row)
    return rows, []


def row_identity(row: dict) -> str:
    """What makes two rows the same build (everything but the name)."""
    return json.dumps({k: v for k, v in row.items() if k != "name"}, sort_keys=True)


def row_name(row: dict) -> str:
    """<kernel>_<8 hex of the row's identity>: stable across recordings and machines."""
    return f"{row['kernel']}_{hashlib.sha256(row_identity(row).encode()).hexdigest()[:8]}"


def merge_records(events: list[dict], root: str, existing: list[dict] = (), targets=None) -> tuple[list[dict], list[str]]:
    """(rows, problems): the rows of `existing` and of every compile event, each once, sorted
    by file, kernel, signature, constexprs and options (a diff shows what changed). The rows
    of compiles of autotune configs Triton could not run (failed_configs) are left out, also
    where `existing` holds them; `existing` rows may spell constexprs as variants.toml does."""
    seen: dict[str, dict] = {}
    problems: list[str] = []
    for row in existing:
        row = _read_row(row)
        seen.setdefault(row_identity(row), row)
    dropped = set(failed_configs(events))
    failed: set = set()
    for i, ev in enumerate(events):
        if ev.get("event") != "compile":
            continue
        rows, why = event_rows(ev, root, targets)
        if i in dropped:
            failed.update(row_identity(r) for r in rows)
            continue
        problems += why
        for row in rows:
            seen.setdefault(row_identity(row), row)
    kept = {k for i, ev in enumerate(events) if ev.get("event") == "compile" and i not in dropped
            for k in map(row_identity, event_rows(ev, root, targets)[0])} if failed else set()
    for k in failed - kept:
        seen.pop(k, None)
    stale = stale_sources(events, root)
    rows = sorted(seen.values(), key=lambda r: (r.get("file") or r.get("module") or "", r.get("kernel", ""), r.get("signature", ""), json.dumps(r.get("constexprs", {}), sort_keys=True),
                                                 r.get("num_warps") or 0, r.get("num_stages") or 0, r.get("num_ctas") or 0,
                                                 r.get("target") or ""))
    return rows, sorted(set(problems)) + stale


def _read_row(row: dict) -> dict:
    """A row as tomllib read it, its constexprs in the build's form ({ none = true } -> None)."""
    row = dict(row)
    if isinstance(row.get("constexprs"), dict):
        cx = {}
        for k, v in row["constexprs"].items():
            try:
                cx[k] = cxvalue.from_toml(v)
            except ValueError:  # not ours to judge here: the build reports it at the row
                cx[k] = v
        row["constexprs"] = cx
    return row


def stale_sources(events: list[dict], root: str) -> list[str]:
    """A problem line for each source whose content differs from what was recorded."""
    out = set()
    for ev in events:
        path, digest = ev.get("path"), ev.get("sha256")
        if not path or not digest:
            continue
        try:
            with open(path, "rb") as f:
                now = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            out.add(f"{path}: recorded, now missing")
            continue
        if now != digest:
            out.add(f"{os.path.relpath(path, root)}: changed since it was recorded (sha256 {digest[:12]} then, {now[:12]} now)")
    return sorted(out)


def _toml_value(v) -> str:
    if v is None:  # a None constexpr (TOML has no null; ttbuild.cxvalue)
        return "{ none = true }"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise RecordError(f"cannot write {v!r} in a variant row")


def rows_text(rows: list[dict], sources: dict | None = None, tables: dict | None = None) -> str:
    """The variants.toml text of `rows`, after the other top-level `tables` of the file
    (`[project]`, `[package]`: kept as they were read); `sources` ({file: "module.qualname
    sha256:..."}) adds one comment line above each file's first row."""
    out, last = [HEADER], None
    for name, table in (tables or {}).items():
        out.append(f"\n[{name}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    for row in rows:
        file = row.get("file")
        if sources is not None and file != last and file in sources:
            out.append(f"\n# {file}: {sources[file]}")
        last = file
        out.append("\n[[variant]]")
        for k in ROW_KEYS:
            if k in row and row[k] is not None and not (k == "constexprs" and not row[k]):
                out.append(f"{k} = {_toml_value(row[k])}")
        for k in sorted(set(row) - set(ROW_KEYS)):
            out.append(f"{k} = {_toml_value(row[k])}")
    return "\n".join(out) + "\n"


def source_notes(events: list[dict], root: str) -> dict:
    """{file relative to root: "sha256:<12 hex> module.qualname, ..."} for rows_text's comments."""
    notes: dict = {}
    for ev in events:
        path = ev.get("path")
        if not path:
            continue
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        names, digest = notes.setdefault(rel, [set(), ev.get("sha256") or ""])
        names.add(f"{ev.get('module')}.{ev.get('qualname')}")
    return {f: f"sha256:{d[:12]} " + ", ".join(sorted(n)) for f, (n, d) in notes.items()}
