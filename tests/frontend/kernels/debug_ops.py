# tl.device_print is always kept as tt.print (Triton's prefix munging, isSigned per value, Python
# print is device_print); tl.device_assert and `assert` on runtime values become tt.assert only in
# a debug build (tests/frontend/test_debug_ops.py checks the DEBUG lines with debug=True).
# Parameters carry the `def` line: the name location wraps the file position.
# The mask: cond | (mask ^ true), all i1:
# A scalar condition; Python `assert cond, msg` is device_assert:
import triton
import triton.language as tl


@triton.jit
def debug_kernel(x_ptr, f_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    f = tl.load(f_ptr + offs, mask=mask)
    tl.device_print("x", x)
    tl.device_print("pid", pid, hex=True)
    print("two ", f, x)
    tl.device_print("hello")
    tl.device_assert(x < 100, "x too big")
    tl.device_assert(x > -1, 'negative "x"', mask=mask)
    tl.device_assert(n > 0, "n is positive")
    assert x != 7, "seven"
    tl.store(f_ptr + offs, f + 1.0, mask=mask)
