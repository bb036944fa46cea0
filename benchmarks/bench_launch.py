"""Host time per launch of a tiny kernel (add_kernel, n = 1, one program): ttbuild vs Triton `kernel[grid]` vs torch.add vs raw cuLaunchKernel.

"x raw" divides by the fastest raw cuLaunchKernel row of add_kernel (parameters packed once,
outside the loop); the 4-pointer 2-scalar kernel (the issue's case) is also divided by a raw
launch of itself. Rows: the default launch (the C path, ttbuild.runtime.cext, where a C compiler
is present), the generated Python path (a driver without the C seam), the generic path, Triton,
torch.add and the raw launches.

Each figure is the median over repetitions of (wall time of N back-to-back launches) / N, with a
synchronize between repetitions (outside the timed region); the rows are measured round-robin
(repetition r of every row, then r + 1), so drift of the host or the GPU over the run falls on all
rows alike instead of on whichever ran first. Also the first launch in a fresh
process (import ttbuild.runtime + load + launch + synchronize, torch already imported).
`--before FILE` adds the issue's rows launched as the last commit launched them: through its
claunch.c (`git show HEAD:ttbuild/runtime/claunch.c > old.c`) and the previous `kernel[grid]`
lookup, in the same round-robin, for before/after figures from one run; `--variant FILE`
(repeatable) the same rows through another claunch.c with the current lookup.
`--parts` adds rows for the pieces of the launcher's own cost with real torch tensors: the
`kernel[grid]` lookup, the bound callable alone (no-op cuLaunchKernel), the twelve tensor reads
and the current device and stream, each from Python.
Usage: python benchmarks/bench_launch.py [--artifacts artifacts] [--before FILE] [--variant FILE]... [--parts]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import have_triton, table  # noqa: E402

if have_triton():
    from bench_vector_add import add_kernel as triton_add_kernel  # noqa: E402


def round_robin(fns, n=2000, reps=21):
    """Median microseconds per launch of each of `fns`, repetitions interleaved across them."""
    import torch

    for fn in fns:
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(reps):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            times[k].append((t1 - t0) / n * 1e6)
    return [statistics.median(t) for t in times]


FIRST_LAUNCH = r"""
import sys, time, torch
x = torch.rand(1024, device="cuda"); torch.cuda.synchronize()
t0 = time.perf_counter()
import ttbuild.runtime as rt
lib = rt.load(sys.argv[1])
lib.add_kernel[(1,)](x, x, x, 1024)
torch.cuda.synchronize()
print(f"{time.perf_counter() - t0:.4f}")
"""


def other_c_kernel(lib, name, module, address, before=False):
    """lib's kernel `name` launched through `module` (another build of claunch.c); `before`: with
    the `kernel[grid]` lookup as it was before it answered a bound grid in its own frame."""
    import ttbuild.runtime as rt

    class Before(rt.Launcher):
        def __getitem__(self, grid):
            if not self._runtime_first:
                return self._triton_call(grid)
            return self.runtime_call(grid)

    k = getattr(lib, name)
    if before:
        k.__class__ = Before
    k._ns = k._namespace()
    k._c_launch, k._c_address = module.FastLaunch, address
    return k


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifacts", default=os.environ.get("TTBUILD_ARTIFACTS", "artifacts"))
    ap.add_argument("--before", help="the last commit's claunch.c: the issue's rows as it launched them")
    ap.add_argument("--variant", action="append", default=[],
                    help="another claunch.c whose launches of the issue's kernel run beside ours (repeatable)")
    ap.add_argument("--parts", action="store_true", help="time the pieces of the launcher's own cost")
    args = ap.parse_args(argv)

    import torch
    from cuda.bindings import driver as cu

    import ttbuild.runtime as rt
    from ttbuild.runtime import cext

    class PythonPathDriver(rt.CudaDriver):
        """The same driver without the C launch path's seam: launches take the generated Python path."""

        c_launch_address = None

    class NoopLaunchDriver(rt.CudaDriver):
        """The C path with a cuLaunchKernel that launches nothing: the launcher's own host cost."""

        @property
        def c_launch_address(self):
            module = cext.load()
            return module.noop_launch_address() if module is not None else None

    x = torch.rand(16, device="cuda")
    y = torch.rand(16, device="cuda")
    out = torch.empty_like(x)
    drv = rt.CudaDriver()
    lib = rt.load(args.artifacts, driver=drv)
    k = lib.add_kernel
    ax = lib.axpy_kernel
    # The case: a tiny kernel with 4 pointers and 2 scalars (layer norm's dw/db reduction
    # over a 1 x 1 partial-sum tile: one program reads one element of each input).
    h = [torch.rand(16, device="cuda", dtype=torch.float16) for _ in range(4)]
    dwdb = lib._layer_norm_bwd_dwdb
    k_py = rt.load(args.artifacts, driver=PythonPathDriver()).add_kernel
    dwdb_noop = rt.load(args.artifacts, driver=NoopLaunchDriver())._layer_norm_bwd_dwdb
    k[(1,)](x, y, out, 1)  # load the cubin: the raw rows launch its function

    # Raw launches of our add_kernel_fp32 cubin with parameters packed once, outside the loop.
    comp = k._compiled[k.select(x, y, out, 1).variant]
    ctx, _ = drv.context(torch.cuda.current_device())
    fn = comp.functions[ctx]
    buf, addr, _keep = comp.new_slot()
    comp.packer.pack_into(buf, 0, x.data_ptr(), y.data_ptr(), out.data_ptr(), 1)
    stream = torch.cuda.current_stream().cuda_stream
    launch = cu.cuLaunchKernel
    libcuda = ctypes.CDLL("libcuda.so.1")
    c_launch = libcuda.cuLaunchKernel
    u32, vp = ctypes.c_uint, ctypes.c_void_p
    c_launch.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp]
    raw_fn = int(fn)
    # The same for the 4-pointer 2-scalar kernel: the case, against its own raw launch.
    comp4 = dwdb._compiled[dwdb.select(*h, 1, 1).variant]
    dwdb[(1,)](*h, 1, 1)
    fn4 = comp4.functions[ctx]
    buf4, addr4, _keep4 = comp4.new_slot()
    comp4.packer.pack_into(buf4, 0, *[t.data_ptr() for t in h], 1, 1)

    cases = [
        ("ttbuild lib.add_kernel[(1,)](x, y, out, 1)", lambda: k[(1,)](x, y, out, 1)),
        ("ttbuild lib.add_kernel[lambda meta: (1,)](...)  (callable grid)", lambda: k[lambda m: (1,)](x, y, out, 1)),
        ("ttbuild lib.axpy_kernel[(1,)](x, y, out, 2.0, 1)  (3 pointers, 2 scalars)",
         lambda: ax[(1,)](x, y, out, 2.0, 1)),
        ("ttbuild lib._layer_norm_bwd_dwdb[(1,)](4 fp16 tensors, 1, 1)  (4 pointers, 2 scalars)",
         lambda: dwdb[(1,)](h[0], h[1], h[2], h[3], 1, 1)),
        ("ttbuild lib.add_kernel[(1,)](x, y, out, 1) on the generated Python path",
         lambda: k_py[(1,)](x, y, out, 1)),
        ("ttbuild _layer_norm_bwd_dwdb[(1,)](...) through a no-op cuLaunchKernel (launcher cost alone)",
         lambda: dwdb_noop[(1,)](h[0], h[1], h[2], h[3], 1, 1)),
        ("ttbuild ... by keyword (the generic path)", lambda: k[(1,)](x, y, output_ptr=out, n_elements=1)),
    ]
    others = [(f"before ({os.path.basename(args.before)})", args.before)] if args.before else []
    others += [(os.path.basename(path), path) for path in args.variant]
    for name, path in others:
        from pathlib import Path

        old = cext.compile_module(source=Path(path))
        before = path == args.before
        dwdb_old = other_c_kernel(rt.load(args.artifacts, driver=rt.CudaDriver()), "_layer_norm_bwd_dwdb", old,
                                  drv.c_launch_address, before)
        dwdb_old_noop = other_c_kernel(rt.load(args.artifacts, driver=rt.CudaDriver()), "_layer_norm_bwd_dwdb",
                                       old, old.noop_launch_address(), before)
        cases += [
            (f"{name}: _layer_norm_bwd_dwdb[(1,)](4 fp16 tensors, 1, 1)",
             lambda k=dwdb_old: k[(1,)](h[0], h[1], h[2], h[3], 1, 1)),
            (f"{name}: _layer_norm_bwd_dwdb[(1,)](...) through a no-op cuLaunchKernel",
             lambda k=dwdb_old_noop: k[(1,)](h[0], h[1], h[2], h[3], 1, 1)),
        ]
    if args.parts:
        bound_noop = dwdb_noop[(1,)]
        get_dev, raw_stream = torch._C._cuda_getDevice, torch._C._cuda_getCurrentRawStream
        cases += [
            ("part: dwdb_noop[(1,)] (the kernel[grid] lookup)", lambda: dwdb_noop[(1,)]),
            ("part: f(4 tensors, 1, 1), f = dwdb_noop[(1,)] (no-op cuLaunchKernel)",
             lambda: bound_noop(h[0], h[1], h[2], h[3], 1, 1)),
            ("part: 4 x (t.get_device(), t.data_ptr(), t.dtype) from Python",
             lambda: (h[0].get_device(), h[0].data_ptr(), h[0].dtype, h[1].get_device(), h[1].data_ptr(),
                      h[1].dtype, h[2].get_device(), h[2].data_ptr(), h[2].dtype, h[3].get_device(),
                      h[3].data_ptr(), h[3].dtype)),
            ("part: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())",
             lambda: raw_stream(get_dev())),
            ("part: an empty lambda", lambda: None),
        ]
    if have_triton():
        cases.append(("triton add_kernel[grid](..., BLOCK_SIZE=1024)",
                      lambda: triton_add_kernel[(1,)](x, y, out, 1, BLOCK_SIZE=1024)))
    cases += [
        ("torch.add(x, y, out=out)", lambda: torch.add(x, y, out=out)),
        ("raw cuLaunchKernel (cuda.bindings, int stream, pre-packed)",
         lambda: launch(fn, 1, 1, 1, comp.block_x, 1, 1, 0, stream, addr, 0)),
        ("raw cuLaunchKernel (ctypes)",
         lambda: c_launch(raw_fn, 1, 1, 1, comp.block_x, 1, 1, 0, stream, addr, None)),
        ("raw cuLaunchKernel of the 4-pointer 2-scalar kernel (cuda.bindings, pre-packed)",
         lambda: launch(fn4, 1, 1, 1, comp4.block_x, 1, 1, comp4.shared_of[ctx], stream, addr4, 0)),
    ]
    times = round_robin([f for _, f in cases])
    rows = [(name, us) for (name, _), us in zip(cases, times)]
    us_of = dict(rows)
    ours = us_of["ttbuild lib.add_kernel[(1,)](x, y, out, 1)"]
    ours_axpy = us_of["ttbuild lib.axpy_kernel[(1,)](x, y, out, 2.0, 1)  (3 pointers, 2 scalars)"]
    ours_4p2s = us_of["ttbuild lib._layer_norm_bwd_dwdb[(1,)](4 fp16 tensors, 1, 1)  (4 pointers, 2 scalars)"]
    raw = us_of["raw cuLaunchKernel (cuda.bindings, int stream, pre-packed)"]
    raw_ctypes = us_of["raw cuLaunchKernel (ctypes)"]
    raw_4p2s = us_of["raw cuLaunchKernel of the 4-pointer 2-scalar kernel (cuda.bindings, pre-packed)"]
    torch.cuda.synchronize()
    ok = torch.allclose(out[:1], x[:1] + y[:1])

    first = []
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", FIRST_LAUNCH, args.artifacts], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE)))
        first.append(p.stdout.strip() or p.stderr.strip()[-300:])

    print(f"\nhost time per launch, tiny kernel, {torch.cuda.get_device_name()} (result ok: {ok}); "
          f"launch path: {cext.status()}")
    best_raw = min(raw, raw_ctypes)
    print(table(["launch", "us/launch", "x raw"], [(name, f"{us:.2f}", f"{us / best_raw:.2f}") for name, us in rows]))
    module = cext.load()
    if module is not None:
        print(f"torch.Tensor read through its C functions (get_device, data_ptr, dtype): "
              f"{module.direct_reads(torch.Tensor)}")
    for name, _ in others:
        old_4p2s = us_of[f"{name}: _layer_norm_bwd_dwdb[(1,)](4 fp16 tensors, 1, 1)"]
        print(f"{name}: 4 pointers + 2 scalars / its own raw cuLaunchKernel {old_4p2s / raw_4p2s:.2f}x")
    print(f"ttbuild / fastest raw cuLaunchKernel: add_kernel {ours / best_raw:.2f}x, "
          f"axpy_kernel {ours_axpy / best_raw:.2f}x, 4 pointers + 2 scalars {ours_4p2s / best_raw:.2f}x; "
          f"4 pointers + 2 scalars / its own raw cuLaunchKernel {ours_4p2s / raw_4p2s:.2f}x (goal <= 1.2x)")
    print(f"first launch in a fresh process (import ttbuild.runtime + load + launch + sync), s: "
          f"{', '.join(first)}")


if __name__ == "__main__":
    main()
