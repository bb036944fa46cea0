"""Matmul, fp8 e4m3 in / fp32 accumulate / fp16 out (tutorial 03 kernel with K-major B, kernels/matmul_fp8.py): TFLOP/s of ttbuild's build vs Triton 3.6 compiled from the same source with the same config (its default path: wgmma on sm_90), same run, same GPU.

Triton runs in a child process; each side checks its output against an fp64 reference within
the bound of wgmma's fp8 accumulation (tests/gpu/test_gpu_tensorcore.py). Configs: the
tutorial's fp8 entry 128x256x128 (8 warps, 3 stages) and 128x256x64 (8 warps, 3 stages).
Artifacts: `doit` (kernels/ -> artifacts/; elsewhere $TTBUILD_ARTIFACTS or --artifacts DIR).
cuBLAS (torch._scaled_mm, unit scales, fp16 out) runs beside them as the vendor's figure; with
--plot PNG, TFLOP/s against size, a panel per config.
Usage: python benchmarks/bench_matmul_fp8.py [--artifacts DIR] [--sizes 4096,8192] [--no-triton]
       [--plot PNG]
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
    have_triton,
    kernel_module,
    mma_kind,
    plot_panels,
    report_worker_result,
    table,
    triton_worker,
    variant_or_reason,
)

# (ttbuild variant, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages); GROUP_SIZE_M 8.
CONFIGS = [("matmul_fp8_128x256x128_w8_s3", 128, 256, 128, 8, 3),
           ("matmul_fp8_128x256x64_w8_s3", 128, 256, 64, 8, 3)]


def _cdiv(a, b):
    return -(-a // b)


def _tflops(n, ms):
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def _inputs(torch, n):
    gen = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, n, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda", generator=gen).to(torch.float8_e4m3fn).T  # K-major
    return a, b, torch.empty(n, n, device="cuda", dtype=torch.float16)


def _args(a, b, c):
    n = a.shape[0]
    return (a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def _ok(torch, c, a, b):
    ref = a.double() @ b.double()
    bound = 1e-2 + 1e-3 * ref.abs() + 2.0 ** -10 * (a.double().abs() @ b.double().abs())
    return bool(((c.double() - ref).abs() <= bound).all())


def worker(job: dict) -> None:
    """Child process: Triton's matmul_fp8_kernel on every size and config."""
    import torch

    mod = kernel_module("matmul_fp8")
    results = []
    for n in job["sizes"]:
        a, b, c = _inputs(torch, n)
        for name, bm, bn, bk, w, s in job["configs"]:
            grid = (_cdiv(n, bm) * _cdiv(n, bn),)

            def fn(bm=bm, bn=bn, bk=bk, w=w, s=s, grid=grid):
                return mod.matmul_fp8_kernel[grid](*_args(a, b, c), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
                                                   BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_warps=w, num_stages=s)
            try:
                compiled = fn()
                torch.cuda.synchronize()
                results.append({"n": n, "config": name, "ok": _ok(torch, c, a, b) if n <= 4096 else None,
                                "mma": mma_kind(compiled), "ms": bench_ms(fn)})
            except Exception as e:  # noqa: BLE001  (one config failing must not lose the others)
                results.append({"n": n, "config": name, "error": f"{type(e).__name__}: {e}"[:300]})
    report_worker_result({"results": results})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--plot", default=None, metavar="PNG", help="TFLOP/s against size per config")
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    sizes = [int(x) for x in args.sizes.split(",")]
    tri = {}
    if not args.no_triton and have_triton():
        res = triton_worker(__file__, {"sizes": sizes, "configs": CONFIGS}, disable_mma_v3=False)
        if "error" in res:
            print(f"triton failed: {res['error']}")
        tri = {(r["n"], r["config"]): r for r in res.get("results", [])}
    lib = rt.load(args.artifacts)
    rows, notes = [], []
    panels = {name: {"ttbuild": [], "Triton (default)": [], "cuBLAS": []} for name, *_ in CONFIGS}
    for n in sizes:
        a, b, c = _inputs(torch, n)
        vendor = _cublas(torch, a, b, notes)
        for name, bm, bn, *_ in CONFIGS:
            launcher, why = variant_or_reason(lib, name)
            ours = None
            if launcher is None:
                notes.append(f"skip ttbuild {name}: {why}")
            else:
                grid = (_cdiv(n, bm) * _cdiv(n, bn),)
                fn = lambda launcher=launcher, grid=grid: launcher[grid](*_args(a, b, c))
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                if n <= 4096 and not _ok(torch, c, a, b):
                    notes.append(f"ttbuild {name} at {n}: WRONG result")
                ours = _tflops(n, bench_ms(fn))
            r = tri.get((n, name), {})
            if "error" in r:
                notes.append(f"triton {name} at {n}: {r['error']}")
            if r.get("ok") is False:
                notes.append(f"triton {name} at {n}: WRONG result")
            theirs = _tflops(n, r["ms"]) if "ms" in r else None
            rows.append((f"{n}^3", name.replace("matmul_fp8_", ""), f"{ours:.0f}" if ours else "",
                         f"{theirs:.0f} ({r.get('mma', '?')})" if theirs else "",
                         f"{ours / theirs:.3f}" if ours and theirs else "", f"{vendor:.0f}" if vendor else "",
                         f"{ours / vendor:.3f}" if ours and vendor else ""))
            for side, value in (("ttbuild", ours), ("Triton (default)", theirs), ("cuBLAS", vendor)):
                panels[name][side].append((n, value))
    print(f"\nmatmul fp8 e4m3 -> fp16 (fp32 accumulate), {torch.cuda.get_device_name()}, TFLOP/s, "
          "medians of triton.testing.do_bench")
    print(table(["size", "config", "ttbuild", "triton default", "x triton", "cuBLAS", "x cuBLAS"], rows))
    for line in notes:
        print("note:", line)
    if args.plot:
        plot_panels(args.plot, f"matmul fp8 e4m3 -> fp16, {torch.cuda.get_device_name()}",
                    [(name.replace("matmul_fp8_", ""), "M = N = K", series) for name, series in panels.items()],
                    log2_x=True)


def _cublas(torch, a, b, notes):
    """TFLOP/s of cuBLAS's fp8 GEMM on the same operands (torch._scaled_mm: A row-major, B
    K-major, unit per-tensor scales, fp16 out), or None where this torch lacks it."""
    one = torch.ones((), device="cuda", dtype=torch.float32)
    try:
        fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)  # noqa: E731
        fn()
        torch.cuda.synchronize()
    except (AttributeError, RuntimeError) as e:
        notes.append(f"cuBLAS fp8: {type(e).__name__}: {e}"[:200])
        return None
    return _tflops(a.shape[0], bench_ms(fn))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        worker(json.loads(sys.argv[2]))
    else:
        main()
