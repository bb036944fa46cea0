"""Runs the serve test project's call sites on fixed inputs and saves every output: python drive.py OUT.pt [--serve ARTIFACTS]."""

import sys

import torch

if "--serve" in sys.argv:
    import ttbuild.runtime as rt

    rt.serve(sys.argv[sys.argv.index("--serve") + 1], miss="error")

from servepkg import masked, ops, rowscale  # noqa: E402  (after serve, as a served process would)


def main(path):
    g = torch.Generator(device="cuda").manual_seed(0)
    outs = {}
    for dtype in (torch.float32, torch.float16):
        base = torch.randn(4099, device="cuda", dtype=dtype, generator=g)
        outs[f"scale_contig_{dtype}"] = ops.scale(base[:4096], 2.5)            # stride 1, aligned, n % 16 == 0
        outs[f"scale_strided_{dtype}"] = ops.scale(base[::2], 0.5)             # stride 2, n odd
        outs[f"scale_unaligned_{dtype}"] = ops.scale(base[1:1001], -1.0)       # misaligned view
        outs[f"copy_even_{dtype}"] = masked.copy(base[:1024])
        outs[f"copy_odd_{dtype}"] = masked.copy(base[:1000])
        rows, w = base[:800].view(8, 100), base[1000:1100].clone()        # n_cols and row stride 100
        outs[f"rowscale_w_{dtype}"] = rowscale.rowscale(rows, w)            # w_ptr a tensor, OUT_DTYPE the dtype
        outs[f"rowscale_none_{dtype}"] = rowscale.rowscale(rows)            # w_ptr None (its default)
    for cols in (100, 2048):
        x = torch.randn(64, cols, device="cuda", generator=g)
        outs[f"rowsum_{cols}"] = ops.rowsum(x)
    torch.cuda.synchronize()
    torch.save({k: v.cpu() for k, v in outs.items()}, path)


if __name__ == "__main__":
    main(sys.argv[1])
