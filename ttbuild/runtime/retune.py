"""`ttbuild tune --recorded PATH`: re-time on this GPU, with the built variants, the configs of every key `ttbuild record` tuned, and rewrite its tuning table.

PATH is a tuning table `ttbuild record` wrote, a folder of them, or a record directory
(TTBUILD_RECORD=DIR, turned into tables by ttbuild.record.tuning). An entry is retunable when
the recorder kept its call (ttbuild.record.hook `_call_doc`): every argument as a value or as
a tensor's shape, strides, dtype and address mod 16, and each config's grid and heuristics
constexprs. Its arguments are made alike on the GPU (floats normal random, integers and bools
zero: the recorded data itself is not kept, so data-dependent speed is timed on that) and each
config with a built variant (same constexprs, num_warps, num_stages, num_ctas) is timed as
`ttbuild tune` times (ttbuild.runtime.tuner.bench, Triton's do_bench method), through the
variants the served launch would pick (the most specialised group whose constexprs the
arguments meet, as ttbuild.runtime.serve). The winner replaces the entry's config; the table
keeps its config indices, so a served Autotuner reads it as before. Entries that cannot be
retimed are kept and reported.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field

from ..fileio import atomic_write
from .launcher import Launcher
from .select import NoMatchingVariant, same_constexpr
from .tuningtable import TABLE_SCHEMA

# Triton's dtype names (the recorder's) -> torch's attribute names
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "i1": "bool",
                "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}
OPTIONS = ("num_warps", "num_stages", "num_ctas")


@dataclass
class Job:
    """One recorded key to retime: its table, entry index, key, arguments (recorded form) and
    the built configs {index: {"kwargs", "num_warps", "num_stages", "num_ctas", "grid", "constexprs"}}."""

    table: str
    entry: int
    key: list
    args: dict
    configs: dict = field(default_factory=dict)


def read_tables(path: str, root: str = ".") -> dict[str, dict]:
    """{table name: document} from a table file, a folder of tables, or a record directory."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return {os.path.basename(path).removesuffix(".json"): json.load(f)}
    names = sorted(os.listdir(path))
    if any(n.endswith(".jsonl") for n in names):
        from ..record.store import read_records
        from ..record.tuning import tables

        return tables(read_records(path), os.path.abspath(root))
    out = {}
    for n in names:
        if n.endswith(".json"):
            with open(os.path.join(path, n), encoding="utf-8") as f:
                doc = json.load(f)
            if isinstance(doc, dict) and doc.get("schema") == TABLE_SCHEMA:
                out[n.removesuffix(".json")] = doc
    return out


def builds(v, cfg: dict) -> bool:
    """Whether variant `v` was built for the recorded config `cfg`."""
    return (all(k in v.constexprs and same_constexpr(v.constexprs[k], x) for k, x in cfg.get("kwargs", {}).items())
            and v.num_warps == cfg.get("num_warps", 4) and v.num_stages == cfg.get("num_stages", 3)
            and v.num_ctas == cfg.get("num_ctas", 1))


def makeable(arg: dict) -> bool:
    """Whether make_args can make this recorded argument."""
    if "tensor" in arg:
        return arg["tensor"].get("dtype") in TORCH_DTYPES
    return "value" in arg and (arg["value"] is None or isinstance(arg["value"], (bool, int, float, str)))


def kernel_variants(variants, doc: dict) -> list:
    """The built variants of the table's kernel (same name; file equal or a suffix match)."""
    file = doc.get("file") or ""
    return [v for v in variants if v.kernel == doc.get("kernel")
            and (not file or not v.file or v.file == file or file.endswith("/" + v.file) or v.file.endswith("/" + file))]


def plan_table(name: str, doc: dict, variants) -> tuple[list[Job], list[str]]:
    """(jobs, notes): what retuning table `name` would time, and why any of it cannot be."""
    mine = kernel_variants(variants, doc)
    if not mine:
        return [], [f"{name}: no built variant of {doc.get('kernel')} ({doc.get('file')}) in the library"]
    configs = doc.get("configs", {})
    built = {i: c for i, c in configs.items() if any(builds(v, c) for v in mine)}
    notes = [f"{name}: config {i} {c.get('kwargs')} num_warps={c.get('num_warps')} has no built variant: not timed"
             for i, c in sorted(configs.items()) if i not in built]
    jobs = []
    for n, e in enumerate(doc.get("entries", [])):
        where = f"{name} key {e.get('key')}"
        if "args" not in e:
            notes.append(f"{where}: recorded without its arguments (record it again with this ttbuild): kept")
            continue
        bad = [k for k, a in e["args"].items() if not makeable(a)]
        if bad:
            notes.append(f"{where}: cannot make argument(s) {', '.join(bad)}: kept")
            continue
        job = Job(name, n, e["key"], e["args"])
        for i, c in sorted(built.items()):
            grid = (e.get("grids") or {}).get(i)
            if grid is None:
                notes.append(f"{where}: config {i} has no recorded grid: not timed")
                continue
            job.configs[i] = {**c, "grid": grid, "constexprs": (e.get("constexprs") or {}).get(i, {})}
        if job.configs:
            jobs.append(job)
    return jobs, notes


def groups(variants, driver) -> list[Launcher]:
    """Launchers over the variants, one per set of constexpr parameters, most fixed first
    (a `== 1` group before the general one, as serve tries them)."""
    by: dict = {}
    for v in variants:
        by.setdefault(frozenset(p.name for p in v.params if p.kind == "constexpr"), []).append(v)
    return [Launcher(vs[0].kernel, vs, driver) for _, vs in sorted(by.items(), key=lambda kv: (-len(kv[0]), sorted(kv[0])))]


def config_call(launchers, values: dict, cfg: dict):
    """(launcher, keyword arguments) for one config: the first group that selects a variant
    for these values with the config's constexprs and options; None when none does."""
    named = {**values, **cfg.get("kwargs", {}), **cfg.get("constexprs", {})}
    opts = {k: cfg[k] for k in OPTIONS if k in cfg}
    for lch in launchers:
        kw = {k: v for k, v in named.items() if k in lch.param_names}
        try:
            lch.select(**kw, **opts)
        except (NoMatchingVariant, TypeError):  # LaunchError (a TypeError): not this group's form
            continue
        return lch, {**kw, **opts}
    return None


def time_job(job: Job, launchers, values: dict, bench, zero=(), restore=(), **bench_kw) -> dict[str, float | None]:
    """Config index -> median ms (None: no variant selected, or the launch failed)."""
    out = {}
    for i, cfg in job.configs.items():
        found = config_call(launchers, values, cfg)
        if found is None:
            out[i] = None
            continue
        lch, kw = found
        call = functools.partial(lch.run, grid=tuple(cfg["grid"]), **kw)
        try:
            out[i] = bench(call, zero=[values[n] for n in zero if n in values],
                           restore=[values[n] for n in restore if n in values], **bench_kw)
        except Exception as exc:  # noqa: BLE001 - as Triton's Autotuner, a failing config gets no time
            print(f"  {job.table} config {i}: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
            out[i] = None
    return out


def rewrite(doc: dict, results: dict[int, dict], target: str, device: dict | None = None, **bench_kw) -> dict:
    """The table with each retimed entry's winner and times (entries where nothing ran are
    kept as they were); config indices unchanged."""
    new = json.loads(json.dumps(doc))
    done = 0
    for n, times in results.items():
        ran = [(t, i) for i, t in times.items() if t is not None]
        if not ran:
            continue
        e = new["entries"][n]
        e["config"] = int(min(ran)[1])
        e["times_ms"] = {i: (round(t, 6) if t is not None else None) for i, t in times.items()}
        e["device"] = target
        done += 1
    new["timing"] = {"method": "ttbuild tune --recorded: median of CUDA-event times, L2 flushed before each run "
                               "(triton.testing.do_bench), on arguments made like the recorded ones", **bench_kw}
    new["retuned"] = {"entries": done, "device": device, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return new


def make_args(args: dict, torch) -> dict:
    """The recorded arguments made on the current GPU: tensors of the recorded shape, strides,
    dtype and address mod 16 (floats normal random, the rest zero), values as recorded."""
    out = {}
    for name, a in args.items():
        if "tensor" not in a:
            out[name] = a["value"]
            continue
        t = a["tensor"]
        dtype = getattr(torch, TORCH_DTYPES[t["dtype"]])
        size = torch.empty((), dtype=dtype).element_size()
        span = 1 + sum((s - 1) * st for s, st in zip(t["shape"], t["stride"])) if all(t["shape"]) else 0
        offset = t.get("align", 0) // size
        if dtype.is_floating_point:
            buf = torch.randn(span + offset, device="cuda").to(dtype)
        else:
            buf = torch.zeros(span + offset, device="cuda", dtype=dtype)
        out[name] = torch.as_strided(buf, t["shape"], t["stride"], offset)
    return out


def describe(job: Job) -> str:
    """One line of the plan: the key and each config that would be timed, with its grid."""
    return f"{job.table} key {job.key}: " + "; ".join(
        f"config {i} {c.get('kwargs')} num_warps={c.get('num_warps')} grid {tuple(c['grid'])}" for i, c in job.configs.items())


def run_recorded(lib, path: str, tuning_dir: str, root: str = ".", kernels=None, dry_run: bool = False,
                 **bench_kw) -> int:
    """`ttbuild tune --recorded PATH`: plan, then (unless dry_run) time and write each table to
    `tuning_dir/<name>.json`. Exit status 0, or 2 when nothing can be retuned or no GPU."""
    docs = read_tables(path, root)
    plans = {}
    for name, doc in sorted(docs.items()):
        if kernels and name not in kernels and doc.get("kernel") not in kernels:
            continue
        plans[name], notes = plan_table(name, doc, lib.variants)
        for note in notes:
            print(f"ttbuild tune: {note}", file=sys.stderr)
    if not any(plans.values()):
        print(f"ttbuild tune: nothing in {path} to retune (no recorded key with its arguments and a built config)",
              file=sys.stderr)
        return 2
    if dry_run:
        for jobs in plans.values():
            for job in jobs:
                print(describe(job))
        return 0
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("ttbuild tune: timing needs torch with a CUDA GPU", file=sys.stderr)
        return 2
    from .tuner import bench, device_info

    device = device_info()
    target = "cuda:{}{}".format(*device["capability"])
    for name, jobs in plans.items():
        doc = docs[name]
        launchers = groups(kernel_variants(lib.variants, doc), lib._driver)
        results = {}
        for job in jobs:
            values = make_args(job.args, torch)
            results[job.entry] = times = time_job(job, launchers, values, bench, doc.get("reset_to_zero", ()),
                                                  doc.get("restore_value", ()), **bench_kw)
            shown = ", ".join(f"c{i} {t:.4f} ms" if t is not None else f"c{i} -" for i, t in times.items())
            print(f"{name} {job.key}: {shown}", flush=True)
        os.makedirs(tuning_dir, exist_ok=True)
        atomic_write(os.path.join(tuning_dir, f"{name}.json"),
                     (json.dumps(rewrite(doc, results, target, device, **bench_kw), indent=1, sort_keys=True) + "\n").encode())
    print(f"ttbuild tune: {sum(map(len, plans.values()))} recorded keys retimed into {tuning_dir}", file=sys.stderr)
    return 0
