"""Stand-ins for the runtime's CPU tests: a recording driver (both launch seams), torch-like tensors under a fake `torch` module, metadata documents and library folders."""

from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import types
from pathlib import Path

from ttbuild.runtime.driver import CudaError
from ttbuild.runtime.metadata import SCHEMA


class RecordingDriver:
    """Records loads and launches and reads the packed parameter bytes back at launch time.

    raw=True also offers `cu_launch` (cuLaunchKernel's signature, returns (CUresult,)), the seam
    the generated launch path calls; `result` is what it returns (0 = success). c=True also
    offers the C launch path's seams (ttbuild.runtime.cext): a C-callable cuLaunchKernel (a
    ctypes callback recording with path "c"), raw function handles and check_code. `fast` names
    the path a launch after the first one takes.
    """

    def __init__(self, capability=(9, 0), ctx=1, raw=True, version=13000, c=False):
        self.capability = capability
        self.ctx = ctx
        self.loads = []
        self.launches = []
        self.waits = []
        self.result = 0
        self.version = version
        self.contexts = []
        self.cu_success = 0
        if raw:
            self.cu_launch = self._cu_launch
        self.fast = "c" if c else "cu_launch" if raw else "launch"
        if c:
            self._functions: list = []
            vp, u32 = ctypes.c_void_p, ctypes.c_uint
            proto = ctypes.CFUNCTYPE(ctypes.c_int, vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp)
            self._c_callback = proto(self._c_launch)  # kept alive as long as the driver
            self.c_launch_address = ctypes.cast(self._c_callback, vp).value

    def function_address(self, fn):
        if fn not in self._functions:
            self._functions.append(fn)
        return self._functions.index(fn) + 1

    def check_code(self, call, err, detail=""):
        self.check(call, (err,), detail)

    def _c_launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        function = self._functions[fn - 1]
        self._record(function, (gx, gy, gz), bx, shared, stream or 0, params, self.n_params(function), "c")
        return self.result

    def context(self, device_hint):
        self.contexts.append(device_hint)
        ctx = self.ctx if device_hint is None else (self.ctx, device_hint)
        return ctx, self.capability

    def load_function(self, image, entry, shared):
        self.loads.append((self.ctx, image, entry, shared))
        return ("fn", entry, self.ctx)

    def _record(self, function, grid, block_x, shared, stream, params_address, n, path):
        ptrs = (ctypes.c_void_p * n).from_address(params_address)
        raw = [ctypes.string_at(ptrs[i], 8) for i in range(n)]
        self.launches.append(dict(function=function, grid=grid, block_x=block_x, shared=shared,
                                  stream=stream, raw=raw, path=path))

    def launch(self, function, grid, block_x, shared, stream, params_address, values):
        self._record(function, grid, block_x, shared, stream, params_address, len(values), "launch")

    def _cu_launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        n = self.n_params(fn)
        self._record(fn, (gx, gy, gz), bx, shared, stream, params, n, "cu_launch")
        return (self.result,)

    def n_params(self, fn):
        return self.params_of[fn[1]]

    def check(self, call, result, detail=""):
        if result[0] != 0:
            raise CudaError(call, f"CUDA_ERROR_{result[0]}", detail)

    def stream_wait(self, stream, producer):
        self.waits.append((stream, producer))

    def driver_version(self):
        return self.version


class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


DTYPES = {name: Dtype(f"torch.{name}") for name in ("float32", "float16", "bfloat16", "int32", "float64")}


def c_tensor_base():
    """fake_ctensor.c's TensorBase (torch._C.TensorBase's shape: C methods and a getset dtype),
    compiled once per machine like the C launch path; None where that cannot be done."""
    from ttbuild.runtime import cext

    if cext.load() is None:
        return None
    return cext.compile_module(source=Path(__file__).with_name("fake_ctensor.c"), name="ttbuild_fake_ctensor").TensorBase


class FakeTorch:
    """Installs a fake `torch` module: `Tensor` (its __module__ is "torch"), a current device,
    a raw current stream per device, and `cuda.device(d)` that switches the current device.
    `c_tensor`: Tensor is a Python subclass of c_tensor_base(), as torch.Tensor is of
    torch._C.TensorBase (same constructor, `ptr` and `dev`); else a plain Python class."""

    def __init__(self, monkeypatch, device=0, c_tensor=False):
        self.device = device
        self.stream_calls = []
        mod = types.ModuleType("torch")
        fake = self

        def raw_stream(dev):
            fake.stream_calls.append(dev)
            return 0x5000 + dev

        class device_guard:
            def __init__(self, d):
                self.d = d

            def __enter__(self):
                self.prev, fake.device = fake.device, self.d

            def __exit__(self, *exc):
                fake.device = self.prev

        mod._C = types.SimpleNamespace(_cuda_getDevice=lambda: fake.device,
                                       _cuda_getCurrentRawStream=raw_stream)
        mod.cuda = types.SimpleNamespace(device=device_guard)

        if c_tensor:
            class Tensor(c_tensor_base()):
                def __init__(self, ptr, dtype="float32", device=0):
                    super().__init__(ptr, DTYPES[dtype], device)
        else:
            class Tensor:
                def __init__(self, ptr, dtype="float32", device=0):
                    self.ptr = ptr
                    self.dtype = DTYPES[dtype]
                    self.dev = device

                def data_ptr(self):
                    return self.ptr

                def get_device(self):
                    return self.dev

        Tensor.__module__ = "torch"
        mod.Tensor = self.Tensor = Tensor
        monkeypatch.setitem(sys.modules, "torch", mod)


def add_params(dt, div=16):
    return ([{"name": n, "kind": "pointer", "dtype": dt, "divisibility": div}
             for n in ("x_ptr", "y_ptr", "output_ptr")]
            + [{"name": "n_elements", "kind": "scalar", "dtype": "i32", "divisibility": 1},
               {"name": "BLOCK_SIZE", "kind": "constexpr", "value": 1024}])


def desc_entries(name, dtype, block, div=1, tensormap=False):
    """The metadata `params` entries of a tensordesc<dtype[block]> parameter (the kernel ABI,
    docs/CONTRACTS.md "Kernel ABI"): its map's address first with `tensormap`, base, shapes, strides."""
    def entry(n, kind, dt, d, part):
        return {"name": n, "kind": kind, "dtype": dt, "divisibility": d, "origin": name, "part": part}
    return ([entry(f"{name}.tensormap", "scalar", "u64", 1, "tensormap")] if tensormap else []) + \
        [entry(name, "pointer", dtype, 16, "base")] + \
        [entry(f"{name}.shape{i}", "scalar", "i32", div, "shape") for i in range(len(block))] + \
        [entry(f"{name}.stride{i}", "scalar", "i64", 1, "stride") for i in range(len(block) - 1)]


def meta(variant, kernel, params, num_warps=4, shared=0, target="cuda:90", arch="sm_90a", **extra):
    sig = ",".join(f"*{p['dtype']}:{p['divisibility']}" if p["kind"] == "pointer" else p["dtype"]
                   for p in params if p["kind"] != "constexpr")
    doc = {
        "schema": SCHEMA, "variant": variant, "kernel": kernel, "entry": kernel,
        "cubin": f"{variant}.cubin", "params": params, "signature": sig,
        "constexprs": {p["name"]: p["value"] for p in params if p["kind"] == "constexpr"},
        "num_warps": num_warps, "num_ctas": 1, "num_stages": 3, "shared": shared,
        "target": target, "arch": arch,
        "hashes": {s: "0" * 16 for s in ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")},
        "ttbuild_version": "0.1.0",
    }
    doc.update(extra)
    return doc


def write_lib(root, docs, extra_files=()):
    """root/lib/<variant>.json + a fake cubin per document (+ `extra_files` name -> bytes)."""
    lib = root / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    for name, data in dict(extra_files).items():
        (lib / name).write_bytes(data)
    for d in docs:
        cubin = b"CUBIN:" + d["variant"].encode()
        (lib / d["cubin"]).write_bytes(cubin)
        # the runtime checks every image against the sha256 the metadata records, as a build writes it
        d = dict(d, cubin_sha256=hashlib.sha256(cubin).hexdigest())
        if isinstance(d.get("images"), list):
            d["images"] = [dict(img, sha256=hashlib.sha256((lib / img["file"]).read_bytes()).hexdigest())
                           if isinstance(img, dict) and "sha256" not in img and isinstance(img.get("file"), str)
                           and (lib / img["file"]).is_file() else img for img in d["images"]]
        (lib / f"{d['variant']}.json").write_text(json.dumps(d))
    return root


def attach(lib, drv):
    """Teach a RecordingDriver how many parameters each kernel entry of `lib` has."""
    drv.params_of = {v.entry: len(v.launch_params) for v in lib.variants}
    return lib
