"""Autotuned matmul (kernels/matmul_autotune.py: @triton.autotune over 7 configs + @triton.heuristics): ttbuild's tuned library against Triton 3.6 autotuning the same source, at 512², 2048² and 8192²; and the first call's latency on each side.

ttbuild side: the library in --artifacts with its tuning table (artifacts/tuning/
tuned_matmul_kernel.json, from `ttbuild tune`; tuned here first when missing, and that time
printed). Steady-state time of the launch the table picks, median of CUDA-event timings
(_common.bench_ms). First call: a fresh process that has torch and the inputs ready, timed
from `ttbuild.runtime.load` to the end of the first launch (no compiler, no tuning).
Triton side, in a child process on its default path (wgmma on sm_90, as ttbuild's build since the
eighth session): the same file imported, so Triton compiles and tunes the same configs
in the process; its first call per shape (compile + tune) is timed, then the steady state.
Ratios are Triton ms / ttbuild ms (>1: ttbuild faster).
Usage: python benchmarks/bench_autotune.py [--artifacts DIR] [--sizes 512,2048,8192] [--no-triton]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import (
    KERNELS_DIR,
    WORKER_FLAG,
    bench_ms,
    have_triton,
    kernel_module,
    report_worker_result,
    table,
    triton_worker,
)

FIRST_CALL_FLAG = "--first-call-worker"


def _inputs(torch, n):
    gen = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=gen)
    return a, b, torch.empty(n, n, device="cuda", dtype=torch.float16)


def _grid(n):
    return lambda meta: (-(-n // meta["BLOCK_SIZE_M"]) * -(-n // meta["BLOCK_SIZE_N"]),)


def _ok(torch, c, a, b):
    return bool(torch.allclose(c.float(), (a.float() @ b.float()), rtol=1e-2, atol=0.1 * (a.shape[1] / 512) ** 0.5))


def triton_side(job: dict) -> None:
    """Child process: Triton autotunes kernels/matmul_autotune.py at each size."""
    import torch

    mod = kernel_module("matmul_autotune")
    out = []
    for n in job["sizes"]:
        a, b, c = _inputs(torch, n)

        def call(a=a, b=b, c=c, n=n):
            mod.tuned_matmul_kernel[_grid(n)](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                              c.stride(0), c.stride(1))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        best = mod.tuned_matmul_kernel.best_config
        out.append({"n": n, "first_s": first, "ms": bench_ms(call), "ok": _ok(torch, c, a, b),
                    "config": {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}})
    report_worker_result({"results": out})


def first_call(artifacts: str, n: int) -> None:
    """Child process: the first launch of the tuned kernel in a fresh process."""
    import torch

    a, b, c = _inputs(torch, n)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    import ttbuild.runtime as rt

    lib = rt.load(artifacts)
    lib.tuned_matmul_kernel[_grid(n)](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    print(json.dumps({"first_s": time.perf_counter() - t0, "ok": _ok(torch, c, a, b)}))


BATCH = 300


def _launch_cost(torch, artifacts, n) -> dict:
    """Host µs per launch through a cuLaunchKernel that launches nothing (the C path's no-op,
    as benchmarks/bench_launch.py measures the launcher alone): the tuned kernel called as
    Triton calls it, against the variant it picks launched with its runtime arguments alone
    (the fastest call form) and called Triton's way; best of 20 rounds of BATCH calls."""
    import ttbuild.runtime as rt
    from ttbuild.runtime import cext

    class NoopLaunchDriver(rt.CudaDriver):
        @property
        def c_launch_address(self):
            module = cext.load()
            return module.noop_launch_address() if module is not None else None

    lib = rt.load(artifacts, driver=NoopLaunchDriver())
    kernel = lib.tuned_matmul_kernel
    a, b, c = _inputs(torch, n)
    sargs = (a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    values = kernel.bind(sargs)[0]
    v = kernel.select(*sargs)
    grid = _grid(n)(v.constexprs)
    direct = lib.variant(v.variant)
    # the variant called as Triton calls a plain kernel: every parameter, its constexprs included
    bound = dict(zip(kernel.call_names, sargs), **v.constexprs)
    every = tuple(bound[n] for n in direct.param_names)
    fns = {"tuned": (kernel[grid], sargs), "direct": (direct.runtime_call(grid), values),
           "triton_call": (direct[grid], every)}
    best = {k: float("inf") for k in fns}
    for _ in range(20):
        for name, (fn, call_args) in fns.items():
            t0 = time.perf_counter()
            for _ in range(BATCH):
                fn(*call_args)
            best[name] = min(best[name], (time.perf_counter() - t0) / BATCH * 1e6)
    return dict(best, path=cext.status())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--sizes", default="512,2048,8192")
    ap.add_argument("--no-triton", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    import torch

    import ttbuild.runtime as rt
    from ttbuild.runtime import tuner

    tri = {}
    if not args.no_triton and have_triton():
        tri = triton_worker(__file__, {"sizes": sizes}, disable_mma_v3=False)
        if "error" in tri:
            print(f"triton failed: {tri['error']}")
    tri_by = {r["n"]: r for r in tri.get("results", [])}

    lib = rt.load(args.artifacts)
    kernel = lib.tuned_matmul_kernel
    if kernel.table is None:
        t0 = time.perf_counter()
        tuner.tune_kernel(kernel, KERNELS_DIR, os.path.join(args.artifacts, "tuning"), "tuned_matmul_kernel")
        print(f"no tuning table: tuned now in {time.perf_counter() - t0:.1f} s (`ttbuild tune`)")
        lib = rt.load(args.artifacts)
        kernel = lib.tuned_matmul_kernel

    proc = subprocess.run([sys.executable, __file__, FIRST_CALL_FLAG, args.artifacts, str(sizes[0])],
                          capture_output=True, text=True)
    mine_first = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {"error": proc.stderr[-500:]}

    rows = []
    for n in sizes:
        a, b, c = _inputs(torch, n)
        sargs = (a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        call = kernel[_grid(n)]
        call(*sargs)
        torch.cuda.synchronize()
        ok = _ok(torch, c, a, b)
        ms = bench_ms(lambda: call(*sargs))  # noqa: B023 (called before the next iteration)
        cfg = kernel.config_for(*sargs)
        t = tri_by.get(n, {})
        tflops = lambda m: 2 * n ** 3 / (m * 1e-3) / 1e12 if m else None  # noqa: E731
        rows.append([f"{n}³", f"{ms:.4f}", f"{tflops(ms):.0f}", f"c{cfg['config']} ({cfg['how']})",
                     "ok" if ok else "WRONG",
                     f"{t['ms']:.4f}" if t.get("ms") else "", f"{tflops(t.get('ms')):.0f}" if t.get("ms") else "",
                     json.dumps(t.get("config", "")).replace('"', "").replace("BLOCK_SIZE_", ""),
                     f"{t['ms'] / ms:.3f}" if t.get("ms") else "",
                     f"{t['first_s']:.2f}" if t.get("first_s") is not None else ""])
    launch = _launch_cost(torch, args.artifacts, 128)
    print(f"GPU: {torch.cuda.get_device_name()}; ttbuild config indices as in get_cuda_autotune_config()")
    print(table(["size", "ttbuild ms", "TFLOP/s", "ttbuild config", "check", "triton ms", "TFLOP/s",
                 "triton config", "triton/ttbuild", "triton 1st call s"], rows))
    print(f"host cost of one launch, no-op cuLaunchKernel ({launch['path']}), best of 20 x {BATCH}: tuned "
          f"kernel {launch['tuned']:.2f} µs; its variant with the runtime arguments alone {launch['direct']:.2f} µs "
          f"(tuning adds {launch['tuned'] - launch['direct']:+.2f} µs); the variant called Triton's way (every "
          f"parameter in order, its constexprs included) "
          f"{launch['triton_call']:.2f} µs")
    if "error" in mine_first:
        print(f"ttbuild first call failed: {mine_first['error']}")
    else:
        print(f"ttbuild first call at {sizes[0]}³ in a fresh process (load + launch, no tuning): "
              f"{mine_first['first_s'] * 1e3:.1f} ms ({'ok' if mine_first['ok'] else 'WRONG'})")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_FLAG:
        triton_side(json.loads(sys.argv[2]))
    elif len(sys.argv) > 3 and sys.argv[1] == FIRST_CALL_FLAG:
        first_call(sys.argv[2], int(sys.argv[3]))
    else:
        main()
