"""Column sums of an 8192 x 8192 fp32 matrix in a tl.range(num_stages=S) loop, one program per column block: GB/s of ttbuild's colsum_kernel vs Triton's (same source) vs torch.sum(0), same run, same GPU.

The loop is latency-bound (few programs, one row per iteration): S = 1 is the unpipelined loop,
S = 3/4 keep S-1 rows in flight through cp.async. The point is ours vs Triton at the same S (on
an H200 the pipelined loops were slower than S = 1 for both compilers, and all far below torch).
Bytes counted: read x + write y. Ratios: against torch, and ours against Triton with the same
BN/num_warps/S. Artifacts: the colsum_bench* variants of tests/data/gpu_kernels/pipeline, built by
tests/gpu/build_test_artifacts.py into $TTBUILD_TEST_ARTIFACTS/pipeline (default
build/test-artifacts/pipeline), or --artifacts DIR.
Usage: python benchmarks/bench_pipeline.py [--artifacts DIR] [--rows 8192] [--cols 8192]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

from _common import bench_ms, have_triton, table  # noqa: E402

SOURCE = os.path.join(REPO, "tests", "data", "gpu_kernels", "pipeline", "pipeline.py")


def triton_colsum():
    """colsum_kernel compiled by Triton from the very file ttbuild built."""
    spec = importlib.util.spec_from_file_location("pipeline_kernels", SOURCE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.colsum_kernel


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.path.join(
        os.environ.get("TTBUILD_TEST_ARTIFACTS") or os.path.join(REPO, "build", "test-artifacts"), "pipeline"))
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=8192)
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    M, N = args.rows, args.cols
    x = torch.randn(M, N, device="cuda")
    y = torch.empty(N, device="cuda")
    ref = x.double().sum(0)
    lib = rt.load(args.artifacts)
    kern = triton_colsum() if have_triton() else None
    cases, configs = [], []
    for v in lib.colsum_kernel.variants:
        if not v.variant.startswith("colsum_bench"):
            continue
        bn, s, w = v.constexprs["BN"], v.constexprs["STAGES"], v.num_warps
        launcher = lib.variant(v.variant)
        run = lambda launcher=launcher, bn=bn: launcher[(N // bn,)](x, y, M, N, N)  # noqa: E731
        y.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        ok = torch.allclose(y.double(), ref, rtol=1e-4, atol=1e-2)
        key = f"BN={bn}, num_warps={w}, S={s}"
        cases.append((f"ttbuild {key}" + ("" if ok else " WRONG"), run))
        configs.append((key, bn, s, w))
    if kern is not None:
        for key, bn, s, w in configs:
            fn = lambda bn=bn, s=s, w=w: kern[(N // bn,)](x, y, M, N, N, BN=bn, STAGES=s, num_warps=w)  # noqa: E731
            y.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            ok = torch.allclose(y.double(), ref, rtol=1e-4, atol=1e-2)
            cases.append((f"triton {key}" + ("" if ok else " WRONG"), fn))
    cases.append(("torch.sum(x, 0)", lambda: torch.sum(x, 0, out=y)))

    gbytes = (M * N + N) * 4 / 1e9
    results = [(name, bench_ms(fn)) for name, fn in cases]
    by = {name: gbytes / (ms * 1e-3) for name, ms in results}
    torch_gbs = by["torch.sum(x, 0)"]

    def vs_triton(name):
        if not name.startswith("ttbuild "):
            return ""
        t = by.get("triton " + name[len("ttbuild "):])
        return f"{by[name] / t:.3f}" if t else ""

    rows = [(name, f"{ms:.4f}", f"{by[name]:,.0f}", f"{by[name] / torch_gbs:.3f}", vs_triton(name))
            for name, ms in results]
    print(f"\ncolumn sums, {M} x {N} fp32, {torch.cuda.get_device_name()}, medians "
          f"({'triton.testing.do_bench' if have_triton() else 'CUDA events'})")
    print(table(["kernel", "ms", "GB/s", "x torch", "x triton, same config"], rows))


if __name__ == "__main__":
    main()
