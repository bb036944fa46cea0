"""Timing of autotune configs for `ttbuild tune` (ttbuild.runtime.tunecli) and online tuning.

Times every config of each autotuned kernel on this GPU for the shapes its rows list, and writes
`artifacts/tuning/<kernel>.json`.

Needs the runtime, torch and a GPU, not the compiler (it runs where the library is used). Each
shape comes from the row's `tune = { args = "file.py:function", shapes = [...] }` plan: the
function, imported from the kernels folder, takes the shape's values as keywords and returns
`(args, grid)` (the runtime arguments in order; grid a tuple or a function of META, as in
Triton). Timing follows `triton.testing.do_bench` (python/triton/testing.py): warm-up for
about `warmup_ms`, then about `rep_ms` of runs, each after the L2 cache is flushed by writing a
256 MB buffer, timed with CUDA events; a config's time is the median, in milliseconds. As in
Triton's Autotuner, the `reset_to_zero` arguments are zeroed before every run and the
`restore_value` ones restored after timing; a config that fails to launch (too much shared
memory, ...) gets no time and cannot win. The winner is the config with the smallest median.
Timings are cached like build stages (`--cache URL`, else TTBUILD_CACHE, else the local cache
directory; entry_key: the group's cubins, the shape, the GPU, the timing parameters): the same
library on the same kind of GPU is tuned once, `--force` times again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import time

from ..canonical import canonical_bytes
from ..fileio import atomic_write
from .tuningtable import RULE, TABLE_SCHEMA, table_path

FLUSH_BYTES = 256 * 1024 * 1024


def _torch():
    import torch

    return torch


def bench(fn, *, zero=(), restore=(), warmup_ms: float = 25.0, rep_ms: float = 100.0,
          max_reps: int = 1000) -> float:
    """Median milliseconds of `fn()` (a launch on torch's current stream), do_bench's method
    (module docstring). `zero`: tensors zeroed before each run; `restore`: tensors put back
    afterwards. Raises what `fn` raises."""
    torch = _torch()
    saved = [t.clone() for t in restore]
    cache = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def once():
        for t in zero:
            t.zero_()
        fn()

    once()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        once()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        once()
    n = max(5, min(max_reps, int(rep_ms / estimate)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        cache.zero_()
        for t in zero:
            t.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    for t, s in zip(restore, saved):
        t.copy_(s)
    return times[len(times) // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2


def time_configs(launcher, args: tuple, grid, configs=None, **bench_kw) -> dict[int, float | None]:
    """Config index -> median ms for one call's `args` (as the kernel is called: every parameter
    in order, or the runtime ones alone when they come first; None: it failed to launch). Arguments
    named in the kernel's reset_to_zero / restore_value are handled as Triton's Autotuner does."""
    names = launcher.base.runtime_names
    values, given, _ = launcher.bind(args)
    record = next(v.autotune for v in launcher.variants if v.autotune)
    zero = [values[names.index(n)] for n in record.get("reset_to_zero", []) if n in names]
    restore = [values[names.index(n)] for n in record.get("restore_value", []) if n in names]
    out = {}
    for c in (launcher.configs if configs is None else configs):
        try:
            call = launcher.launcher_for(c, values, given).runtime_call(grid)
            out[c] = bench(functools.partial(call, *values), zero=zero, restore=restore, **bench_kw)
        except Exception as exc:  # noqa: BLE001 - Triton's Autotuner too gives a failing config no time
            _torch().cuda.synchronize()
            out[c] = None
            print(f"  config {c}: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
    return out


def winner(times: dict) -> int | None:
    """The fastest config of `times` (first listed on a tie), None when none ran."""
    ran = [(t, c) for c, t in times.items() if t is not None]
    return min(ran, key=lambda x: x[0])[1] if ran else None


def device_info() -> dict:
    """The GPU a table was tuned on: name, capability, SM count, the kernel driver's version
    (/proc/driver/nvidia/version on Linux) and cuDriverGetVersion's, torch's CUDA, a clocks note."""
    torch = _torch()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    driver = None
    try:
        with open("/proc/driver/nvidia/version") as f:
            # "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
            m = re.search(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s", f.read())
            driver = m.group(1) if m else None
    except OSError:
        pass
    try:
        from .driver import CudaDriver

        cuda_driver = CudaDriver().driver_version()
    except Exception:  # noqa: BLE001 - a note in the table, never a reason to fail tuning
        cuda_driver = None
    return {"name": props.name, "capability": list(torch.cuda.get_device_capability()),
            "multiprocessors": props.multi_processor_count, "driver": driver, "cuda_driver": cuda_driver,
            "cuda": torch.version.cuda, "torch": torch.__version__,
            "clocks": "not locked by ttbuild: the GPU's default application clocks and boost"}


def load_harness(kernels_dir: str, spec: str):
    """The `file.py:function` of a tune plan, imported from the kernels folder."""
    file, func = spec.split(":")
    path = os.path.join(kernels_dir, file)
    name = "ttbuild_tune_" + os.path.splitext(file)[0].replace("/", "_").replace(".", "_")
    module = sys.modules.get(name)
    if module is None:
        mspec = importlib.util.spec_from_file_location(name, path)
        if mspec is None or mspec.loader is None:
            raise FileNotFoundError(f"{path}: cannot import the tune harness")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[name] = module
        mspec.loader.exec_module(module)
    try:
        return getattr(module, func)
    except AttributeError:
        raise AttributeError(f"{path} defines no function {func!r} (the tune plan's args)") from None


def plans(launcher) -> dict[str, dict]:
    """group (row name) -> its tune plan, for the groups whose rows have one."""
    out = {}
    for v in launcher.variants:
        rec = v.autotune
        if rec and rec.get("tune") and rec["group"] not in out:
            out[rec["group"]] = rec["tune"]
    return out


def entry_key(launcher, group: str, shape: dict, device: dict, bench_kw: dict) -> str:
    """The cache key of one timed (group, shape): sha256 over the group's variants (names and
    cubin sha256), the shape, the GPU (name, capability, CUDA) and the timing parameters. The
    same library tuned on the same kind of GPU finds its times in the cache (local or remote,
    ttbuild.cache), as a build finds its stages."""
    variants = {v.variant: v.images[0].sha256 if v.images else "" for v in launcher.variants
                if v.autotune and v.autotune["group"] == group}
    doc = {"schema": "ttbuild.tune/1", "kernel": launcher.kernel, "group": group, "shape": shape,
           "variants": variants, "device": {k: device.get(k) for k in ("name", "capability", "cuda")},
           "timing": bench_kw}
    return hashlib.sha256(canonical_bytes(doc)).hexdigest()


def tune_kernel(launcher, kernels_dir: str, tuning_dir: str, table_name: str,
                progress=None, only: dict | None = None, cache=None, **bench_kw) -> dict:
    """Tune every planned (group, shape) of one kernel and write its table; returns the table
    document. `only`: group -> plan to use instead of the rows' plans. `cache`: a
    ttbuild.cache.Cache holding earlier timings (entry_key); a hit is not timed again. Entries
    for other keys already in the table are kept."""
    path = table_path(tuning_dir, table_name)
    old = []
    if os.path.exists(path):
        with open(path, "rb") as f:
            old = json.loads(f.read()).get("entries", [])
    entries = []
    device = device_info()
    for group, plan in (plans(launcher) if only is None else only).items():
        make = load_harness(kernels_dir, plan["args"])
        for shape in plan["shapes"]:
            ckey = entry_key(launcher, group, shape, device, bench_kw)
            hit = cache.get(ckey) if cache is not None else None
            if hit is not None:
                entries.append(json.loads(hit["entry"]))
                times = {int(c): t for c, t in entries[-1]["times_ms"].items()}
            else:
                args, grid = make(**shape)
                args = tuple(args)
                key = launcher.key_of(launcher.bind(args)[0])
                configs = [c for c in launcher.configs
                           if any(v.autotune["group"] == group for v in launcher.variants_of(c))]
                times = time_configs(launcher, args, grid, configs, **bench_kw)
                entries.append(entry(group, key, times, shape))
                if cache is not None and entries[-1]["config"] is not None:
                    cache.put(ckey, {"entry": canonical_bytes(entries[-1])})
            if progress is not None:
                progress(group, shape, times, entries[-1]["config"], hit is not None)
    return write_table(launcher, path, entries, old, device=device, **bench_kw)


def entry(group: str, key: tuple, times: dict, shape: dict | None = None) -> dict:
    """One table entry: the winner of `times` (config -> median ms or None) for `key`."""
    e = {"group": group, "key": list(key), "config": winner(times),
         "times_ms": {str(c): (round(t, 6) if t is not None else None) for c, t in times.items()}}
    if shape is not None:
        e["shape"] = dict(shape)
    return e


def write_table(launcher, path: str, entries: list, old=(), device: dict | None = None,
                **bench_kw) -> dict:
    """Write the kernel's table to `path` (atomically): `entries` (those with a winner) after the
    `old` ones for other (group, key); returns the document."""
    fresh = {(e["group"], tuple(e["key"])) for e in entries}
    kept = [e for e in old if (e.get("group"), tuple(e.get("key", []))) not in fresh]
    first = launcher.variants[0]
    doc = {
        "schema": TABLE_SCHEMA, "kernel": first.kernel, "file": first.file, "key": list(launcher.key_names),
        "rule": RULE, "device": device if device is not None else device_info(),
        "timing": {"method": "median of CUDA-event times, L2 flushed before each run (triton.testing.do_bench)",
                   **{k: v for k, v in bench_kw.items()}},
        "configs": {str(c): {"kwargs": launcher.config_kwargs[c],
                             **{k: launcher.variants_of(c)[0].autotune.get(k) for k in ("num_warps", "num_stages")}}
                    for c in launcher.configs},
        "variants": {v.variant: v.images[0].sha256 for v in launcher.variants if v.images},
        "entries": list(kept) + [e for e in entries if e["config"] is not None],
        "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    return doc


def tune_online(launcher, args: tuple, grid, path: str) -> int | None:
    """Online tuning of one unseen key (TTBUILD_TUNE_ONLINE=1): time every config on this
    call's own arguments, add the entry to the table at `path` and return the winner. The
    arguments are run many times, as Triton's Autotuner runs them (reset_to_zero and
    restore_value honoured)."""
    values, given, _ = launcher.bind(args)
    key = launcher.key_of(values)
    group = next(v.autotune["group"] for v in launcher.variants if v.autotune)
    times = time_configs(launcher, args, grid)
    e = entry(group, key, times)
    old = launcher.table.doc.get("entries", []) if launcher.table is not None else []
    write_table(launcher, path, [e], old)
    return e["config"]
