"""Benchmark helpers: median timing (triton.testing.do_bench when importable, else CUDA events) and table printing."""

from __future__ import annotations

import os
import statistics

KERNELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")


def kernel_module(name: str):
    """kernels/<name>.py imported as a Python module (needs triton), so Triton's side of a
    benchmark compiles the very source file ttbuild built, not a copy of it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kernels_{name}", os.path.join(KERNELS_DIR, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def have_triton() -> bool:
    try:
        import triton  # noqa: F401
        import triton.testing  # noqa: F401
        return True
    except Exception:
        return False


def bench_ms(fn, warmup_ms: int = 25, rep_ms: int = 200) -> float:
    """Median milliseconds of one call of fn (device time, measured with CUDA events)."""
    if have_triton():
        import triton.testing

        return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def fmt(x, digits: int = 0) -> str:
    """A figure for a table cell: thousands separated, empty when it was not measured (None)."""
    return "" if x is None else f"{x:,.{digits}f}"


def ratio(a, b) -> str:
    """a / b to three decimals for a table cell; empty when either side is missing."""
    return f"{a / b:.3f}" if a and b else ""


def table(headers, rows) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# Triton in a child process. DISABLE_MMA_V3 is read when Triton compiles and is part of its cache
# key (triton.knobs), so setting it in the environment of a fresh interpreter, before `triton` is
# imported there, is the one reliable way to force Triton onto mma.sync next to a default run.
WORKER_FLAG = "--triton-worker"
RESULT_TAG = "TTBUILD_BENCH_RESULT "


def run_worker(python: str, script: str, job: dict, env: dict | None = None, timeout: float = 1800) -> dict:
    """Run `python <script> --triton-worker <job json>` and return the dict it printed after
    RESULT_TAG (report_worker_result); {"error": ...} when it failed or timed out."""
    import json
    import subprocess

    try:
        proc = subprocess.run([python, script, WORKER_FLAG, json.dumps(job)], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"}


def triton_worker(script: str, job: dict, disable_mma_v3: bool, timeout: float = 1800) -> dict:
    """run_worker in this Python with or without DISABLE_MMA_V3=1 (the benchmark goes on after
    an {"error": ...})."""
    import sys

    env = dict(os.environ)
    env.pop("DISABLE_MMA_V3", None)
    if disable_mma_v3:
        env["DISABLE_MMA_V3"] = "1"
    return run_worker(sys.executable, script, job, env, timeout)


def report_worker_result(result: dict) -> None:
    """Print a worker's result for the parent (the last line of stdout it reads)."""
    import json

    print(RESULT_TAG + json.dumps(result), flush=True)


def mma_kind(compiled) -> str:
    """'wgmma', 'mma.sync' or '?' from a Triton CompiledKernel's PTX: which path it really took."""
    try:
        ptx = compiled.asm["ptx"]
    except Exception:  # noqa: BLE001  (older/newer Triton objects: the label is informative only)
        return "?"
    if "wgmma.mma_async" in ptx:
        return "wgmma"
    return "mma.sync" if "mma.sync" in ptx else "no mma"


def variant_or_reason(lib, name: str):
    """(launcher, "") for a built variant, else (None, why): a variant kept short of cubin by
    `until` in variants.toml is not in lib/ until the compiler can build it."""
    if any(v.variant == name for v in lib.variants):
        return lib.variant(name), ""
    return None, f"variant {name} is not built (not in {lib.lib_dir}; `until` in kernels/variants.toml?)"


# Line styles of the sides the benchmarks compare: ours red, Triton blue, the vendor library green;
# dotted for a form kept on mma.sync.
SIDE_STYLES = {"ttbuild": ("tab:red", "-"), "ttbuild (mma.sync)": ("tab:red", ":"),
               "Triton (default)": ("tab:blue", "-"), "Triton (mma.sync)": ("tab:blue", ":"),
               "cuBLAS": ("tab:green", "-"), "torch SDPA": ("tab:green", "-")}


def plot_panels(path: str, title: str, panels: list, log2_x: bool = False) -> None:
    """A PNG at `path` of TFLOP/s against size: one panel per (subtitle, x label, {side: [(x,
    TFLOP/s or None), ...]}) in `panels`, two to a row, styled by SIDE_STYLES, x on a log2 scale
    with `log2_x`; a message instead when matplotlib is missing (the benchmark's tables are the
    figures, the plot a view of them)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not importable: no plot written ({path})")
        return
    cols = min(2, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.5 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (subtitle, xlabel, series) in zip(axes.flat, panels):
        if log2_x:
            ax.set_xscale("log", base=2)
        for name, points in series.items():
            pts = [(x, y) for x, y in points if y]
            color, line = SIDE_STYLES.get(name, (None, "-"))
            if pts:
                ax.plot(*zip(*pts), marker="o", label=name, color=color, linestyle=line)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(subtitle)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.97))  # room for the suptitle above the first row
    fig.savefig(path, dpi=120)
    print(f"plot written: {path}")
