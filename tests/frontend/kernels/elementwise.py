# where / maximum / minimum / casts / math functions / unary minus / integer ops / Python-number promotion.
# VARIANT: kernel=elementwise_kernel signature=*fp16:16,*fp32:16,*i32,i32 constexprs={"BLOCK": 256}
# The load's `other` zero and the relu's zero are one constant after CSE.
# The fp32 literal 0.0 defers to the fp16 block (Python numbers never widen a tensor):
# CHECK: %[[Z:[0-9]+]] = "arith.constant"() <{value = dense<0.000000e+00> : tensor<256xf16>}>
# CHECK: %[[X:[0-9]+]] = "tt.load"{{.*}} -> tensor<256xf16>
# CHECK: %[[GT:[0-9]+]] = "arith.cmpf"(%[[X]], %[[Z]]) <{fastmath = #arith.fastmath<none>, predicate = 2 : i64}>
# CHECK: %[[RELU:[0-9]+]] = "arith.select"(%[[GT]], %[[X]], %{{[0-9]+}}) : (tensor<256xi1>, tensor<256xf16>, tensor<256xf16>) -> tensor<256xf16>
# CHECK: %[[Y:[0-9]+]] = "tt.load"{{.*}} -> tensor<256xf32>
# CHECK: %[[XF:[0-9]+]] = "arith.extf"(%[[RELU]]) {{.*}} -> tensor<256xf32>
# CHECK: "arith.maxnumf"(%[[XF]], %[[Y]])
# CHECK: "arith.minnumf"
# CHECK: "math.sqrt"
# CHECK: "math.log"
# CHECK: "math.absf"
# CHECK: "arith.subf"
# CHECK: %[[I:[0-9]+]] = "arith.fptosi"({{.*}}) : (tensor<256xf32>) -> tensor<256xi32>
# CHECK: "arith.remsi"
# CHECK: "arith.divsi"
# CHECK: "arith.maxsi"
# CHECK: "arith.andi"
# CHECK: "arith.shli"
# int / int is true division in fp32:
# CHECK: %[[FI:[0-9]+]] = "arith.sitofp"({{.*}}) : (tensor<256xi32>) -> tensor<256xf32>
# CHECK: "arith.divf"(%[[FI]]
# CHECK: "arith.truncf"({{.*}}) {{.*}} -> tensor<256xf16>
# CHECK: "tt.store"

import triton
import triton.language as tl


@triton.jit
def elementwise_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    relu = tl.where(x > 0.0, x, 0.0)
    y = tl.load(y_ptr + offs, mask=mask)
    hi = tl.maximum(relu.to(tl.float32), y)
    lo = tl.minimum(hi, 6.0)
    v = -tl.abs(tl.log(tl.sqrt(lo) + 1.0))
    i = v.to(tl.int32)
    j = tl.maximum((i % 7) // 2, 1) & 0xFF
    j = j << 1
    f = j / 3
    tl.store(z_ptr + offs, j, mask=mask)
    tl.store(x_ptr + offs, f, mask=mask)
