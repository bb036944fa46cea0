"""Row softmax, 4096 x 8192 fp32: GB/s of ttbuild's softmax_kernel vs Triton's (tutorial 02, same source) vs torch.softmax, same run, same GPU.

Bytes counted: read x, write out = 8 bytes per element. Ratios are against Triton with the same
num_warps as the first ttbuild variant (or torch without Triton). Artifacts: `doit` (kernels/ ->
artifacts/; elsewhere $TTBUILD_ARTIFACTS or `--artifacts DIR`).
Usage: python benchmarks/bench_softmax.py --artifacts DIR [--rows 4096] [--cols 8192]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import bench_ms, have_triton, kernel_module, table  # noqa: E402

softmax_kernel = kernel_module("softmax").softmax_kernel if have_triton() else None

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=8192)
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    M, N = args.rows, args.cols
    gpu = torch.cuda.get_device_name()
    x = torch.randn(M, N, device="cuda")
    out = torch.empty_like(x)
    ref = torch.softmax(x, dim=1)
    lib = rt.load(args.artifacts)
    cases, warps = [], []
    for v in lib.softmax_kernel.variants:
        if v.constexprs["BLOCK_SIZE"] < N or v.constexprs["BLOCK_SIZE"] >= 2 * N:
            continue
        launcher = lib.variant(v.variant)
        run = lambda launcher=launcher: launcher[(M,)](out, x, N, N, N)  # noqa: E731
        out.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        ok = torch.allclose(out, ref, rtol=1e-4, atol=1e-6)
        cases.append((f"ttbuild {v.variant} (num_warps={v.num_warps})" + ("" if ok else " WRONG"), run))
        warps.append(v.num_warps)
    cases.append(("torch.softmax", lambda: torch.softmax(x, dim=1)))
    ref_name = "torch.softmax"
    if have_triton():
        import triton

        block = triton.next_power_of_2(N)
        for w in sorted(set(warps)) or [8]:
            name = f"triton softmax_kernel (num_warps={w})"
            cases.append((name, lambda w=w: softmax_kernel[(M,)](out, x, N, N, N, BLOCK_SIZE=block, num_warps=w)))
        ref_name = f"triton softmax_kernel (num_warps={warps[0] if warps else 8})"
    cases.append(("copy (ceiling)", lambda: out.copy_(x)))

    results = []
    for name, fn in cases:
        ms = bench_ms(fn)
        results.append((name, ms, 8 * M * N / (ms * 1e-3) / 1e9))
    refv = dict((r[0], r[2]) for r in results)[ref_name]
    by = dict((r[0], r[2]) for r in results)

    def same(name):  # ttbuild row -> Triton with the same num_warps
        w = name.rsplit("num_warps=", 1)[-1].rstrip(")").split(")")[0]
        t = by.get(f"triton softmax_kernel (num_warps={w})")
        return f"{by[name] / t:.3f}" if name.startswith("ttbuild") and t else ""
    rows = [(name, f"{ms:.4f}", f"{gbs:,.0f}", f"{gbs / refv:.3f}", same(name)) for name, ms, gbs in results]
    print(f"\nsoftmax, {M} x {N} fp32, {gpu}, medians "
          f"({'triton.testing.do_bench' if have_triton() else 'CUDA events'})")
    print(table(["kernel", "ms", "GB/s", f"x {ref_name}", "x triton, same num_warps"], rows))


if __name__ == "__main__":
    main()
