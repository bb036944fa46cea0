"""Where the host time of one launch goes, on any machine (no GPU): the runtime's launch paths against a no-op driver and fake torch tensors, beside its floor.

Rows: `lib.add_kernel[(1,)](x, y, out, n)` and the issue's 4-pointer 2-scalar kernel on the C path
(with C-typed tensors built as torch builds its own, tests/runtime/fake_ctensor.c: the C path
reads those through their C functions, as it reads torch's; and with Python-class tensors), the
generated Python path, the generic path (keywords), a callable grid, the no-op `cu_launch` alone
and the tensor reads the launch cannot avoid. `--baseline-c FILE` adds the C rows of another
claunch.c (e.g. `git show HEAD:ttbuild/runtime/claunch.c > /tmp/old.c`), measured interleaved
with the current one. `--profile` adds cProfile's table of the generic path.
Descriptor rows (bench_descriptor.py's launch-cost case, here with no GPU): a kernel of 3 TMA
descriptors + 3 ints (matmul_hostdesc's parameters) given ttbuild TensorDescriptors and
Triton-shaped ones (a mutable dataclass: shape a tuple subclass as torch.Size, block_shape a
list, padding), against the same kernel's pointer form (3 pointers + 3 ints), on the C path and
that of `--baseline-c`.
Usage: python benchmarks/profile_launch.py [--baseline-c FILE] [--profile] [--desc-only]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


DTYPES: dict = {}


class NoopTMADriver(NoopDriver):
    """NoopDriver with the tensor-map seam (ttbuild.runtime.tensormap.TensorMapDriver): maps are
    encoded as 128 zero bytes into slots of a counter-addressed slab."""

    def __init__(self, c_address=None):
        super().__init__(c_address)
        self._next = 0x7F00_0000_0000

    def tensor_map_encode_tiled(self, *args):
        return bytes(128)

    def tensor_map_alloc(self, nbytes):
        self._next += nbytes + 0x1000
        return self._next

    def tensor_map_free(self, address):
        pass

    def tensor_map_upload(self, address, data):
        pass

    def tensor_map_synchronize(self):
        pass

    def tensor_map_device(self):
        return 0


def fake_torch():
    """(Python-class Tensor, C-typed Tensor or None) under a fake `torch` module whose current
    device and stream functions are C functions where the C fake compiles, as torch's are."""
    mod = types.ModuleType("torch")
    sys.modules.setdefault("torch", mod)

    class Dtype:
        def __init__(self, name="float32"):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    f32 = Dtype()
    DTYPES["float16"] = Dtype("float16")

    class Tensor:
        dtype = f32

        def __init__(self, ptr, dtype=f32):
            self.ptr = ptr
            self.dtype = dtype

        def data_ptr(self):
            return self.ptr

        def get_device(self):
            return 0

    Tensor.__module__ = "torch"
    mod._C = types.SimpleNamespace(_cuda_getDevice=lambda: 0, _cuda_getCurrentRawStream=lambda dev: 0x5000)
    from ttbuild.runtime import cext

    try:
        fake = cext.compile_module(source=Path(HERE).parent / "tests" / "runtime" / "fake_ctensor.c",
                                   name="ttbuild_fake_ctensor")
    except cext.CLauncherError:
        return Tensor, None
    mod._C = types.SimpleNamespace(_cuda_getDevice=fake.current_device, _cuda_getCurrentRawStream=fake.raw_stream)

    class CTensor(fake.TensorBase):
        def __init__(self, ptr, dtype=f32):
            super().__init__(ptr, dtype)

    CTensor.__name__ = "Tensor"
    CTensor.__module__ = "torch"
    return Tensor, CTensor


@dataclass
class TritonDescriptor:
    """triton.tools.tensor_descriptor.TensorDescriptor's fields (from_tensor gives a torch.Size
    shape, a stride() tuple and the block shape as passed)."""

    base: Any
    shape: list
    strides: list
    block_shape: list
    padding: str = "zero"


class Size(tuple):
    """torch.Size's part here: a tuple subclass."""


def kernel_doc(name, n_ptrs, scalars):
    params = ([{"name": f"p{i}", "kind": "pointer", "dtype": "fp32", "divisibility": 16} for i in range(n_ptrs)]
              + [{"name": f"s{i}", "kind": "scalar", "dtype": "i32", "divisibility": 1} for i in range(scalars)]
              + [{"name": "BLOCK_SIZE", "kind": "constexpr", "value": 1024}])
    return {"schema": rt.metadata.SCHEMA, "variant": f"{name}_fp32", "kernel": name, "entry": name,
            "cubin": f"{name}_fp32.cubin", "params": params,
            "signature": ",".join(["*fp32:16"] * n_ptrs + ["i32"] * scalars), "constexprs": {"BLOCK_SIZE": 1024},
            "num_warps": 4, "shared": 0, "target": "cuda:90", "arch": "sm_90a"}


def desc_docs():
    """matmul_hostdesc's parameters (3 fp16 TMA descriptors + M, N, K) and its pointer form."""
    blocks = {"a": [128, 64], "b": [64, 128], "c": [128, 128]}
    params, descs = [], []
    for n, blk in blocks.items():
        params += [{"name": f"{n}.tensormap", "kind": "scalar", "dtype": "u64", "divisibility": 1, "origin": n,
                    "part": "tensormap"},
                   {"name": n, "kind": "pointer", "dtype": "fp16", "divisibility": 16, "origin": n, "part": "base"},
                   {"name": f"{n}.shape0", "kind": "scalar", "dtype": "i32", "divisibility": 16, "origin": n, "part": "shape"},
                   {"name": f"{n}.shape1", "kind": "scalar", "dtype": "i32", "divisibility": 16, "origin": n, "part": "shape"},
                   {"name": f"{n}.stride0", "kind": "scalar", "dtype": "i64", "divisibility": 1, "origin": n,
                    "part": "stride"}]
        descs.append({"name": n, "dtype": "fp16", "block_shape": blk, "tma": {"swizzle": 128, "box": [blk[0], 64]}})
    ints = [{"name": x, "kind": "scalar", "dtype": "i32", "divisibility": 1} for x in "MNK"]
    common = {"schema": rt.metadata.SCHEMA, "num_warps": 4, "shared": 0, "target": "cuda:90", "arch": "sm_90a",
              "constexprs": {"GROUP_SIZE_M": 8}}
    gm = [{"name": "GROUP_SIZE_M", "kind": "constexpr", "value": 8}]
    desc = dict(common, variant="mm_desc_v", kernel="mm_desc", entry="mm_desc", cubin="mm_desc_v.cubin",
                params=params + ints + gm, descriptors=descs, signature=",".join(
                    [f"tensordesc<fp16{b}>:16" for b in blocks.values()] + ["i32"] * 3))
    ptr = dict(common, variant="mm_ptr_v", kernel="mm_ptr", entry="mm_ptr", cubin="mm_ptr_v.cubin",
               params=[{"name": n, "kind": "pointer", "dtype": "fp16", "divisibility": 16} for n in "abc"] + ints + gm,
               signature=",".join(["*fp16:16"] * 3 + ["i32"] * 3))
    return desc, ptr


def library(root, driver, c_module=None):
    """add_kernel (3 pointers, 1 int) and dwdb (4 pointers, 2 ints: the issue's case) on `driver`;
    `c_module`: the claunch module whose FastLaunch the kernels use (default: cext.load())."""
    os.makedirs(os.path.join(root, "lib"))
    for doc in (kernel_doc("add_kernel", 3, 1), kernel_doc("dwdb", 4, 2), *desc_docs()):
        with open(os.path.join(root, "lib", f"{doc['variant']}.json"), "w") as f:
            json.dump(doc, f)
        with open(os.path.join(root, "lib", doc["cubin"]), "wb") as f:
            f.write(b"\0")
    lib = rt.load(root, driver=driver)
    if c_module is not None:
        for k in (lib.add_kernel, lib.dwdb, lib.mm_ptr, lib.mm_desc.inner):
            k._ns = k._namespace()
            k._c_launch, k._c_address = c_module.FastLaunch, driver.c_launch_address
        lib.mm_desc._in_c = lambda fn, launch, k=lib.mm_desc: (  # the other module's DescExpand
            c_module.DescExpand(*k._c_plan, fn, launch, tensormaps=k._c_tensormaps))
    return lib


def per_call_us(fns, n=100_000, reps=7):
    """Best microseconds per call of each of `fns`, repetitions interleaved across them."""
    for fn in fns:
        for _ in range(1000):
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(reps):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t0) / n * 1e6)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-c", help="another claunch.c whose C rows run beside the current one's")
    ap.add_argument("--profile", action="store_true", help="cProfile the generic path")
    ap.add_argument("--desc-only", action="store_true", help="only the descriptor rows")
    args = ap.parse_args(argv)
    from ttbuild.runtime import cext

    PyTensor, CTensor = fake_torch()
    lib = library(tempfile.mkdtemp(), NoopTMADriver())
    k = lib.add_kernel
    module = cext.load()
    libc = library(tempfile.mkdtemp(), NoopTMADriver(module.noop_launch_address())) if module else None
    base = None
    if args.baseline_c and module:
        old = cext.compile_module(source=Path(args.baseline_c))
        base = library(tempfile.mkdtemp(), NoopTMADriver(old.noop_launch_address()), old)
    Tensor = CTensor or PyTensor
    x, y, out = Tensor(0x1000), Tensor(0x2000), Tensor(0x3000)
    h = [Tensor(0x1000 * (i + 1)) for i in range(4)]
    px, py, pout = PyTensor(0x1000), PyTensor(0x2000), PyTensor(0x3000)
    noop = NoopDriver().cu_launch
    kind = "C-typed" if CTensor else "Python-class"
    f16 = DTYPES["float16"]
    ta, tb, tc = Tensor(0x10000, f16), Tensor(0x20000, f16), Tensor(0x30000, f16)
    blocks = ((ta, [128, 64]), (tb, [64, 128]), (tc, [128, 128]))
    da, db, dc = (rt.TensorDescriptor(t, (512, 512), (512, 1), tuple(b)) for t, b in blocks)
    xa, xb, xc = (TritonDescriptor(t, Size((512, 512)), (512, 1), list(b)) for t, b in blocks)
    cases = []
    for name, lb in (("C path", libc), ("C path of --baseline-c", base)):
        if lb is None:
            continue
        md, mp = lb.mm_desc[(16,)], lb.mm_ptr[(16,)]
        cases += [
            (f"mm_desc[(16,)](3 ttbuild TensorDescriptors, 512, 512, 512)  ({name})",
             lambda md=md: md(da, db, dc, 512, 512, 512)),
            (f"mm_desc[(16,)](3 Triton-shaped descriptors, 512, 512, 512)  ({name})",
             lambda md=md: md(xa, xb, xc, 512, 512, 512)),
            (f"mm_ptr[(16,)](3 {kind} tensors, 512, 512, 512)  ({name})",
             lambda mp=mp: mp(ta, tb, tc, 512, 512, 512)),
        ]
        if args.desc_only:
            continue
        kc, dw = lb.add_kernel, lb.dwdb
        cases += [
            (f"dwdb[(1,)](4 {kind} tensors, 1, 1)  ({name}, no-op cuLaunchKernel)",
             lambda dw=dw: dw[(1,)](h[0], h[1], h[2], h[3], 1, 1)),
            (f"add_kernel[(1,)](x, y, out, 1)  ({name}, {kind} tensors)", lambda kc=kc: kc[(1,)](x, y, out, 1)),
            (f"add_kernel[(1,)](x, y, out, 1)  ({name}, Python-class tensors)",
             lambda kc=kc: kc[(1,)](px, py, pout, 1)),
        ]
    cases += [] if args.desc_only else [
        ("add_kernel[(1,)](x, y, out, 1)  (generated Python path)", lambda: k[(1,)](x, y, out, 1)),
        ("... by keyword (generic path)", lambda: k[(1,)](x, y, p2=out, s0=1)),
        ("... lambda grid", lambda: k[lambda m: (1,)](x, y, out, 1)),
        ("no-op cu_launch call alone", lambda: noop(7, 1, 1, 1, 128, 1, 1, 0, 0x5000, 123, 0)),
        (f"4 x (data_ptr(), dtype, get_device()) of {kind} tensors from Python",
         lambda: (h[0].data_ptr(), h[0].dtype, h[0].get_device(), h[1].data_ptr(), h[1].dtype, h[1].get_device(),
                  h[2].data_ptr(), h[2].dtype, h[2].get_device(), h[3].data_ptr(), h[3].dtype, h[3].get_device())),
    ]
    rows = list(zip([c[0] for c in cases], per_call_us([c[1] for c in cases])))
    print(f"host time per launch with a no-op driver, Python {sys.version.split()[0]}; launch path: {cext.status()}")
    print(table(["call", "us"], [(name, f"{us:.3f}") for name, us in rows]))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(lambda: [k[(1,)](x, y, p2=out, s0=1) for _ in range(50_000)])
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
