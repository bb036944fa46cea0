# `while` → scf.while with carried values; runtime conditional expressions → scf.if;
# tl.trans / tl.reshape; static_print and device_assert leave no IR.
# VARIANT: kernel=while_kernel signature=*fp32:16,i32 constexprs={"B": 16}
# CHECK: %[[T:[0-9]+]] = "tt.trans"(%{{[0-9]+}}) <{order = array<i32: 1, 0>}> : (tensor<16x16xf32>) -> tensor<16x16xf32>
# CHECK: "tt.reshape"(%[[T]]) : (tensor<16x16xf32>) -> tensor<256xf32>
# CHECK: %[[W:[0-9]+]]:2 = "scf.while"(%{{[0-9]+}}, %arg1) ({
# CHECK: ^bb0(%[[ACC:.*]]: tensor<256xf32> loc({{.*}}), %[[I:.*]]: i32 loc({{.*}})):
# CHECK: %[[C:[0-9]+]] = "arith.cmpi"(%[[I]], %{{[0-9]+}}) <{predicate = 4 : i64}>
# CHECK: "scf.condition"(%[[C]], %[[ACC]], %[[I]]) : (i1, tensor<256xf32>, i32) -> ()
# CHECK: }, {
# CHECK: "arith.subi"
# CHECK: "scf.yield"
# CHECK: }) : (tensor<256xf32>, i32) -> (tensor<256xf32>, i32)
# CHECK: %[[S:[0-9]+]] = "scf.if"(%{{[0-9]+}}) ({
# CHECK: "scf.yield"
# CHECK: }) : (i1) -> i32
# CHECK-NOT: tt.print
# CHECK-NOT: tt.assert
# CHECK: "tt.store"

import triton
import triton.language as tl


@triton.jit
def while_kernel(p, n, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(p + r[:, None] * B + r[None, :])
    acc = tl.reshape(tl.trans(x), (B * B,))
    i = n
    while i > 0:
        acc = acc * 0.5
        i = i - 1
    s = n * 2 if n > 0 else n + 1
    tl.static_print("s is", s)
    tl.device_assert(n > 0, "n must be positive")
    tl.store(p + tl.arange(0, B * B), acc + s)
