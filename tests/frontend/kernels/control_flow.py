# Runtime if/else → scf.if with merged values; constexpr if folds; for over range → scf.for with
# loop-carried accumulators; tl.static_range unrolls; @jit helpers inline; cdiv, zeros, full.
# VARIANT: kernel=control_kernel signature=*fp32:16,*fp32:16,i32,fp32 constexprs={"BLOCK": 128, "USE_BIAS": false}
# Constants of loops and branches are hoisted to the entry block (as Triton's canonicalizer does).
# CHECK: %[[ACC0:[0-9]+]] = "arith.constant"() <{value = dense<0.000000e+00> : tensor<128xf32>}>
# CHECK: %[[PID:[0-9]+]] = "tt.get_program_id"() <{axis = 0 : i32}>
# cdiv(n, BLOCK) = (n + BLOCK - 1) // BLOCK:
# CHECK: "arith.addi"(%arg2
# CHECK: "arith.subi"
# CHECK: %[[TILES:[0-9]+]] = "arith.divsi"
# CHECK: %[[LB:[0-9]+]] = "arith.constant"() <{value = 0 : i32}>
# CHECK: %[[ACC:[0-9]+]] = "scf.for"(%[[LB]], %[[TILES]], %{{[0-9]+}}, %[[ACC0]]) ({
# CHECK: ^bb0(%[[IV:.*]]: i32 loc({{.*}}), %[[CARRY:.*]]: tensor<128xf32> loc({{.*}})):
# CHECK: "arith.muli"(%[[IV]]
# CHECK: %[[LD:[0-9]+]] = "tt.load"
# The inlined helper `scale`:
# CHECK: %[[SC:[0-9]+]] = "arith.mulf"(%[[LD]]
# CHECK: %[[NEXT:[0-9]+]] = "arith.addf"(%[[CARRY]], %[[SC]])
# CHECK: "scf.yield"(%[[NEXT]]) : (tensor<128xf32>) -> ()
# tl.range(num_stages=) → the attribute Triton's pipeliner reads:
# CHECK: }) {tt.num_stages = 2 : i32} : (i32, i32, i32, tensor<128xf32>) -> tensor<128xf32>
# static_range(3) unrolled into three adds of 1.0, 2.0... folded per iteration:
# CHECK-COUNT-3: "arith.addf"
# CHECK: %[[COND:[0-9]+]] = "arith.cmpi"(%[[PID]], %{{[0-9]+}}) <{predicate = 0 : i64}>
# CHECK: %[[SEL:[0-9]+]] = "scf.if"(%[[COND]]) ({
# CHECK: "arith.mulf"
# CHECK: "scf.yield"
# CHECK: }, {
# CHECK: "tt.splat"
# CHECK: "scf.yield"
# CHECK: }) : (i1) -> tensor<128xf32>
# CHECK-NOT: bias
# CHECK: "tt.store"(%{{[0-9]+}}, %[[SEL]]

import triton
import triton.language as tl


@triton.jit
def scale(x, factor: tl.constexpr):
    """Helpers inline: no tt.call in the output."""
    return x * factor


@triton.jit
def control_kernel(out_ptr, in_ptr, n, bias, BLOCK: tl.constexpr, USE_BIAS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in tl.range(0, tl.cdiv(n, BLOCK), num_stages=2):
        x = tl.load(in_ptr + t * BLOCK + offs, mask=t * BLOCK + offs < n, other=0.0)
        acc += scale(x, 2.0)
    for k in tl.static_range(3):
        acc = acc + (k + 1.0)
    if pid == 0:
        res = acc * 0.5
    else:
        res = tl.full((BLOCK,), 1.0, tl.float32) + tl.zeros((BLOCK,), tl.float32) * 0 + pid
    if USE_BIAS:
        res = res + bias
    tl.store(out_ptr + pid * BLOCK + offs, res)
