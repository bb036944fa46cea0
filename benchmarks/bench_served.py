"""A served library against Triton's JIT on a project's own benchmark script, in one process: each `triton.testing.do_bench` call of the script is timed served and with serving paused (Triton's JIT, same configs), alternately.

The script runs unmodified under `ttbuild.runtime.serve(library, miss="warn")`. A do_bench call
that launches no served kernel (a torch reference, say) is timed once, as the script asked. One
that does is timed `--repeats` times each way, alternating served and paused, after an untimed
call with serving paused so that Triton's JIT has compiled before its timing; each side keeps
its fastest median. Autotuned kernels take the recorded tuning table's config on both sides, so
the two time the same config of the same source. The script gets the served result back.

Each measurement is one JSON line in `--out`: the kernels it launched, `--label` values read
from the caller's frames (`--label mode --label input.x`: a local, then attributes), both
times in ms, and `miss` when a launch fell back to Triton (then both sides ran Triton's code:
leave it out). At exit a table gives x Triton = Triton's ms / served ms (above 1: faster).

`--profile` adds, per measurement, each side's summed kernel time with L2 flushed as do_bench
flushes it (`device_ms`: the median over `--rounds` rounds, the two sides alternated ABBA so that
clock and thermal drift fall on both alike) and host time per call (`host_ms`, round-robin): when
served and Triton's kernels take the same GPU time but do_bench differs, the launch path is what
is slower. `kernel_device_ms` gives each Triton kernel's own part of that GPU time, served and
Triton's, apart from the torch and cuBLAS work the benchmark times with it. `--control` times
Triton against itself (serving paused on both sides): the ratios it reports are the
measurement's own noise and order bias, to read the real table against.

Usage (GPU; Triton and torch installed):
    python benchmarks/bench_served.py --library ARTIFACTS [--out FILE] [--label EXPR ...] [--repeats 2] -- SCRIPT.py [ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def label_value(expr: str, frame):
    """The value of `expr` ("name" or "name.attr.attr") in the nearest frame from `frame` outward
    that has `name` as a local; None when no frame has it."""
    root, *attrs = expr.split(".")
    while frame is not None:
        if root in frame.f_locals:
            value = frame.f_locals[root]
            for a in attrs:
                value = getattr(value, a, None)
            return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
        frame = frame.f_back
    return None


def device_ms(fn, kernels: frozenset = frozenset(), n: int = 20) -> tuple[float, dict]:
    """GPU time per call of `fn`, ms, with L2 flushed before each call as do_bench flushes it:
    the CUDA activity of torch.profiler (which sees our cuLaunchKernel launches as well as
    Triton's and torch's), each call's GPU work after its flush taken apart in launch order, the
    median over the `n` calls of each position, summed. Subtracting a separately profiled flush
    total instead (the first form) carried the ~80 us flush's own variance into 5-15 us kernels:
    a 0.3-0.5 us error that made a kernel look 4-6 % slower or faster at random.

    Also returns, for each name in `kernels` (the Triton kernels the call launched), the summed
    medians of the positions that ran it: the kernel's own time, without the torch and cuBLAS
    work a benchmark times along with it."""
    import statistics

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")  # triton.testing's buffer
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    if not events or len(events) % n:
        raise RuntimeError(f"device_ms: {len(events)} GPU events for {n} calls: not the same work each call")
    per = len(events) // n  # the flush, then the call's own work
    calls = [events[i * per:(i + 1) * per] for i in range(n)]
    medians = [(calls[0][j].name, statistics.median(c[j].device_time for c in calls) / 1000) for j in range(1, per)]
    own: dict = {}
    for name, ms in medians:
        if name in kernels:
            own[name] = own.get(name, 0.0) + ms
    return sum(ms for _, ms in medians), own


def device_pair(server, fn, kernels: frozenset = frozenset(), rounds: int = 5,
                control: bool = False, calls: int = 20) -> tuple[float, float, dict]:
    """(served, Triton) GPU ms per call of `fn` (device_ms), each the median over `rounds` rounds,
    and {kernel: [served ms, Triton ms]} for each of `kernels`, medians alike; the order
    alternates ABBA (Triton first in even rounds) so neither side always runs second. With
    `control`, the "served" side runs with serving paused too (Triton against itself). `calls`
    is device_ms's `n`: more of them steady the medians of kernels of a few microseconds."""
    import statistics

    times: dict = {False: [], True: []}
    own: dict = {False: [], True: []}
    for r in range(rounds):
        for paused in ((True, False) if r % 2 == 0 else (False, True)):
            server.paused = paused or control
            total, per_kernel = device_ms(fn, kernels, calls)
            times[paused].append(total)
            own[paused].append(per_kernel)
    server.paused = False
    names = set().union(*own[False], *own[True])
    split = {k: [statistics.median(d.get(k, 0.0) for d in own[side]) for side in (False, True)] for k in sorted(names)}
    return statistics.median(times[False]), statistics.median(times[True]), split


def host_ms(server, fn, reps: int = 15, control: bool = False) -> tuple[float, float]:
    """(served, Triton) host wall time per call of `fn`, ms: the median over `reps` round-robin
    repetitions of k back-to-back calls / k without a synchronize inside (what the launching
    thread spends; k sized to about 5 ms of work, at most 50), a synchronize between them, the
    two sides alternated so drift falls on both alike."""
    import statistics
    import time

    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    k = max(1, min(50, int(0.005 / max(time.perf_counter() - t0, 1e-6))))
    times: dict = {False: [], True: []}
    for _ in range(reps):
        for paused in (False, True):
            server.paused = paused or control
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            times[paused].append((time.perf_counter() - t0) / k * 1000)
            torch.cuda.synchronize()
    server.paused = False
    return statistics.median(times[False]), statistics.median(times[True])


def median_of(result) -> float:
    """do_bench's result as one number: the first quantile asked for (Liger-style callers ask
    (0.5, 0.2, 0.8)), else the figure itself."""
    return float(result[0]) if isinstance(result, (list, tuple)) else float(result)


class Recorder:
    """Wraps the server and `triton.testing.do_bench`; collects one row per timed call."""

    def __init__(self, server, labels: list[str], repeats: int, out: str | None, profile: bool = False,
                 rounds: int = 5, control: bool = False, calls: int = 20):
        self.server, self.labels, self.repeats, self.rows = server, labels, repeats, []
        self.profile, self.rounds, self.control, self.calls = profile, rounds, control, calls
        self.out = open(out, "a", encoding="utf-8") if out else None
        self.launched: set = set()
        self.missed = False
        run_jit, log_miss = server.run_jit, server.log_miss

        def counting_run(jit_self, *args, **kwargs):
            if not server.paused:
                self.launched.add(jit_self.fn.__name__)
            return run_jit(jit_self, *args, **kwargs)

        def flag_miss(spec, **kw):
            self.missed = True
            return log_miss(spec, **kw)

        server.run_jit, server.log_miss = counting_run, flag_miss

    def do_bench(self, original, fn, *args, **kwargs):
        """Stands in for triton.testing.do_bench (same arguments and result)."""
        self.launched, self.missed, self.server.paused = set(), False, False
        first = original(fn, *args, **kwargs)
        if not self.launched:
            return first
        kernels = sorted(self.launched)
        served, triton_ms = ([] if self.control else [median_of(first)]), []
        self.server.paused = True
        try:
            fn()  # Triton's JIT compiles here, outside its timing
            for i in range(self.repeats):
                self.server.paused = True
                triton_ms.append(median_of(original(fn, *args, **kwargs)))
                self.server.paused = self.control
                if i + 1 < self.repeats or self.control:
                    served.append(median_of(original(fn, *args, **kwargs)))
            if self.profile:
                served_dev, triton_dev, split = device_pair(self.server, fn, frozenset(kernels), self.rounds,
                                                            self.control, self.calls)
                served_host, triton_host = host_ms(self.server, fn, control=self.control)
        finally:
            self.server.paused = False
        row = {"kernels": kernels, "labels": {e: label_value(e, sys._getframe(1)) for e in self.labels},
               "served_ms": min(served), "triton_ms": min(triton_ms), "miss": self.missed}
        if self.profile:
            row.update(triton_device_ms=triton_dev, served_device_ms=served_dev, triton_host_ms=triton_host,
                       served_host_ms=served_host, kernel_device_ms=split)
        self.rows.append(row)
        if self.out:
            self.out.write(json.dumps(row) + "\n")
            self.out.flush()
        return first


def table(rows: list[dict]) -> str:
    """Markdown table: one line per measurement, then the lowest ratio."""
    lines = ["| kernels | labels | served ms | Triton ms | x Triton |", "|---|---|---|---|---|"]
    ratios = []
    for r in rows:
        x = r["triton_ms"] / r["served_ms"] if r["served_ms"] else float("nan")
        if not r["miss"]:
            ratios.append(x)
        labels = " ".join(f"{k}={v}" for k, v in r["labels"].items())
        prof = ""
        if "served_device_ms" in r:
            prof = (f" device {r['served_device_ms']:.4f}/{r['triton_device_ms']:.4f},"
                    f" host {r['served_host_ms']:.4f}/{r['triton_host_ms']:.4f} (served/Triton ms)")
            prof += "".join(f", {k} {s:.4f}/{t:.4f}" for k, (s, t) in r.get("kernel_device_ms", {}).items())
        lines.append(f"| {' '.join(r['kernels'])} | {labels} | {r['served_ms']:.4f} | {r['triton_ms']:.4f} | "
                     + ("miss" if r["miss"] else f"{x:.3f}") + prof + " |")
    if ratios:
        lines.append(f"\n{len(ratios)} measurements: lowest x Triton {min(ratios):.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print(__doc__.split("Usage")[1].strip(), file=sys.stderr)
        return 2
    i = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", required=True, help="built artifacts directory to serve")
    ap.add_argument("--out", default=None, help="append one JSON line per measurement here")
    ap.add_argument("--label", action="append", default=[], help="caller local to record (name or name.attr)")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per side (default 2)")
    ap.add_argument("--profile", action="store_true",
                    help="also record each side's kernel (device) and launch (host) ms per call (torch.profiler)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated device-time rounds per side with --profile")
    ap.add_argument("--calls", type=int, default=20, help="profiled calls per device-time round with --profile")
    ap.add_argument("--control", action="store_true",
                    help="time Triton against itself (both sides paused): the noise floor of the ratios")
    args = ap.parse_args(argv[:i])
    script, script_args = argv[i + 1], argv[i + 2:]

    import triton.testing

    from ttbuild.runtime.serve import serve

    rec = Recorder(serve(args.library, miss="warn"), args.label, args.repeats, args.out, args.profile,
                   args.rounds, args.control, args.calls)
    original = triton.testing.do_bench
    triton.testing.do_bench = lambda fn, *a, **k: rec.do_bench(original, fn, *a, **k)
    sys.argv = [script] + script_args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        print(table(rec.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
