"""Matmul, fp16 in / fp32 accumulate (tutorial 03 kernel, kernels/matmul.py): TFLOP/s of ttbuild's build vs Triton 3.6 compiled from the same source with the same config, both by default (wgmma on sm_90) and both forced onto mma.sync (ttbuild's `*_mma2` variants, disable_mma_v3; Triton's DISABLE_MMA_V3=1), and cuBLAS (torch.matmul); same run, same GPU.

Triton runs in child processes (one with DISABLE_MMA_V3=1 set before triton is imported, one
without), one after the other on the same GPU; each checks its output against torch.matmul.
Square sizes 4096 and 8192 at 128x256x64 (8 warps, 3 stages) and 128x128x64 (4 warps, 4 stages),
then a size sweep 256..8192 (best of the two configs for each side) printed and plotted as a PNG
(TFLOP/s against size; skipped with a message when matplotlib is missing).
A ttbuild variant that is not built (`until` in kernels/variants.toml) is reported and skipped.
Artifacts: `doit` (kernels/ -> artifacts/; elsewhere $TTBUILD_ARTIFACTS or --artifacts DIR).
Usage: python benchmarks/bench_matmul.py [--artifacts DIR] [--sizes 4096,8192]
       [--sweep 256,512,...|none] [--plot matmul_sweep.png] [--no-triton]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import (
    WORKER_FLAG,
    bench_ms,
    fmt,
    have_triton,
    kernel_module,
    mma_kind,
    plot_panels,
    ratio,
    report_worker_result,
    table,
    triton_worker,
    variant_or_reason,
)

# (ttbuild variant, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages); GROUP_SIZE_M 8.
# Each has a twin `<variant>_mma2` kept on mma.sync (disable_mma_v3 = true in variants.toml).
CONFIGS = [("matmul_fp16_128x256x64_w8_s3", 128, 256, 64, 8, 3),
           ("matmul_fp16_128x128x64_w4_s4", 128, 128, 64, 4, 4)]
MMA2 = "_mma2"
SWEEP = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 7168, 8192]


def _cdiv(a, b):
    return -(-a // b)


def _tflops(shape, ms):
    M, N, K = shape
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def _inputs(torch, shape):
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M + 7 * K)
    a = torch.randn(M, K, device="cuda", generator=gen).half()
    b = torch.randn(K, N, device="cuda", generator=gen).half()
    return a, b, torch.empty(M, N, device="cuda", dtype=torch.float16)


def _args(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    return (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def _close(torch, c, ref):
    # fp16 C vs cuBLAS's fp16 C: both round an fp32 sum of K terms of size ~1
    return bool(torch.allclose(c.float(), ref.float(), rtol=1e-2, atol=5e-2))


def worker(job: dict) -> None:
    """Child process: Triton's matmul_kernel from kernels/matmul.py on every shape and config."""
    import torch

    mod = kernel_module("matmul")
    results = []
    for shape in map(tuple, job["shapes"]):
        a, b, c = _inputs(torch, shape)
        ref = torch.matmul(a, b)
        for name, bm, bn, bk, w, s in job["configs"]:
            grid = (_cdiv(shape[0], bm) * _cdiv(shape[1], bn),)

            def fn(bm=bm, bn=bn, bk=bk, w=w, s=s, grid=grid, t=(a, b, c)):
                return mod.matmul_kernel[grid](*_args(*t), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                                               GROUP_SIZE_M=8, ACTIVATION="", num_warps=w, num_stages=s)
            try:
                c.fill_(float("nan"))
                compiled = fn()
                torch.cuda.synchronize()
                results.append({"shape": shape, "config": name, "ok": _close(torch, c, ref),
                                "mma": mma_kind(compiled), "ms": bench_ms(fn)})
            except Exception as e:  # noqa: BLE001  (one config failing must not lose the others)
                results.append({"shape": shape, "config": name, "error": f"{type(e).__name__}: {e}"[:300]})
    report_worker_result({"results": results})


def _index(result: dict) -> dict:
    return {(tuple(r["shape"]), r["config"]): r for r in result.get("results", [])}




def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--sizes", default="4096,8192", help="square sizes of the main table")
    ap.add_argument("--sweep", default=",".join(map(str, SWEEP)), help="square sizes of the sweep, or 'none'")
    ap.add_argument("--plot", default="matmul_sweep.png", help="PNG of the sweep")
    ap.add_argument("--no-triton", action="store_true")
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    gpu = torch.cuda.get_device_name()
    main_shapes = [(n, n, n) for n in map(int, args.sizes.split(","))]
    sweep_shapes = [] if args.sweep == "none" else [(n, n, n) for n in map(int, args.sweep.split(","))]
    shapes = list(dict.fromkeys(main_shapes + sweep_shapes))

    # Triton first, in children, so this process never compiles with it (and never mixes paths).
    tri_v2 = tri_v3 = {}
    if not args.no_triton and have_triton():
        job = {"shapes": shapes, "configs": CONFIGS}
        tri_v2 = triton_worker(__file__, job, disable_mma_v3=True)
        tri_v3 = triton_worker(__file__, job, disable_mma_v3=False)
        for label, res in (("DISABLE_MMA_V3=1", tri_v2), ("default", tri_v3)):
            if "error" in res:
                print(f"triton ({label}) failed: {res['error']}")
    elif not args.no_triton:
        print("triton is not importable here: Triton columns left empty")
    v2, v3 = _index(tri_v2), _index(tri_v3)

    lib = rt.load(args.artifacts)
    ours = {}
    for name in [n for n, *_ in CONFIGS] + [n + MMA2 for n, *_ in CONFIGS]:
        launcher, why = variant_or_reason(lib, name)
        if launcher is None:
            print(f"skip ttbuild {name}: {why}")
        ours[name] = launcher
    ttb, cublas, notes = {}, {}, []
    for shape in shapes:
        a, b, c = _inputs(torch, shape)
        ref = torch.matmul(a, b)
        cublas[shape] = bench_ms(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))
        for name, bm, bn, *_ in [c for base in CONFIGS for c in (base, (base[0] + MMA2, *base[1:]))]:
            launcher = ours[name]
            if launcher is None:
                continue
            grid = (_cdiv(shape[0], bm) * _cdiv(shape[1], bn),)
            fn = lambda launcher=launcher, grid=grid, a=a, b=b, c=c: launcher[grid](*_args(a, b, c))
            try:
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                if not _close(torch, c, ref):
                    notes.append(f"ttbuild {name} at {shape}: WRONG result")
                ttb[(shape, name)] = bench_ms(fn)
            except Exception as e:  # noqa: BLE001
                notes.append(f"ttbuild {name} at {shape}: {type(e).__name__}: {e}")

    def tri(index, shape, name):
        r = index.get((shape, name))
        if r is None:
            return None, ""
        if "error" in r:
            notes.append(f"triton {name} at {shape}: {r['error']}")
            return None, "error"
        if not r["ok"]:
            notes.append(f"triton {name} at {shape} ({r['mma']}): WRONG result")
        return _tflops(shape, r["ms"]), r["mma"]

    print(f"\nmatmul fp16 -> fp16 (fp32 accumulate), {gpu}, TFLOP/s, medians of triton.testing.do_bench")
    def mine(shape, name):
        return _tflops(shape, ttb[(shape, name)]) if (shape, name) in ttb else None

    rows = []
    for shape in main_shapes:
        cb = _tflops(shape, cublas[shape])
        for name, *_ in CONFIGS:
            o3, o2 = mine(shape, name), mine(shape, name + MMA2)
            t2, k2 = tri(v2, shape, name)
            t3, k3 = tri(v3, shape, name)
            rows.append((f"{shape[0]}^3", name.replace("matmul_fp16_", ""), fmt(o3),
                         fmt(t3) + (f" ({k3})" if k3 else ""), ratio(o3, t3), fmt(o2),
                         fmt(t2) + (f" ({k2})" if k2 else ""), ratio(o2, t2), fmt(cb), ratio(o3, cb)))
    print(table(["size", "config", "ttbuild", "triton default", "x triton", "ttbuild mma.sync",
                 "triton DISABLE_MMA_V3=1", "x triton mma.sync", "cuBLAS", "x cuBLAS"], rows))

    if sweep_shapes:
        def best(values):
            values = [v for v in values if v]
            return max(values) if values else None
        series = {"ttbuild": [], "Triton (default)": [], "ttbuild (mma.sync)": [], "Triton (mma.sync)": [],
                  "cuBLAS": []}
        srows = []
        for shape in sweep_shapes:
            o3 = best(mine(shape, n) for n, *_ in CONFIGS)
            o2 = best(mine(shape, n + MMA2) for n, *_ in CONFIGS)
            t2 = best(tri(v2, shape, n)[0] for n, *_ in CONFIGS)
            t3 = best(tri(v3, shape, n)[0] for n, *_ in CONFIGS)
            cb = _tflops(shape, cublas[shape])
            for key, val in zip(series, (o3, t3, o2, t2, cb)):
                series[key].append(val)
            srows.append((shape[0], fmt(o3), fmt(t3), ratio(o3, t3), fmt(o2), fmt(t2), ratio(o2, t2),
                          fmt(cb), ratio(o3, cb)))
        print(f"\nsize sweep (square, best of {', '.join(n.replace('matmul_fp16_', '') for n, *_ in CONFIGS)}), TFLOP/s")
        print(table(["size", "ttbuild", "triton default", "x triton", "ttbuild mma.sync", "triton mma.sync",
                     "x triton mma.sync", "cuBLAS", "x cuBLAS"], srows))
        sizes = [s[0] for s in sweep_shapes]
        plot_panels(args.plot, f"matmul fp16, {gpu}",
                    [("square sizes", "M = N = K", {k: list(zip(sizes, v)) for k, v in series.items()})])
    for n in dict.fromkeys(notes):
        print("note:", n)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        worker(json.loads(sys.argv[2]))
    else:
        main()
