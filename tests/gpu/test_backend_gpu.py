"""Backend cubins run correctly on a GPU: add / axpy (fp32, fp16) against numpy, sizes off the block.

Cubins come from `cubins/<name>.cubin` of the test artifacts (`$TTBUILD_TEST_ARTIFACTS`, else
./build/test-artifacts when present; the GPU machine has no MLIR wheels: write them on a CPU machine
with `python tests/gpu/build_test_artifacts.py DIR`), else are built in-process.
Only cuda.bindings and numpy are needed on the GPU side.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

# name: (ttir file, kernel, num_warps, BLOCK_SIZE, dtype, has scalar a)
KERNELS = {
    "add_fp32": ("add_kernel.ttir", "add_kernel", 4, 1024, "float32", False),
    "add_fp32_w8": ("add_kernel.ttir", "add_kernel", 8, 1024, "float32", False),
    "add_fp16": ("add_kernel_fp16.ttir", "add_kernel", 4, 1024, "float16", False),
    "axpy_fp32": ("axpy_kernel.ttir", "axpy_kernel", 4, 1024, "float32", True),
    "axpy_fp16": ("axpy_kernel_fp16.ttir", "axpy_kernel_fp16", 8, 2048, "float16", True),
    "ops_fp32": ("ops_kernel.ttir", "ops_kernel", 4, 1024, "float32", False),
}


def reference(name, x, y, a):
    """numpy semantics of each kernel, computed in f32 then rounded to the output dtype."""
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    if name.startswith("axpy"):
        return np.float32(a) * xf + yf
    if name.startswith("ops"):
        sel = np.where(xf > yf, np.exp(xf), np.sqrt(np.abs(yf)))
        i = np.trunc(xf * np.float32(8)).astype(np.int32)
        k = np.fmod(i * 3 + 7, 5).astype(np.float32)  # remsi truncates, like C's %
        return sel + np.maximum(xf, yf) + k
    return xf + yf


def build_cubin(name: str) -> bytes:
    sys.path.insert(0, str(Path(__file__).parents[1] / "backend"))
    from test_backend import build
    f, _, w, *_ = KERNELS[name]
    return build(f, w)["cubin"]


def _cuda():
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    err, = cu.cuInit(0)
    if err != cu.CUresult.CUDA_SUCCESS:
        return None
    err, n = cu.cuDeviceGetCount()
    return cu if err == cu.CUresult.CUDA_SUCCESS and n > 0 else None


def _check(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    assert int(err) == 0, err
    return rest[0] if len(rest) == 1 else rest


@pytest.fixture(scope="module")
def cuda():
    cu = _cuda()
    if cu is None:
        pytest.skip("no CUDA GPU")
    dev = _check(cu.cuDeviceGet(0))
    ctx = _check(cu.cuDevicePrimaryCtxRetain(dev))
    _check(cu.cuCtxSetCurrent(ctx))
    yield cu
    cu.cuDevicePrimaryCtxRelease(dev)


def _load(cu, name):
    d = os.environ.get("TTBUILD_TEST_ARTIFACTS") or Path(__file__).parents[2] / "build" / "test-artifacts"
    f = Path(d, "cubins", f"{name}.cubin")
    image = f.read_bytes() if f.is_file() else build_cubin(name)
    mod = _check(cu.cuModuleLoadData(image))
    return _check(cu.cuModuleGetFunction(mod, KERNELS[name][1].encode()))


def _launch(cu, fn, grid, block, args):
    import ctypes
    holders = [ctypes.c_uint64(a) if kind == "p" else ctypes.c_int32(a) if kind == "i"
               else ctypes.c_float(a) for kind, a in args]
    ptrs = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    _check(cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, 0, ctypes.addressof(ptrs), 0))
    _check(cu.cuCtxSynchronize())


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("n", [1, 1000, 4096, 3 * 2048 + 37, 1 << 20])
def test_kernel_matches_numpy(cuda, name, n):
    cu = cuda
    _, _, w, block, dtype, scalar = KERNELS[name]
    if name == "axpy_fp16" and n % 16:
        pytest.skip("variant compiled for n % 16 == 0 (tt.divisibility = 16 on n)")
    fn = _load(cu, name)
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    a = 1.5
    nbytes = x.nbytes
    dx, dy, do = (_check(cu.cuMemAlloc(nbytes + 64)) for _ in range(3))
    try:
        _check(cu.cuMemcpyHtoD(dx, x.ctypes.data, nbytes))
        _check(cu.cuMemcpyHtoD(dy, y.ctypes.data, nbytes))
        _check(cu.cuMemsetD8(do, 0xFF, nbytes + 64))  # poison, and a guard band past the end
        args = [("p", int(dx)), ("p", int(dy)), ("p", int(do))]
        args += [("f", a)] if scalar else []
        args += [("i", n)]
        _launch(cu, fn, (n + block - 1) // block, 32 * w, args)
        out = np.empty(n + 64 // x.itemsize, dtype)
        _check(cu.cuMemcpyDtoH(out.ctypes.data, do, nbytes + 64))
    finally:
        for p in (dx, dy, do):
            cu.cuMemFree(p)
    ref = reference(name, x, y, a)
    tol = 1e-2 if dtype == "float16" else 2e-6 if name.startswith("ops") else 1e-6
    np.testing.assert_allclose(out[:n].astype(np.float32), ref.astype(dtype).astype(np.float32),
                               rtol=tol, atol=tol)
    assert (out[n:].view(np.uint8) == 0xFF).all(), "wrote past the end"

