"""Tensor descriptors (kernels/matmul_descriptor.py, kernels/matmul_persistent.py): TFLOP/s of the matmul with descriptors made in the kernel and made on the host, and of tutorial 09's descriptor-persistent form (B given N x K, 132 programs; its TMA form also warp-specialized, Triton given WARP_SPECIALIZE=True alike), and cuBLAS, against ttbuild's pointer matmul (kernels/matmul.py, same tile) and Triton 3.6 compiling the same descriptor sources; and the host time of a launch with descriptor arguments against one with pointers.

Both ttbuild and Triton load through TMA on sm_90: host descriptors (tensordesc<...> parameters)
as they are, descriptors made in the kernel through a CUtensorMap each program writes to global
scratch (ttbuild.backend.llir.tensormap).
Triton runs in a child process. Launch cost: through a cuLaunchKernel that launches nothing
(the C path's no-op, as benchmarks/bench_launch.py measures: the launcher alone) and through
the real one, best of 20 rounds of 300 calls, the rows interleaved; descriptors as ttbuild's
TensorDescriptor and (where triton imports) Triton's. `--before FILE` adds the same rows launched
through another claunch.c (`git show HEAD:ttbuild/runtime/claunch.c > old.c`: its DescExpand and
FastLaunch), in the same rounds; `--launch-only` skips the TFLOP/s table. `--plot PNG`: TFLOP/s
against size, a panel per descriptor form Triton also builds (ttbuild, Triton, cuBLAS).
Usage: python benchmarks/bench_descriptor.py [--artifacts DIR] [--sizes 4096,8192] [--no-triton]
       [--launch-only] [--before FILE] [--plot PNG]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import (
    WORKER_FLAG,
    bench_ms,
    have_triton,
    kernel_module,
    plot_panels,
    report_worker_result,
    table,
    triton_worker,
)

BM, BN, BK = 128, 128, 64
NUM_SMS = 132  # the persistent rows' NUM_SMS (kernels/variants.toml): an H100's / H200's SMs


def _inputs(torch, n):
    gen = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16, generator=gen)
    return a, b, torch.empty(n, n, device="cuda", dtype=torch.float16)


def _tflops(n, ms):
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def triton_side(job: dict) -> None:
    """Child process: Triton compiles kernels/matmul_descriptor.py (TMA on sm_90)."""
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    mod = kernel_module("matmul_descriptor")
    pers = kernel_module("matmul_persistent")
    out = {}
    for n in job["sizes"]:
        a, b, c = _inputs(torch, n)
        grid = ((n // BM) * (n // BN),)
        dev = lambda: mod.matmul_descriptor_kernel[grid](a, b, c, n, n, n, BM, BN, BK, 8,  # noqa: E731
                                                         num_warps=4, num_stages=4)
        da, db, dc = (TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [BM, BK]), (b, [BK, BN]), (c, [BM, BN])))
        host = lambda: mod.matmul_host_descriptor_kernel[grid](da, db, dc, n, n, n, 8,  # noqa: E731
                                                               num_warps=4, num_stages=4)
        bt = b.T.contiguous()
        persistent = {
            f"persistent{'_subtile' if sub else ''}": lambda sub=sub: pers.matmul_persistent_kernel[(NUM_SMS,)](
                a, bt, c, n, n, n, BM, BN, BK, 8, sub, NUM_SMS, num_warps=4, num_stages=4)
            for sub in (False, True)}
        for bn, w, st in ((BN, 4, 4), (256, 8, 3)):  # tutorial 09's TMA-persistent form, host descriptors
            ta, tb, tc = (TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [BM, BK]), (bt, [bn, BK]), (c, [BM, bn])))
            for ws in (False, True):
                persistent[f"tma_persistent_{bn}{'_ws' if ws else ''}"] = lambda ta=ta, tb=tb, tc=tc, w=w, st=st, ws=ws: \
                    pers.matmul_tma_persistent_kernel[(NUM_SMS,)](ta, tb, tc, n, n, n, 8, False, NUM_SMS, ws,
                                                                  num_warps=w, num_stages=st)
        out[n] = {}
        for name, fn in (("device", dev), ("host", host), *persistent.items()):
            try:
                fn()
                torch.cuda.synchronize()
                ok = bool(torch.allclose(c.float(), (a.float() @ b.float()), rtol=1e-2, atol=1e-1 * (n / 512) ** 0.5))
                out[n][name] = {"ms": bench_ms(fn), "ok": ok}
            except Exception as e:  # noqa: BLE001 - one form failing must not lose the other
                out[n][name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    report_worker_result({"results": {str(k): v for k, v in out.items()}})


def _through(launcher, module, address):
    """`launcher` (lib.variant(...): a Launcher, or a DescriptorLauncher over one) launching
    through `module`, another build of claunch.c: its FastLaunch and DescExpand."""
    from ttbuild.runtime.tensordesc import DescriptorLauncher

    k = launcher.inner if isinstance(launcher, DescriptorLauncher) else launcher
    k._ns = k._namespace()
    k._c_launch, k._c_address = module.FastLaunch, address
    if isinstance(launcher, DescriptorLauncher):
        launcher._in_c = lambda fn, launch: module.DescExpand(*launcher._c_plan, fn, launch,
                                                              tensormaps=launcher._c_tensormaps)
    return launcher


def _launch_cost(torch, artifacts, noop: bool, before=None) -> dict:
    """Best µs per launch of the host-descriptor matmul (3 TMA descriptors + 3 ints; ttbuild's
    TensorDescriptor and, where triton imports, Triton's) and the in-kernel-descriptor one (3
    pointers + 3 ints) at 512³ (16 programs): through a no-op cuLaunchKernel (the launcher's own
    cost) or a real one (what a caller waits for; the GPU work of 300 launches outlasts their
    enqueueing, so the queue never fills). `before`: another claunch.c module, whose rows are
    keyed "... (before)"."""
    import ttbuild.runtime as rt
    from ttbuild.runtime import cext

    class NoopLaunchDriver(rt.CudaDriver):
        @property
        def c_launch_address(self):
            module = cext.load()
            return module.noop_launch_address() if module is not None else None

    a, b, c = _inputs(torch, 512)
    blocks = ((a, [BM, BK]), (b, [BK, BN]), (c, [BM, BN]))
    da, db, dc = (rt.TensorDescriptor.from_tensor(t, blk) for t, blk in blocks)
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor
        ta, tb, tc = (TritonDescriptor.from_tensor(t, blk) for t, blk in blocks)
    except ImportError:
        ta = None
    fns = {}
    for tag, module in (("", None), (" (before)", before)):
        if tag and module is None:
            continue
        lib = rt.load(artifacts, driver=NoopLaunchDriver() if noop else rt.CudaDriver())
        host_k = lib.variant("matmul_hostdesc_fp16_128x128x64_w4_s4")
        ptrs_k = lib.variant("matmul_desc_fp16_128x128x64_w4_s4")
        if module is not None:
            address = module.noop_launch_address() if noop else ptrs_k.driver.c_launch_address
            host_k, ptrs_k = _through(host_k, module, address), _through(ptrs_k, module, address)
        host, ptrs = host_k[(16,)], ptrs_k[(16,)]
        fns[f"descriptors{tag}"] = lambda host=host: host(da, db, dc, 512, 512, 512)
        if ta is not None:
            fns[f"Triton descriptors{tag}"] = lambda host=host: host(ta, tb, tc, 512, 512, 512)
        fns[f"pointers{tag}"] = lambda ptrs=ptrs: ptrs(a, b, c, 512, 512, 512)
    best = {k: float("inf") for k in fns}
    for _ in range(20):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(300):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / 300 * 1e6)
    torch.cuda.synchronize()
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--launch-only", action="store_true", help="only the launch-cost lines")
    ap.add_argument("--before", help="another claunch.c (the last commit's) whose launch rows run beside ours")
    ap.add_argument("--plot", default=None, metavar="PNG", help="TFLOP/s against size per form Triton builds too")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    import torch

    import ttbuild.runtime as rt

    tri = {}
    if args.launch_only:
        sizes = []
    elif not args.no_triton and have_triton():
        tri = triton_worker(__file__, {"sizes": sizes}, disable_mma_v3=False)
        if "error" in tri:
            print(f"triton failed: {tri['error']}")
    lib = rt.load(args.artifacts)
    rows = []
    panels = {}  # form -> {side: [(size, TFLOP/s)]}
    for n in sizes:
        a, b, c = _inputs(torch, n)
        grid = ((n // BM) * (n // BN),)
        descs = tuple(rt.TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [BM, BK]), (b, [BK, BN]), (c, [BM, BN])))
        bt = b.T.contiguous()  # the persistent form's B, N x K
        forms = {
            "pointers (kernels/matmul.py)": lambda g=grid: lib.variant("matmul_fp16_128x128x64_w4_s4")[g](
                a, b, c, n, n, n, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1),
            "descriptors made in the kernel": lambda g=grid: lib.variant("matmul_desc_fp16_128x128x64_w4_s4")[g](
                a, b, c, n, n, n),
            "descriptors from the host": lambda g=grid: lib["matmul_host_descriptor_kernel"][g](*descs, n, n, n),
            "descriptor-persistent (B as N x K)": lambda: lib.variant("matmul_persistent_fp16_128x128x64_w4_s4")[
                (NUM_SMS,)](a, bt, c, n, n, n),
            "descriptor-persistent, split epilogue": lambda: lib.variant(
                "matmul_persistent_fp16_128x128x64_w4_s4_subtile")[(NUM_SMS,)](a, bt, c, n, n, n),
        }
        triton_key = {"descriptors made in the kernel": "device", "descriptors from the host": "host",
                      "descriptor-persistent (B as N x K)": "persistent",
                      "descriptor-persistent, split epilogue": "persistent_subtile"}
        for bn, w, st in ((BN, 4, 4), (256, 8, 3)):
            td = tuple(rt.TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [BM, BK]), (bt, [bn, BK]), (c, [BM, bn])))
            for ws in ("", "_ws"):
                v = f"matmul_tma_persistent_fp16_{BM}x{bn}x{BK}_w{w}_s{st}{ws}"
                name = f"TMA-persistent, host descriptors ({BM}x{bn}x{BK} w{w} s{st}{', warp-specialized' if ws else ''})"
                forms[name] = lambda v=v, td=td: lib.variant(v)[(NUM_SMS,)](*td, n, n, n)
                triton_key[name] = f"tma_persistent_{bn}{ws}"
        forms["cuBLAS (torch.matmul, for reference)"] = lambda: torch.matmul(a, b, out=c)
        t = tri.get("results", {}).get(str(n), {})
        for name, fn in forms.items():
            fn()
            torch.cuda.synchronize()
            ok = bool(torch.allclose(c.float(), (a.float() @ b.float()), rtol=1e-2, atol=1e-1 * (n / 512) ** 0.5))
            ms = bench_ms(fn)
            ref = t.get(triton_key.get(name, ""), {})
            rows.append([f"{n}³", name, f"{ms:.3f}", f"{_tflops(n, ms):.0f}", "ok" if ok else "WRONG",
                         f"{_tflops(n, ref['ms']):.0f}" if ref.get("ms") else "",
                         f"{ref['ms'] / ms:.2f}" if ref.get("ms") else ""])
            if name in triton_key:
                series = panels.setdefault(name, {"ttbuild": [], "Triton (default)": [], "cuBLAS": []})
                series["ttbuild"].append((n, _tflops(n, ms)))
                series["Triton (default)"].append((n, _tflops(n, ref["ms"]) if ref.get("ms") else None))
            elif name.startswith("cuBLAS"):
                for series in panels.values():
                    series["cuBLAS"].append((n, _tflops(n, ms)))
    print(f"GPU: {torch.cuda.get_device_name()}; tile {BM}x{BN}x{BK}, 4 warps, 4 stages unless named")
    if rows:
        print(table(["size", "ttbuild form", "ms", "TFLOP/s", "check", "Triton TFLOP/s (TMA)", "Triton ms / ours"], rows))
    if args.plot and panels:
        plot_panels(args.plot, f"matmul fp16 through tensor descriptors, {torch.cuda.get_device_name()}",
                    [(name, "M = N = K", series) for name, series in panels.items()], log2_x=True)
    before = None
    if args.before:
        from pathlib import Path

        from ttbuild.runtime import cext

        before = cext.compile_module(source=Path(args.before))
    for noop, what in ((True, "launcher alone (no-op cuLaunchKernel)"), (False, "a real launch")):
        cost = _launch_cost(torch, args.artifacts, noop, before)
        for tag in ("", " (before)") if before is not None else ("",):
            ptr = cost[f"pointers{tag}"]
            line = (f"host time per launch, {what}{tag}: 3 TMA descriptors + 3 ints {cost[f'descriptors{tag}']:.2f} µs "
                    f"({cost[f'descriptors{tag}'] / ptr:.2f}x)")
            if f"Triton descriptors{tag}" in cost:
                line += (f", as Triton's TensorDescriptor {cost[f'Triton descriptors{tag}']:.2f} µs "
                         f"({cost[f'Triton descriptors{tag}'] / ptr:.2f}x)")
            print(f"{line}; 3 pointers + 3 ints {ptr:.2f} µs")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_FLAG:
        import json

        triton_side(json.loads(sys.argv[2]))
    else:
        main()
