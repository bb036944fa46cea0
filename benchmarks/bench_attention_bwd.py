"""FlashAttention-2 backward, fp16 (tutorial 06 form, kernels/attention.py `_attn_bwd_preprocess` then `_attn_bwd`): TFLOP/s of ttbuild's build vs Triton 3.6 compiled from the same source and config (default path, and DISABLE_MMA_V3=1 for reference) and torch SDPA's backward; same run, same GPU.

Z=4, H=32, head dim 64 and 128, N_CTX 4096 (and 16384 with --ctx), causal and not; the
configuration of each case is its variant's in kernels/variants.toml (attn_bwd_d{64,128}[_causal]:
BLOCK_M1 32, BLOCK_N1 128, BLOCK_M2 128, BLOCK_N2 32, 4 warps, 5 stages, tutorial 06's; rows
`128_w8`: attn_bwd_d128[_causal]_w8, 8 warps and 3 stages; `128_w8_m64`: attn_bwd_d128_w8_m64, the
same with BLOCK_M1 and BLOCK_N2 64), so both compilers build the same kernel. O and M come from each side's own forward kernel (attn_fwd_d*, as the tutorial's
autograd function); the timed work is the preprocess (Delta) plus the backward kernel. FLOPs
counted as the tutorial: 2.5 x the forward's 4 Z H N^2 d, halved when causal. Every side's dQ,
dK, dV are checked against SDPA's backward (atol 3e-2: fp16 outputs, fp32 accumulation).
Artifacts: `doit` (kernels/ -> artifacts/; elsewhere $TTBUILD_ARTIFACTS or --artifacts DIR).
With --plot PNG, TFLOP/s against N_CTX, a panel per backward row and causal mode (ttbuild,
Triton default, SDPA's backward).
Usage: python benchmarks/bench_attention_bwd.py [--artifacts DIR] [--ctx 4096] [--dims 64,128]
       [--batch 4] [--heads 32] [--no-triton] [--plot PNG]
"""

from __future__ import annotations

import argparse
import json
import math
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
FWD_BLOCK_M = 128


def _cdiv(a, b):
    return -(-a // b)


def _variants() -> dict:
    with open(os.path.join(KERNELS_DIR, "variants.toml"), "rb") as f:
        return {v["name"]: v for v in tomllib.load(f)["variant"]}


def _names(d, causal, tag=""):
    """(forward, preprocess, backward) variant names; `tag` a backward variant's config suffix
    (`_w8`, `_w8_m64`: kernels/variants.toml's 8-warp d128 forms on 32- and 64-row steps)."""
    tail = "_causal" if causal else ""
    return f"attn_fwd_d{d}{tail}", f"attn_bwd_preprocess_d{d}", f"attn_bwd_d{d}{tail}{tag}"


def _tflops(case, ms):
    Z, H, N, d, causal, _ = case
    return 2.5 * 4.0 * Z * H * N * N * d * (0.5 if causal else 1.0) / (ms * 1e-3) / 1e12


def _tensors(torch, case):
    Z, H, N, d, _, _ = case
    gen = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v, do = ((torch.randn(Z, H, N, d, device="cuda", generator=gen) * 0.5).half() for _ in range(4))
    return q, k, v, do


def _reference(torch, q, k, v, do, causal):
    """SDPA's dQ, dK, dV and its backward's milliseconds."""
    qr, kr, vr = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=SM_SCALE)
    out.backward(do, retain_graph=True)
    grads = (qr.grad.clone(), kr.grad.clone(), vr.grad.clone())
    ms = bench_ms(lambda: out.backward(do, retain_graph=True))
    return grads, ms


def _close(torch, got, want):
    return all(bool(torch.allclose(g.float(), w.float(), rtol=0, atol=3e-2)) for g, w in zip(got, want))


def _runner(torch, fwd, pre, bwd, case, cfg):
    """(forward call, backward call, dq, dk, dv) for one case; fwd/pre/bwd are launchers (ttbuild
    or Triton with the variant's constexprs bound); cfg the backward variant's constexprs."""
    Z, H, N, d, causal, _ = case
    q, k, v, do = _tensors(torch, case)
    o = torch.empty_like(q)
    m = torch.empty(Z * H * N, device="cuda", dtype=torch.float32)
    delta = torch.empty_like(m)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    arg_k = k * (SM_SCALE / math.log(2))  # K pre-scaled to the log2 domain, as the tutorial's host code

    def forward():
        fwd[(_cdiv(N, FWD_BLOCK_M), Z * H, 1)](q, k, v, SM_SCALE, m, o, *q.stride(), *k.stride(), *v.stride(),
                                                *o.stride(), Z, H, N)

    def backward():
        pre[(_cdiv(N, cfg["pre_block_m"]), Z * H)](o, do, delta, Z, H, N)
        bwd[(_cdiv(N, cfg["BLOCK_N1"]), 1, Z * H)](q, arg_k, v, SM_SCALE, do, dq, dk, dv, m, delta, *q.stride(), H, N)

    return forward, backward, (q, k, v, do), (dq, dk, dv)


def worker(job: dict) -> None:
    """Child process: Triton's forward, preprocess and backward from kernels/attention.py."""
    import torch

    mod = kernel_module("attention")
    rows = _variants()
    results = []
    for case in map(tuple, job["cases"]):
        Z, H, N, d, causal, tag = case
        fname, pname, bname = _names(d, causal, tag)
        try:
            fwd = _TritonBound(mod._attn_fwd, rows[fname])
            pre = _TritonBound(mod._attn_bwd_preprocess, rows[pname])
            bwd = _TritonBound(mod._attn_bwd, rows[bname])
            cfg = dict(rows[bname]["constexprs"], pre_block_m=rows[pname]["constexprs"]["BLOCK_M"])
            forward, backward, (q, k, v, do), grads = _runner(torch, fwd, pre, bwd, case, cfg)
            forward()
            backward()
            torch.cuda.synchronize()
            want, _ = _reference(torch, q, k, v, do, causal)
            results.append({"case": case, "ok": _close(torch, grads, want), "mma": mma_kind(bwd.compiled),
                            "ms": bench_ms(backward)})
        except Exception as e:  # noqa: BLE001  (one case failing must not lose the others)
            results.append({"case": case, "error": f"{type(e).__name__}: {e}"[:300]})
    report_worker_result({"results": results})


class _TritonBound:
    """`kernel[grid](*args)` for a Triton @jit kernel called as ttbuild's launcher is: the
    leading parameters positionally (constexprs among them, such as stride_d = 1, included), the
    variant's other constexprs, warps and stages bound here."""

    def __init__(self, kernel, row):
        import inspect

        self.kernel, self.row, self.compiled = kernel, row, None
        self.params = list(inspect.signature(kernel.fn).parameters)

    def __getitem__(self, grid):
        def call(*args):
            rest = {k: v for k, v in self.row["constexprs"].items() if k not in self.params[:len(args)]}
            self.compiled = self.kernel[grid](*args, **rest, num_warps=self.row.get("num_warps", 4),
                                              num_stages=self.row.get("num_stages", 3))
            return self.compiled
        return call


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--ctx", default="4096")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--plot", default=None, metavar="PNG", help="TFLOP/s against N_CTX per row and causal mode")
    args = ap.parse_args(argv)

    import torch

    import ttbuild.runtime as rt

    gpu = torch.cuda.get_device_name()
    rows_toml = _variants()
    cases = [(args.batch, args.heads, n, d, causal, tag) for d in map(int, args.dims.split(","))
             for tag in ("", "_w8", "_w8_m64") for n in map(int, args.ctx.split(",")) for causal in (False, True)
             if _names(d, causal, tag)[2] in rows_toml]

    tri = {}
    if not args.no_triton and have_triton():
        for label, v2 in (("default", False), ("DISABLE_MMA_V3=1", True)):
            res = triton_worker(__file__, {"cases": cases}, disable_mma_v3=v2)
            if "error" in res:
                print(f"triton ({label}) failed: {res['error']}")
            tri[label] = {tuple(r["case"]): r for r in res.get("results", [])}
    elif not args.no_triton:
        print("triton is not importable here: Triton columns left empty")

    lib = rt.load(args.artifacts)
    notes, rows = [], []
    panels = {}  # (row, causal) -> {side: [(N_CTX, TFLOP/s)]}

    def tri_tflops(label, case):
        r = tri.get(label, {}).get(case)
        if r is None:
            return None, ""
        if "error" in r:
            notes.append(f"triton {label} {case}: {r['error']}")
            return None, "error"
        if not r["ok"]:
            notes.append(f"triton {label} {case} ({r['mma']}): WRONG result")
        return _tflops(case, r["ms"]), r["mma"]

    for case in cases:
        Z, H, N, d, causal, tag = case
        names = _names(d, causal, tag)
        launchers = [variant_or_reason(lib, n) for n in names]
        ours = None
        q, k, v, do = _tensors(torch, case)
        want, sdpa_ms = _reference(torch, q, k, v, do, causal)
        if any(lch is None for lch, _ in launchers):
            notes.extend(why for lch, why in launchers if lch is None)
        else:
            cfg = dict(rows_toml[names[2]]["constexprs"], pre_block_m=rows_toml[names[1]]["constexprs"]["BLOCK_M"])
            forward, backward, _, grads = _runner(torch, *(lch for lch, _ in launchers), case, cfg)
            try:
                forward()
                backward()
                torch.cuda.synchronize()
                if not _close(torch, grads, want):
                    notes.append(f"ttbuild {names[2]} at N={N}: WRONG result")
                ours = _tflops(case, bench_ms(backward))
            except Exception as e:  # noqa: BLE001
                notes.append(f"ttbuild {names[2]} at N={N}: {type(e).__name__}: {e}")
        t3, k3 = tri_tflops("default", case)
        t2, k2 = tri_tflops("DISABLE_MMA_V3=1", case)
        sdpa = _tflops(case, sdpa_ms)
        series = panels.setdefault((f"d{d}{tag}", causal), {"ttbuild": [], "Triton (default)": [], "torch SDPA": []})
        for side, value in (("ttbuild", ours), ("Triton (default)", t3), ("torch SDPA", sdpa)):
            series[side].append((N, value))
        rows.append((f"{d}{tag}", N, "yes" if causal else "no", fmt(ours), fmt(t3) + (f" ({k3})" if k3 else ""),
                     ratio(ours, t3), fmt(t2) + (f" ({k2})" if k2 else ""), ratio(ours, t2), fmt(sdpa),
                     ratio(ours, sdpa)))
    print(f"\nattention backward fp16 (preprocess + _attn_bwd), Z={args.batch} H={args.heads}, configs of "
          f"kernels/variants.toml, {gpu}, TFLOP/s, medians of triton.testing.do_bench")
    print(table(["d", "N_CTX", "causal", "ttbuild", "triton default", "x triton default",
                 "triton DISABLE_MMA_V3=1", "x triton mma.sync", "SDPA bwd", "x SDPA"], rows))
    for n in dict.fromkeys(notes):
        print("note:", n)
    if args.plot:
        plot_panels(args.plot, f"attention backward fp16, Z={args.batch} H={args.heads}, {gpu}",
                    [(f"{row}{', causal' if causal else ''}", "N_CTX", series)
                     for (row, causal), series in panels.items()], log2_x=True)




if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        worker(json.loads(sys.argv[2]))
    else:
        main()
