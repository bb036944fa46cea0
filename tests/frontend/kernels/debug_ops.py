# tl.device_print is always kept as tt.print (Triton's prefix munging, isSigned per value, Python
# print is device_print); tl.device_assert and `assert` on runtime values become tt.assert only in
# a debug build (tests/frontend/test_debug_ops.py checks the DEBUG lines with debug=True).
# VARIANT: kernel=debug_kernel signature=*i32:16,*fp32:16,i32 constexprs={"BLOCK": 128}
# CHECK: %[[X:[0-9]+]] = "tt.load"
# CHECK: %[[F:[0-9]+]] = "tt.load"
# CHECK: "tt.print"(%[[X]]) <{hex = false, isSigned = array<i32: 1>, prefix = " x: "}> : (tensor<128xi32>) -> ()
# CHECK: "tt.print"(%[[PID:[0-9]+]]) <{hex = true, isSigned = array<i32: 1>, prefix = " pid: "}> : (i32) -> ()
# CHECK: "tt.print"(%[[F]], %[[X]]) <{hex = false, isSigned = array<i32: 0, 1>, prefix = " two: "}>
# CHECK: "tt.print"() <{hex = false, isSigned = array<i32>, prefix = " hello"}> : () -> ()
# CHECK-NOT: "tt.assert"
# CHECK: "tt.store"
# CHECK-NOT: "tt.assert"
# Parameters carry the `def` line: the name location wraps the file position.
# DEBUG: ^bb0(%arg0: !tt.ptr<i32> loc("n{{[0-9]+}}"("debug_ops.py":34:18))
# DEBUG: "tt.print"(%{{[0-9]+}}) <{hex = false, isSigned = array<i32: 1>, prefix = " x: "}> : (tensor<128xi32>) -> () loc("n{{[0-9]+}}"("debug_ops.py":40:5))
# DEBUG: %[[BIG:[0-9]+]] = "arith.cmpi"(%[[X:[0-9]+]], %{{[0-9]+}}) <{predicate = 2 : i64}>
# DEBUG-NEXT: "tt.assert"(%[[BIG]]) <{message = "x too big"}> : (tensor<128xi1>) -> () loc("n{{[0-9]+}}"("debug_ops.py":44:5))
# The mask: cond | (mask ^ true), all i1:
# DEBUG: %[[NEG:[0-9]+]] = "arith.cmpi"(%[[X]], %{{[0-9]+}}) <{predicate = 4 : i64}>
# DEBUG: %[[T:[0-9]+]] = "arith.constant"() <{value = dense<true> : tensor<128xi1>}>
# DEBUG: %[[NM:[0-9]+]] = "arith.xori"(%[[M:[0-9]+]], %[[T]]) : (tensor<128xi1>, tensor<128xi1>) -> tensor<128xi1>
# DEBUG: %[[C:[0-9]+]] = "arith.ori"(%[[NEG]], %[[NM]]) : (tensor<128xi1>, tensor<128xi1>) -> tensor<128xi1>
# DEBUG: "tt.assert"(%[[C]]) <{message = "negative \22x\22"}>
# A scalar condition; Python `assert cond, msg` is device_assert:
# DEBUG: "tt.assert"(%{{[0-9]+}}) <{message = "n is positive"}> : (i1) -> ()
# DEBUG: "tt.assert"(%{{[0-9]+}}) <{message = "seven"}> : (tensor<128xi1>) -> ()
# DEBUG: "tt.store"
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
