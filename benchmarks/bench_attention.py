"""FlashAttention-2 forward, fp16 (tutorial 06 form with pointer loads, kernels/attention.py `_attn_fwd`, or with host descriptors, `_attn_fwd_desc`, with --form desc): TFLOP/s of ttbuild's build vs Triton 3.6 compiled from the same source and config, forced onto mma.sync (DISABLE_MMA_V3=1: the comparison the ratios use) and by default (for reference), and torch SDPA; same run, same GPU.

Z=4, H=32, head dim 64 and 128, N_CTX 4096 and 16384, causal and not; each case in its row's
config (BLOCK_M, BLOCK_N, warps, stages, WARP_SPECIALIZE of attn_fwd[_desc]_d{64,128}[_causal][_ws]
in kernels/variants.toml), Triton given the same. FLOPs counted as
the tutorial: 4 Z H N^2 d, halved when causal. Triton runs in child processes (one with
DISABLE_MMA_V3=1 set before triton is imported), each checking its output against SDPA.
A ttbuild variant that is not built (`until` in kernels/variants.toml) is reported and skipped.
Artifacts: `doit` (kernels/ -> artifacts/; elsewhere $TTBUILD_ARTIFACTS or --artifacts DIR).
Usage: python benchmarks/bench_attention.py [--artifacts DIR] [--ctx 4096,16384] [--dims 64,128]
       [--batch 4] [--heads 32] [--no-triton] [--form pointers|desc] [--plot PNG]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import (
    KERNELS_DIR,
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

SM_SCALE = 0.5
TUNED = ("HEAD_DIM", "BLOCK_M", "BLOCK_N", "STAGE", "WARP_SPECIALIZE")  # the constexprs Triton is given


def _cdiv(a, b):
    return -(-a // b)


def _name(d, causal, form="pointers", ws=False):
    return f"attn_fwd{'_desc' if form == 'desc' else ''}_d{d}" + ("_causal" if causal else "") + ("_ws" if ws else "")


def _config(name):
    """(constexprs Triton is given, num_warps, num_stages) of variant `name` of kernels/variants.toml;
    KeyError when there is no such row."""
    with open(os.path.join(KERNELS_DIR, "variants.toml"), "rb") as f:
        row = next((v for v in tomllib.load(f)["variant"] if v["name"] == name), None)
    if row is None:
        raise KeyError(f"no variant {name} in kernels/variants.toml")
    return ({k: v for k, v in row["constexprs"].items() if k in TUNED}, row.get("num_warps", 4),
            row.get("num_stages", 3))


def _tflops(case, ms):
    Z, H, N, d, causal = case
    return 4.0 * Z * H * N * N * d * (0.5 if causal else 1.0) / (ms * 1e-3) / 1e12


def _tensors(torch, case):
    Z, H, N, d, _ = case
    gen = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v = ((torch.randn(Z, H, N, d, device="cuda", generator=gen) * 0.5).half() for _ in range(3))
    o = torch.empty_like(q)
    m = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
    return q, k, v, o, m


def _args(q, k, v, o, m):
    Z, H, N, _ = q.shape
    return (q, k, v, SM_SCALE, m, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), Z, H, N)


def _descriptors(TD, q, k, v, o, cx):
    """Tutorial 06's host descriptors: Q, K, V, Out as (Z * H * N_CTX, HEAD_DIM), blocks of the
    row's BLOCK_M (Q, Out) and BLOCK_N (K, V)."""
    Z, H, N, d = q.shape
    bm, bn = cx["BLOCK_M"], cx["BLOCK_N"]
    return tuple(TD.from_tensor(t.reshape(Z * H * N, d), [blk, d]) for t, blk in ((q, bm), (k, bn), (v, bn), (o, bm)))


def _sdpa(torch, q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SM_SCALE)


def _close(torch, o, ref):
    return bool(torch.allclose(o.float(), ref.float(), rtol=0, atol=2e-2))


def worker(job: dict) -> None:
    """Child process: Triton's _attn_fwd from kernels/attention.py on every case."""
    import torch

    mod = kernel_module("attention")
    desc = job.get("form") == "desc"
    if desc:
        from triton.tools.tensor_descriptor import TensorDescriptor
    results = []
    for case in map(tuple, job["cases"]):
        Z, H, N, d, causal = case
        q, k, v, o, m = _tensors(torch, case)
        ref = _sdpa(torch, q, k, v, causal)

        try:
            cx, warps, stages = _config(_name(d, causal, job.get("form"), job.get("ws")))
            grid = (_cdiv(N, cx["BLOCK_M"]), Z * H, 1)
            descs = _descriptors(TensorDescriptor, q, k, v, o, cx) if desc else None

            def fn(t=(q, k, v, o, m), cx=cx, grid=grid, descs=descs, warps=warps, stages=stages):
                if desc:
                    return mod._attn_fwd_desc[grid](SM_SCALE, t[4], Z, H, *descs, N, **cx, num_warps=warps,
                                                    num_stages=stages)
                return mod._attn_fwd[grid](*_args(*t), **cx, num_warps=warps, num_stages=stages)

            o.fill_(float("nan"))
            compiled = fn()
            torch.cuda.synchronize()
            results.append({"case": case, "ok": _close(torch, o, ref), "mma": mma_kind(compiled), "ms": bench_ms(fn)})
        except Exception as e:  # noqa: BLE001  (one case failing must not lose the others)
            results.append({"case": case, "error": f"{type(e).__name__}: {e}"[:300]})
    report_worker_result({"results": results})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--ctx", default="4096,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--plot", default=None, metavar="PNG",
                    help="also plot TFLOP/s against N_CTX, a panel per head dim and causal mode")
    ap.add_argument("--form", choices=("pointers", "desc"), default="pointers",
                    help="desc: _attn_fwd_desc with host descriptors (TMA on sm_90) on both sides")
    ap.add_argument("--ws", action="store_true",
                    help="with --form desc: the warp-specialized variants (attn_fwd_desc_d*[_causal]_ws; a case "
                         "without a row is reported and skipped), Triton given WARP_SPECIALIZE=True")
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    gpu = torch.cuda.get_device_name()
    cases = [(args.batch, args.heads, n, d, causal) for d in map(int, args.dims.split(","))
             for n in map(int, args.ctx.split(",")) for causal in (False, True)]

    tri_v2 = tri_v3 = {}
    if not args.no_triton and have_triton():
        job = {"cases": cases, "form": args.form, "ws": args.ws}
        tri_v2 = triton_worker(__file__, job, disable_mma_v3=True)
        tri_v3 = triton_worker(__file__, job, disable_mma_v3=False)
        for label, res in (("DISABLE_MMA_V3=1", tri_v2), ("default", tri_v3)):
            if "error" in res:
                print(f"triton ({label}) failed: {res['error']}")
    elif not args.no_triton:
        print("triton is not importable here: Triton columns left empty")
    v2 = {tuple(r["case"]): r for r in tri_v2.get("results", [])}
    v3 = {tuple(r["case"]): r for r in tri_v3.get("results", [])}

    lib = rt.load(args.artifacts)
    notes, rows = [], []
    panels: dict = {}  # (d, causal) -> {side: [(N_CTX, TFLOP/s)]}

    def tri(index, case):
        r = index.get(case)
        if r is None:
            return None, ""
        if "error" in r:
            notes.append(f"triton {case}: {r['error']}")
            return None, "error"
        if not r["ok"]:
            notes.append(f"triton {case} ({r['mma']}): WRONG result")
        return _tflops(case, r["ms"]), r["mma"]

    for case in cases:
        Z, H, N, d, causal = case
        q, k, v, o, m = _tensors(torch, case)
        ref = _sdpa(torch, q, k, v, causal)
        sdpa = _tflops(case, bench_ms(lambda t=(q, k, v), c=causal: _sdpa(torch, *t, c)))
        name = _name(d, causal, args.form, args.ws)
        launcher, why = variant_or_reason(lib, name)
        ours = None
        if launcher is None:
            notes.append(f"skip ttbuild {name}: {why}")
        else:
            cx = _config(name)[0]
            grid = (_cdiv(N, cx["BLOCK_M"]), Z * H, 1)
            if args.form == "desc":
                descs = _descriptors(rt.TensorDescriptor, q, k, v, o, cx)
                fn = lambda launcher=launcher, grid=grid, dd=descs, m=m, Z=Z, H=H, N=N: launcher[grid](  # noqa: E731
                    SM_SCALE, m, Z, H, *dd, N)
            else:
                fn = lambda launcher=launcher, grid=grid, t=(q, k, v, o, m): launcher[grid](*_args(*t))  # noqa: E731
            try:
                o.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                if not _close(torch, o, ref):
                    notes.append(f"ttbuild {name} at N={N}: WRONG result")
                ours = _tflops(case, bench_ms(fn))
            except Exception as e:  # noqa: BLE001
                notes.append(f"ttbuild {name} at N={N}: {type(e).__name__}: {e}")
        t2, k2 = tri(v2, case)
        t3, k3 = tri(v3, case)
        for side, val in (("ttbuild", ours), ("Triton (default)", t3), ("torch SDPA", sdpa)):
            panels.setdefault((d, causal), {}).setdefault(side, []).append((N, val))
        rows.append((d, N, "yes" if causal else "no", fmt(ours), fmt(t2) + (f" ({k2})" if k2 else ""),
                     ratio(ours, t2), fmt(t3) + (f" ({k3})" if k3 else ""), ratio(ours, t3), fmt(sdpa),
                     ratio(ours, sdpa)))
    print(f"\nattention forward fp16 ({args.form}{', warp-specialized' if args.ws else ''}), Z={args.batch} "
          f"H={args.heads}, configs of kernels/variants.toml, {gpu}, TFLOP/s, medians of triton.testing.do_bench")
    print(table(["d", "N_CTX", "causal", "ttbuild", "triton DISABLE_MMA_V3=1", "x triton mma.sync",
                 "triton default", "x triton default", "torch SDPA", "x SDPA"], rows))
    for n in dict.fromkeys(notes):
        print("note:", n)
    if args.plot:
        plot_panels(args.plot, f"attention forward fp16 ({args.form}), Z={args.batch} H={args.heads}, {gpu}",
                    [(f"d{d}{', causal' if c else ''}", "N_CTX", series) for (d, c), series in panels.items()],
                    log2_x=True)




if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        worker(json.loads(sys.argv[2]))
    else:
        main()
