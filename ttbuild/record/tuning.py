"""Recorded autotune choices -> tuning tables (`<dir>/<kernel>.json`, schema ttbuild.tuning/1, docs/CONTRACTS.md "Tuning tables"), so a served process tunes nothing at startup."""

from __future__ import annotations

import json
import os
import time

from ..fileio import atomic_write
from .rows import target_of

SCHEMA = "ttbuild.tuning/1"


def _config_id(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def _index(configs: dict, docs: list, cfg: dict) -> int:
    """The index of `cfg` among `docs` (appended when new)."""
    cid = _config_id(cfg)
    if cid not in configs:
        configs[cid] = len(docs)
        docs.append(cfg)
    return configs[cid]


def tables(events: list[dict], root: str) -> dict[str, dict]:
    """{table name: table document} for every autotuned kernel of `events`; the name is the
    kernel's, `<file stem>.<kernel>` when two recorded files define it."""
    groups: dict = {}
    for ev in events:
        if ev.get("event") != "autotune" or not ev.get("path"):
            continue
        rel = os.path.relpath(ev["path"], root).replace(os.sep, "/")
        groups.setdefault((rel, ev["kernel"]), []).append(ev)
    counts: dict = {}
    for _, kernel in groups:
        counts[kernel] = counts.get(kernel, 0) + 1
    out = {}
    for (rel, kernel), evs in sorted(groups.items()):
        configs: dict[str, int] = {}
        docs: list[dict] = []
        entries, seen = [], set()

        for ev in evs:
            key = tuple(ev["key"])
            if key in seen:
                continue
            seen.add(key)
            times = {str(_index(configs, docs, c)): ms for c, ms in ev.get("timings", [])}
            e = {"key": list(key), "config": _index(configs, docs, ev["config"]), "times_ms": times,
                 "device": target_of(ev.get("capability"))}
            entries.append(_with_call(e, ev, configs, docs))
        name = kernel if counts[kernel] == 1 else f"{rel.rsplit('/', 1)[-1].removesuffix('.py')}.{kernel}"
        out[name] = {"schema": SCHEMA, "kernel": kernel, "file": rel, "key": evs[0].get("key_names", []),
                     "rule": "exact key; else the nearest recorded key (ttbuild.runtime.tuned)",
                     "timing": {"method": "Triton's Autotuner (do_bench) in the recorded process"},
                     "configs": {str(i): c for i, c in enumerate(docs)},
                     **{k: evs[0][k] for k in ("reset_to_zero", "restore_value") if evs[0].get(k)},
                     "entries": sorted(entries, key=lambda e: json.dumps(e["key"])),
                     "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return out


def _with_call(entry: dict, ev: dict, configs: dict, docs: list) -> dict:
    """`entry` with what retuning its key needs (ttbuild.runtime.retune), when recorded: "args",
    "grids" ({config index: [x, y, z]}) and "constexprs" ({config index: {name: value}}, the
    heuristics' values)."""
    if "args" not in ev:
        return entry
    entry["args"] = ev["args"]
    entry["grids"], cx = {}, {}
    for cfg, per in ev.get("per_config", []):
        i = str(_index(configs, docs, cfg))
        entry["grids"][i] = per.get("grid")
        if per.get("constexprs"):
            cx[i] = per["constexprs"]
    if cx:
        entry["constexprs"] = cx
    return entry


def write_tables(events: list[dict], root: str, directory: str) -> list[str]:
    """Write each table (entries of an existing table for keys not recorded now are kept);
    returns the paths written."""
    written = []
    for name, doc in tables(events, root).items():
        path = os.path.join(directory, f"{name}.json")
        try:
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = None
        if isinstance(old, dict) and old.get("configs") == doc["configs"]:
            have = {json.dumps(e["key"]) for e in doc["entries"]}
            doc["entries"] += [e for e in old.get("entries", []) if json.dumps(e.get("key")) not in have]
            doc["entries"].sort(key=lambda e: json.dumps(e["key"]))
        os.makedirs(directory, exist_ok=True)
        atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        written.append(path)
    return written
