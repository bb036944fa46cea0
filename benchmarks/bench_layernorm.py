"""Layer norm forward, 4096 x 8192 fp16: GB/s of ttbuild's _layer_norm_fwd_fused vs Triton's (tutorial 05, same source) vs torch layer_norm, same run, same GPU.

Bytes counted as the tutorial does: read x, write y = 4 bytes per element (fp16). Ratios are
against Triton with the same BLOCK_SIZE and num_warps (tutorial 05's choice: 8192, 8).
Artifacts: `doit` (kernels/ -> artifacts/; elsewhere $TTBUILD_ARTIFACTS or `--artifacts DIR`).
Usage: python benchmarks/bench_layernorm.py --artifacts DIR [--rows 4096] [--cols 8192]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import bench_ms, have_triton, kernel_module, table  # noqa: E402

_layer_norm_fwd_fused = kernel_module("layer_norm")._layer_norm_fwd_fused if have_triton() else None

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=8192)
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    M, N = args.rows, args.cols
    eps = 1e-5
    gpu = torch.cuda.get_device_name()
    x = (torch.randn(M, N, device="cuda") * 2 + 0.5).half()
    w = torch.rand(N, device="cuda").half()
    b = torch.randn(N, device="cuda").half()
    y = torch.empty_like(x)
    mean = torch.empty(M, device="cuda")
    rstd = torch.empty(M, device="cuda")
    ref = torch.nn.functional.layer_norm(x, (N,), w, b, eps)
    lib = rt.load(args.artifacts)
    cases, configs = [], []
    for v in lib._layer_norm_fwd_fused.variants:
        if v.constexprs["BLOCK_SIZE"] != min(65536 // 2, 1 << (N - 1).bit_length()):
            continue
        launcher = lib.variant(v.variant)
        run = lambda launcher=launcher: launcher[(M,)](x, y, w, b, mean, rstd, N, N, eps)  # noqa: E731
        y.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        ok = torch.allclose(y.float(), ref.float(), rtol=1e-2, atol=1e-2)
        cases.append((f"ttbuild {v.variant} (num_warps={v.num_warps})" + ("" if ok else " WRONG"), run))
        configs.append((v.constexprs["BLOCK_SIZE"], v.num_warps))
    cases.append(("torch layer_norm", lambda: torch.nn.functional.layer_norm(x, (N,), w, b, eps)))
    ref_name = "torch layer_norm"
    if have_triton():
        for block, nw in sorted(set(configs)) or [(8192, 8)]:
            name = f"triton _layer_norm_fwd_fused (BLOCK_SIZE={block}, num_warps={nw})"
            cases.append((name, lambda block=block, nw=nw: _layer_norm_fwd_fused[(M,)](
                x, y, w, b, mean, rstd, N, N, eps, BLOCK_SIZE=block, num_warps=nw)))
            if not ref_name.startswith("triton") or nw == 8:
                ref_name = name
    cases.append(("copy (ceiling)", lambda: y.copy_(x)))

    results = []
    for name, fn in cases:
        ms = bench_ms(fn)
        results.append((name, ms, 4 * M * N / (ms * 1e-3) / 1e9))
    refv = dict((r[0], r[2]) for r in results)[ref_name]
    by = dict((r[0], r[2]) for r in results)

    def same(name):  # ttbuild row -> Triton with the same num_warps
        w = name.rsplit("num_warps=", 1)[-1].split(")")[0]
        t = [v for k, v in by.items() if k.startswith("triton") and k.endswith(f"num_warps={w})")]
        return f"{by[name] / t[0]:.3f}" if name.startswith("ttbuild") and t else ""
    rows = [(name, f"{ms:.4f}", f"{gbs:,.0f}", f"{gbs / refv:.3f}", same(name)) for name, ms, gbs in results]
    print(f"\nlayer norm forward, {M} x {N} fp16, {gpu}, medians "
          f"({'triton.testing.do_bench' if have_triton() else 'CUDA events'})")
    print(table(["kernel", "ms", "GB/s", f"x {ref_name}", "x triton, same num_warps"], rows))


if __name__ == "__main__":
    main()
