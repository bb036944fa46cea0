"""Seeded dropout (tutorial 04), 2**26 fp32 and fp16: GB/s of ttbuild's _seeded_dropout vs Triton's (same source file, kernels/dropout.py) vs torch dropout, same run, same GPU.

Bytes counted: read x, write out (8 bytes/element fp32, 4 fp16); Philox runs in registers. torch's
F.dropout also writes no mask when called without autograd, but draws its own random numbers.
Ratios are against Triton with the same dtype. Artifacts: `doit` (kernels/ -> artifacts/;
elsewhere $TTBUILD_ARTIFACTS or `--artifacts DIR`).
Usage: python benchmarks/bench_dropout.py [--artifacts artifacts] [--log2n 26]
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import bench_ms, have_triton, kernel_module, table  # noqa: E402


def _triton_dropout():
    return kernel_module("dropout")._seeded_dropout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--log2n", type=int, default=26)
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    n, p, seed = 2 ** args.log2n, 0.5, 1234
    gpu = torch.cuda.get_device_name()
    lib = rt.load(args.artifacts)
    theirs = _triton_dropout() if have_triton() else None
    results, refs = [], {}
    for v in lib._seeded_dropout.variants:
        dt = {"fp32": torch.float32, "fp16": torch.float16}[v.launch_params[0].dtype]
        size = torch.finfo(dt).bits // 8
        x = torch.rand(n, device="cuda").to(dt) + 1
        out = torch.empty_like(x)
        block = v.constexprs["BLOCK_SIZE"]
        grid = (-(-n // block),)
        launcher = lib.variant(v.variant)
        out.fill_(float("nan"))
        launcher[grid](x, out, n, p, seed)
        ok = not torch.isnan(out).any().item()
        if theirs is not None:
            ref = torch.empty_like(x)
            theirs[grid](x, ref, n, p, seed, BLOCK_SIZE=block, num_warps=v.num_warps)
            ok = ok and torch.equal(out, ref)
        cases = [(f"ttbuild {v.variant}" + ("" if ok else " WRONG"), lambda: launcher[grid](x, out, n, p, seed))]
        if theirs is not None:
            cases.append((f"triton _seeded_dropout {v.launch_params[0].dtype}",
                          lambda: theirs[grid](x, out, n, p, seed, BLOCK_SIZE=block, num_warps=v.num_warps)))
            refs[v.variant] = cases[-1][0]
        cases.append((f"torch dropout {v.launch_params[0].dtype}",
                      lambda: torch.nn.functional.dropout(x, p, training=True)))
        for name, fn in cases:
            ms = bench_ms(fn)
            results.append((v.variant, name, ms, 2 * size * n / (ms * 1e-3) / 1e9))
    by = {r[1]: r[3] for r in results}
    rows = [(name, f"{ms:.4f}", f"{gbs:,.0f}", f"{gbs / by[refs[var]]:.3f}" if var in refs else "")
            for var, name, ms, gbs in results]
    print(f"\nseeded dropout, n = 2**{args.log2n}, p = {p}, {gpu}, medians "
          f"({'triton.testing.do_bench' if have_triton() else 'CUDA events'})")
    print(table(["kernel", "ms", "GB/s", "x triton, same dtype"], rows))


if __name__ == "__main__":
    main()
