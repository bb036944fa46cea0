# Every tl math function the frontend lowers, on fp32 blocks, plus a cast chain through fp16/bf16/int.
# VARIANT: kernel=math_kernel signature=*fp32:16,*fp32:16,i32 constexprs={"BLOCK": 512}
# CHECK: "math.exp"
# CHECK: "math.exp2"
# CHECK: "math.log"
# CHECK: "math.log2"
# CHECK: "math.sqrt"
# CHECK: "math.rsqrt"
# CHECK: "math.sin"
# CHECK: "math.cos"
# CHECK: "math.floor"
# CHECK: "math.ceil"
# CHECK: "math.erf"
# CHECK: "math.absf"
# CHECK: "math.fma"
# CHECK: "arith.truncf"{{.*}} -> tensor<512xf16>
# fp16 → bf16 goes through fp32:
# CHECK: "arith.extf"{{.*}} : (tensor<512xf16>) -> tensor<512xf32>
# CHECK: "arith.truncf"{{.*}} : (tensor<512xf32>) -> tensor<512xbf16>
# bf16 → uint8 also goes through fp32 (Triton semantic.cast):
# CHECK: "arith.extf"{{.*}} : (tensor<512xbf16>) -> tensor<512xf32>
# CHECK: "arith.fptoui"{{.*}} : (tensor<512xf32>) -> tensor<512xi8>
# CHECK: "arith.uitofp"{{.*}} : (tensor<512xi8>) -> tensor<512xf32>
# CHECK: "tt.bitcast"{{.*}} : (tensor<512xf32>) -> tensor<512xi32>
# CHECK: "tt.store"

import triton
import triton.language as tl


@triton.jit
def math_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.exp(x) + tl.exp2(x) + tl.log(x) + tl.log2(x) + tl.sqrt(x) + tl.rsqrt(x)
    y += tl.sin(x) + tl.cos(x) + tl.floor(x) + tl.ceil(x) + tl.math.erf(x) + tl.abs(x)
    y = tl.fma(y, x, 1.0)
    z = y.to(tl.float16).to(tl.bfloat16).to(tl.uint8).to(tl.float32)
    bits = z.to(tl.int32, bitcast=True)
    tl.store(y_ptr + offs, z + (bits & 1), mask=m)
