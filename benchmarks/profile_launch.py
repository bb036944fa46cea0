"""Where the host time of one launch goes, on any machine (no GPU): the runtime's Python path against a no-op driver and fake torch tensors, beside its floor.

Rows: a whole `lib.add_kernel[(1,)](x, y, out, n)` (generated path), the same by keyword (the
generic path), a callable grid, the no-op `cu_launch` alone and the tensor reads the launch
cannot avoid (data_ptr, dtype, get_device of 3 tensors). `--profile` adds cProfile's table of
the generic path. Usage: python benchmarks/profile_launch.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _common import table  # noqa: E402

import ttbuild.runtime as rt  # noqa: E402


class NoopDriver:
    """Answers like CudaDriver with the same launch seams, launching nothing. `c_address`: a C
    cuLaunchKernel stand-in (claunch's no-op) for the C launch path; None keeps the Python one."""

    cu_success = 0

    def __init__(self, c_address=None):
        self.cu_launch = lambda *a: (0,)
        self.c_launch_address = c_address

    def function_address(self, fn):
        return fn

    def check_code(self, call, err, detail=""):
        raise RuntimeError(f"{call} failed: {err}")

    def context(self, hint):
        return 1, (9, 0)

    def load_function(self, image, entry, shared):
        return 7

    def launch(self, fn, grid, block_x, shared, stream, params_address, values):
        pass


def fake_torch():
    mod = types.ModuleType("torch")
    mod._C = types.SimpleNamespace(_cuda_getDevice=lambda: 0, _cuda_getCurrentRawStream=lambda dev: 0x5000)
    sys.modules.setdefault("torch", mod)

    class Dtype:
        def __str__(self):
            return "torch.float32"

    f32 = Dtype()

    class Tensor:
        dtype = f32

        def __init__(self, ptr):
            self.ptr = ptr

        def data_ptr(self):
            return self.ptr

        def get_device(self):
            return 0

    Tensor.__module__ = "torch"
    return Tensor


def library(root, driver):
    params = ([{"name": n, "kind": "pointer", "dtype": "fp32", "divisibility": 16}
               for n in ("x_ptr", "y_ptr", "output_ptr")]
              + [{"name": "n_elements", "kind": "scalar", "dtype": "i32", "divisibility": 1},
                 {"name": "BLOCK_SIZE", "kind": "constexpr", "value": 1024}])
    doc = {"schema": "ttbuild.kernel/1", "variant": "add_kernel_fp32", "kernel": "add_kernel",
           "entry": "add_kernel", "cubin": "add_kernel_fp32.cubin", "params": params,
           "signature": "*fp32:16,*fp32:16,*fp32:16,i32", "constexprs": {"BLOCK_SIZE": 1024},
           "num_warps": 4, "shared": 0, "target": "cuda:90", "arch": "sm_90a"}
    os.makedirs(os.path.join(root, "lib"))
    with open(os.path.join(root, "lib", "add_kernel_fp32.json"), "w") as f:
        json.dump(doc, f)
    with open(os.path.join(root, "lib", "add_kernel_fp32.cubin"), "wb") as f:
        f.write(b"\0")
    return rt.load(root, driver=driver)


def per_call_us(fn, n=100_000, reps=5):
    for _ in range(1000):
        fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="cProfile the generic path")
    args = ap.parse_args(argv)
    from ttbuild.runtime import cext

    Tensor = fake_torch()
    k = library(tempfile.mkdtemp(), NoopDriver()).add_kernel
    module = cext.load()
    kc = library(tempfile.mkdtemp(), NoopDriver(module.noop_launch_address())).add_kernel if module else None
    x, y, out = Tensor(0x1000), Tensor(0x2000), Tensor(0x3000)
    noop = NoopDriver().cu_launch
    rows = []
    if kc is not None:
        rows.append(("lib.add_kernel[(1,)](x, y, out, 1)  (C path, no-op cuLaunchKernel)",
                     per_call_us(lambda: kc[(1,)](x, y, out, 1))))
    rows += [
        ("lib.add_kernel[(1,)](x, y, out, 1)  (generated Python path)", per_call_us(lambda: k[(1,)](x, y, out, 1))),
        ("... by keyword (generic path)", per_call_us(lambda: k[(1,)](x, y, output_ptr=out, n_elements=1))),
        ("... lambda grid", per_call_us(lambda: k[lambda m: (1,)](x, y, out, 1))),
        ("no-op cu_launch call alone", per_call_us(lambda: noop(7, 1, 1, 1, 128, 1, 1, 0, 0x5000, 123, 0))),
        ("3 x (data_ptr(), dtype, get_device()) alone",
         per_call_us(lambda: (x.data_ptr(), x.dtype, x.get_device(), y.data_ptr(), y.dtype, y.get_device(),
                              out.data_ptr(), out.dtype, out.get_device()))),
    ]
    print(f"host time per launch with a no-op driver, Python {sys.version.split()[0]}; launch path: {cext.status()}")
    print(table(["call", "us"], [(name, f"{us:.3f}") for name, us in rows]))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(lambda: [k[(1,)](x, y, output_ptr=out, n_elements=1) for _ in range(50_000)])
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
