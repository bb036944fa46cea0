"""Debug ops on a real GPU: device_print's lines (ours equal the expected ones, and Triton's for the same kernel) and device_assert failing the launch with CUDA_ERROR_ASSERT and its file:line message, or passing silently.

Each launch runs in a subprocess: the CUDA driver writes printf output to the process's stdout, and
a failed assert leaves the context unusable. The debug cubins come from
$TTBUILD_TEST_ARTIFACTS/debug (tests/gpu/build_test_artifacts.py), else are built here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "data" / "gpu_kernels" / "debug_ops.py"
BLOCK = 128
CUDA_ERROR_ASSERT = 710

# Launches one cubin kernel: argv = cubin, entry, grid, threads, JSON [[kind, value], ...].
DRIVER = r"""
import ctypes, json, sys
from cuda.bindings import driver as cu

def ok(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        sys.stdout.flush()
        print(f"CUDA_ERROR {int(err)}", file=sys.stderr, flush=True)
        sys.exit(3)
    return rest[0] if len(rest) == 1 else rest

cubin, entry, grid, threads, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
ok(cu.cuInit(0))
dev = ok(cu.cuDeviceGet(0))
ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(dev))))
fn = ok(cu.cuModuleGetFunction(ok(cu.cuModuleLoadData(open(cubin, "rb").read())), entry.encode()))
holders = []
for kind, val in args:
    if kind in ("i32[]", "f32[]"):
        arr = ((ctypes.c_int32 if kind == "i32[]" else ctypes.c_float) * len(val))(*val)
        p = ok(cu.cuMemAlloc(ctypes.sizeof(arr)))
        ok(cu.cuMemcpyHtoD(p, ctypes.addressof(arr), ctypes.sizeof(arr)))
        holders.append(ctypes.c_uint64(int(p)))
    else:
        holders.append(ctypes.c_int32(val))
ptrs = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
ok(cu.cuLaunchKernel(fn, grid, 1, 1, threads, 1, 1, 0, 0, ctypes.addressof(ptrs), 0))
ok(cu.cuCtxSynchronize())
print("LAUNCH_OK", file=sys.stderr, flush=True)
"""

# The same kernel through Triton's own JIT (print needs no debug flag there).
TRITON_DRIVER = r"""
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("debug_ops", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
x, f, n, grid = json.loads(sys.argv[2])
x = torch.tensor(x, dtype=torch.int32, device="cuda"); f = torch.tensor(f, dtype=torch.float32, device="cuda")
m.print_kernel[(grid,)](x, f, n, BLOCK=128, num_warps=4)
torch.cuda.synchronize()
"""


def _cubin(name: str, tmp_path: Path) -> Path:
    d = os.environ.get("TTBUILD_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts"
    f = Path(d, "debug", f"{name}.cubin")
    if f.is_file():
        return f
    pytest.importorskip("mlir", reason=f"no {f} and no compiler here (run tests/gpu/build_test_artifacts.py)")
    sys.path.insert(0, str(REPO / "tests" / "backend" / "llir"))
    from test_backend_debug import build_debug
    f = tmp_path / f"{name}.cubin"
    f.write_bytes(build_debug(name)["cubin"])
    return f


def _launch(cubin: Path, entry: str, grid: int, args: list) -> subprocess.CompletedProcess:
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        pytest.skip("cuda.bindings is not installed")
    err, = cu.cuInit(0)
    if int(err) != 0 or int(cu.cuDeviceGetCount()[1]) == 0:
        pytest.skip("no CUDA GPU")
    return subprocess.run([sys.executable, "-c", DRIVER, str(cubin), entry, str(grid), str(32 * 4), json.dumps(args)],
                          capture_output=True, text=True, timeout=120)


def _inputs(n: int):
    rng = np.random.default_rng(n)
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    f = rng.standard_normal(n).astype(np.float32)
    return x, f


def _expected_print_lines(x, f) -> Counter:
    """vprintf output of print_kernel per Triton's format: one line per element a thread holds
    (one each at 128 elements over 128 threads), the scalar once per thread."""
    lines = []
    n = len(x)
    for i in range(n):
        pid, j = divmod(i, BLOCK)
        head = f"pid ({pid}, 0, 0) idx ({j:3d})"
        lines += [f"{head} x: {x[i]}", f"{head} pair: (operand 0) {x[i]}",
                  f"{head} pair: (operand 1) {float(f[i]):f}", f"{head} hx: 0x{int(x[i]) & 0xFFFFFFFF:08x}"]
    for pid in range(n // BLOCK):
        lines += [f"pid ({pid}, 0, 0) idx () n: {n}"] * BLOCK
    return Counter(lines)


def test_device_print_lines(tmp_path):
    n = 2 * BLOCK
    x, f = _inputs(n)
    proc = _launch(_cubin("print_kernel", tmp_path), "print_kernel", n // BLOCK,
                   [["i32[]", x.tolist()], ["f32[]", f.tolist()], ["i32", n]])
    assert proc.returncode == 0 and "LAUNCH_OK" in proc.stderr, proc.stderr[-2000:]
    ours = Counter(proc.stdout.splitlines())
    assert ours == _expected_print_lines(x, f)


def test_device_print_matches_triton(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    n = 2 * BLOCK
    x, f = _inputs(n)
    proc = _launch(_cubin("print_kernel", tmp_path), "print_kernel", n // BLOCK,
                   [["i32[]", x.tolist()], ["f32[]", f.tolist()], ["i32", n]])
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = subprocess.run([sys.executable, "-c", TRITON_DRIVER, str(SOURCE),
                             json.dumps([x.tolist(), f.tolist(), n, n // BLOCK])],
                            capture_output=True, text=True, timeout=300)
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert Counter(proc.stdout.splitlines()) == Counter(theirs.stdout.splitlines())


def _assert_line() -> int:
    (line,) = [i + 1 for i, t in enumerate(SOURCE.read_text().splitlines()) if '"x too big"' in t]
    return line


def test_device_assert_failing_raises_naming_the_assert(tmp_path):
    n = 2 * BLOCK + 37  # a partial last block: masked-off elements must not trip the assert
    x = np.ones(n, np.int32)
    x[BLOCK + 5] = 500
    proc = _launch(_cubin("assert_kernel", tmp_path), "assert_kernel", -(-n // BLOCK),
                   [["i32[]", x.tolist()], ["i32", n]])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3 and f"CUDA_ERROR {CUDA_ERROR_ASSERT}" in proc.stderr, out[-3000:]
    pattern = (rf"debug_ops\.py:{_assert_line()}: assert_kernel: block: \[1,\s*0,\s*0\], "
               rf"thread: \[5,\s*0,\s*0\] Assertion `x too big` failed")
    assert re.search(pattern, out), out[-3000:]


def test_device_assert_passing_is_silent(tmp_path):
    n = 2 * BLOCK + 37
    x = np.arange(n, dtype=np.int32) % 100
    proc = _launch(_cubin("assert_kernel", tmp_path), "assert_kernel", -(-n // BLOCK),
                   [["i32[]", x.tolist()], ["i32", n]])
    assert proc.returncode == 0 and "LAUNCH_OK" in proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert "Assertion" not in proc.stdout + proc.stderr
