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


def table(headers, rows) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
