"""Test-only kernels for tl.device_print / tl.device_assert on the GPU (tests/gpu/test_gpu_debug.py); built with debug=True by tests/test_backend_debug.py."""

import triton
import triton.language as tl


@triton.jit
def print_kernel(x_ptr, f_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    f = tl.load(f_ptr + offs, mask=offs < n)
    tl.device_print("x", x)
    tl.device_print("n", n)
    print("pair ", x, f)
    tl.device_print("hx", x, hex=True)


@triton.jit
def assert_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x < 100, "x too big", mask=offs < n)
    tl.store(x_ptr + offs, x + 1, mask=offs < n)
