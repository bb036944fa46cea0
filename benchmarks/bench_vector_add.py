"""Vector add, 2**28 fp32: GB/s of ttbuild's add_kernel variants vs torch.add vs Triton's tutorial kernel (same source), same run, same GPU.

Bytes counted: read x and y, write out = 12 bytes per element. Also a device-to-device copy
(8 bytes per element) as the memory ceiling. Ratios are against Triton (or torch without it).
Usage: python benchmarks/bench_vector_add.py [--artifacts artifacts] [--log2n 28]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import bench_ms, have_triton, kernel_module, table  # noqa: E402

add_kernel = kernel_module("vector_add").add_kernel if have_triton() else None

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--log2n", type=int, default=28)
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    n = 2 ** args.log2n
    gpu = torch.cuda.get_device_name()
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    lib = rt.load(args.artifacts)

    def cdiv(a, b):
        return -(-a // b)

    cases = []
    for v in lib.add_kernel.variants:
        if v.launch_params[0].dtype != "fp32":
            continue
        launcher = lib.variant(v.variant)
        grid = (cdiv(n, v.constexprs["BLOCK_SIZE"]),)
        out.fill_(float("nan"))
        launcher[grid](x, y, out, n)
        torch.cuda.synchronize()
        ok = torch.equal(out, x + y)
        cases.append((f"ttbuild {v.variant} (num_warps={v.num_warps})" + ("" if ok else " WRONG"),
                      lambda launcher=launcher, grid=grid: launcher[grid](x, y, out, n), 12))
    cases.append(("torch.add", lambda: torch.add(x, y, out=out), 12))
    ref_name = "torch.add"
    if have_triton():
        import triton

        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
        cases.append(("triton add_kernel (BLOCK_SIZE=1024)",
                      lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024), 12))
        ref_name = cases[-1][0]
    cases.append(("copy (out.copy_(x), ceiling)", lambda: out.copy_(x), 8))

    results = []
    for name, fn, bytes_per in cases:
        ms = bench_ms(fn)
        results.append((name, ms, bytes_per * n / (ms * 1e-3) / 1e9))
    ref = dict((r[0], r[2]) for r in results)[ref_name]
    rows = [(name, f"{ms:.4f}", f"{gbs:,.0f}", f"{gbs / ref:.3f}") for name, ms, gbs in results]
    print(f"\nvector add, n = 2**{args.log2n} fp32, {gpu}, medians "
          f"({'triton.testing.do_bench' if have_triton() else 'CUDA events'})")
    print(table(["kernel", "ms", "GB/s", f"x {ref_name.split(' ')[0]}"], rows))


if __name__ == "__main__":
    main()
