"""Compiles of autotune configs that Triton could not run (a time of inf, NaN or None in the autotune event's `timings`): found so that they never become rows.

Triton 3.6's Autotuner benchmarks every config; one whose launch raises OutOfResources (shared
memory or registers over the device's limit) or a CompileTimeAssertionFailure is timed
`float("inf")` (python/triton/runtime/autotuner.py `_bench`), but its specialization was
compiled, so the recorder saw a compile event for it. Such a row would build a kernel that
cannot launch. A compile event is dropped when it is of the same kernel (module, qualname),
the same pointer dtypes as the autotune key's trailing dtypes (Triton appends each tensor
argument's dtype to the key; when the counts differ, any key of the kernel), its constants hold
the config's kwargs and its num_warps / num_stages / num_ctas are the config's, and no autotune
event of that scope gave the config a finite time.
"""

from __future__ import annotations

import json
import math


def _failed_time(t) -> bool:
    return t is None or isinstance(t, str) or (isinstance(t, (int, float)) and not math.isfinite(t))


def _config_id(cfg: dict) -> str:
    return json.dumps([cfg.get("kwargs") or {}, cfg.get("num_warps"), cfg.get("num_stages"), cfg.get("num_ctas") or 1],
                      sort_keys=True)


def _pointer_dtypes(ev: dict) -> tuple:
    sig = ev.get("signature") or {}
    return tuple(sig[p].removeprefix("*k").removeprefix("*") for p in ev.get("params", ())
                 if isinstance(sig.get(p), str) and sig[p].startswith("*"))


def _scopes(events: list[dict]) -> dict:
    """{(module, qualname): [(dtypes, {config id: config}) of configs failed in that scope]}."""
    status: dict = {}  # (module, qualname, dtypes) -> {config id: [config, failed, ran]}
    for ev in events:
        if ev.get("event") != "autotune":
            continue
        key, names = list(ev.get("key") or []), list(ev.get("key_names") or [])
        dtypes = tuple(key[len(names):])
        entry = status.setdefault((ev.get("module"), ev.get("qualname"), dtypes), {})
        for cfg, t in ev.get("timings") or ():
            slot = entry.setdefault(_config_id(cfg), [cfg, False, False])
            slot[1 if _failed_time(t) else 2] = True
    out: dict = {}
    for (module, qualname, dtypes), configs in status.items():
        bad = {cid: c for cid, (c, failed, ran) in configs.items() if failed and not ran}
        if bad:
            out.setdefault((module, qualname), []).append((dtypes, bad))
    return out


def _matches(ev: dict, cfg: dict) -> bool:
    constants = ev.get("constants") or {}
    return (all(k in constants and constants[k] == v and type(constants[k]) is type(v)
                for k, v in (cfg.get("kwargs") or {}).items())
            and ev.get("num_warps") == cfg.get("num_warps") and ev.get("num_stages") == cfg.get("num_stages")
            and (ev.get("num_ctas") or 1) == (cfg.get("num_ctas") or 1))


def failed_configs(events: list[dict]) -> list[int]:
    """Indices into `events` of the compile events of configs Triton could not run (module docstring)."""
    scopes = _scopes(events)
    out = []
    for i, ev in enumerate(events):
        if ev.get("event") != "compile" or (ev.get("module"), ev.get("qualname")) not in scopes:
            continue
        mine = _pointer_dtypes(ev)
        for dtypes, bad in scopes[(ev.get("module"), ev.get("qualname"))]:
            if (dtypes == mine or len(dtypes) != len(mine)) and any(_matches(ev, c) for c in bad.values()):
                out.append(i)
                break
    return out
