"""Host time per launch of an unmodified Triton call site, served (ttbuild.runtime.serve) against Triton's own launch of the same JITFunction, in one process.

The call sites are the serve test project's kernels (tests/data/serve_proj), launched directly
with preallocated tensors in specializations its recorded rows cover: a grid callable and a
`== 1` stride, `.run` of a heuristics kernel, a dtype constexpr passed positionally, a `None`
pointer left to its default, an autotuned kernel (the recorded config on both sides). Each
row is the median over round-robin repetitions (bench_launch.round_robin) of N back-to-back
launches / N, served and with serving paused (Triton's JIT, warm) interleaved, so drift falls
on both alike. "x Triton" = Triton's us / served us (above 1: the served launch is cheaper).

This is the only part of a served call that differs from Triton's: the cubins are the same
work (benchmarks/bench_served.py --profile shows the kernels' GPU time), and the rest of a
project's host code runs unchanged.

Usage (GPU; Triton and torch installed; the library from tests/gpu/build_test_artifacts.py):
    python benchmarks/bench_served_launch.py [--library DIR] [-n 2000] [--reps 21]
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE, os.path.join(REPO, "tests", "data", "serve_proj")]

from _common import table  # noqa: E402
from bench_launch import round_robin  # noqa: E402


def call_sites():
    """(label, zero-argument launch) per served call form; imports the project after serve()."""
    import torch
    import triton
    import triton.language as tl
    from servepkg import masked, ops, rowscale

    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    rows, w = torch.randn(800, device="cuda").view(8, 100), torch.randn(100, device="cuda")
    rows_out = torch.empty_like(rows)
    wide = torch.randn(64, 2048, device="cuda")
    sums = torch.empty(64, device="cuda")
    n = x.numel()
    return [
        ("scale_kernel[grid callable](5 args, BLOCK=256)",
         lambda: ops.scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, 1, 2.5, BLOCK=256)),
        ("copy_kernel.run (heuristics)",
         lambda: masked.copy_kernel.run(x, out, 1024, BLOCK=128, grid=(8,), warmup=False)),
        ("rowscale_kernel[(8,)] (dtype constexpr positional, w)",
         lambda: rowscale.rowscale_kernel[(8,)](rows, rows_out, 100, 100, tl.float32, 128, w)),
        ("rowscale_kernel[(8,)] (w_ptr=None default, keywords)",
         lambda: rowscale.rowscale_kernel[(8,)](rows, rows_out, 100, 100, OUT_DTYPE=tl.float32, BLOCK=128)),
        ("rowscale_kernel[(8,)] (keywords, num_warps=4 launch option)",
         lambda: rowscale.rowscale_kernel[(8,)](rows, rows_out, 100, 100, OUT_DTYPE=tl.float32, BLOCK=128, num_warps=4)),
        ("rowsum_kernel[(64,)] (autotuned)", lambda: ops.rowsum_kernel[(64,)](wide, sums, 2048, 2048)),
    ]


def main(argv=None) -> int:
    default = os.path.join(os.environ.get("TTBUILD_TEST_ARTIFACTS", os.path.join(REPO, "build", "test-artifacts")), "serve")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", default=default, help="the serve test project's built library")
    ap.add_argument("-n", type=int, default=2000, help="launches per timed repetition")
    ap.add_argument("--reps", type=int, default=21, help="round-robin repetitions")
    args = ap.parse_args(argv)

    from ttbuild.runtime.serve import serve

    server = serve(args.library, miss="error")
    cases = call_sites()

    def side(fn, paused):
        def launch():
            server.paused = paused
            fn()
        return launch

    fns = [side(fn, paused) for _, fn in cases for paused in (False, True)]
    us = round_robin(fns, n=args.n, reps=args.reps)
    server.paused = False
    rows = [[label, f"{us[2 * i]:.2f}", f"{us[2 * i + 1]:.2f}", f"{us[2 * i + 1] / us[2 * i]:.2f}"]
            for i, (label, _) in enumerate(cases)]
    print(table(["call site", "served us", "Triton us", "x Triton"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
