# Layer norm forward, Triton tutorial 05 form: loops over column blocks with block accumulators,
# scalar reductions, scalar stores of mean/rstd, fp16 in/out with fp32 math, eps as an fp32 argument.
# VARIANT: kernel=_layer_norm_fwd_fused signature=*fp16:16,*fp16:16,*fp16:16,*fp16:16,*fp32:16,*fp32:16,i32,i32,fp32 constexprs={"BLOCK_SIZE": 1024}
# CHECK: %[[M0:[0-9]+]] = "arith.constant"() <{value = dense<0.000000e+00> : tensor<1024xf32>}>
# CHECK: %[[MEANACC:[0-9]+]] = "scf.for"({{.*}}, %[[M0]]) ({
# CHECK: "arith.extf"{{.*}} : (tensor<1024xf16>) -> tensor<1024xf32>
# CHECK: "scf.yield"
# CHECK: %[[MSUM:[0-9]+]] = "tt.reduce"(%[[MEANACC]]) <{axis = 0 : i32}>
# CHECK: %[[MEAN:[0-9]+]] = "arith.divf"(%[[MSUM]], %{{[0-9]+}}) {{.*}} : (f32, f32) -> f32
# CHECK: "scf.for"
# CHECK: "arith.select"
# CHECK: "tt.reduce"
# CHECK: "math.sqrt"
# CHECK: %[[RSTD:[0-9]+]] = "arith.divf"
# CHECK: "tt.store"(%{{[0-9]+}}, %[[MEAN]]) {{.*}} : (!tt.ptr<f32>, f32) -> ()
# CHECK: "tt.store"(%{{[0-9]+}}, %[[RSTD]]) {{.*}} : (!tt.ptr<f32>, f32) -> ()
# CHECK: "scf.for"
# CHECK: "arith.truncf"{{.*}} -> tensor<1024xf16>
# CHECK: "tt.store"{{.*}} : (tensor<1024x!tt.ptr<f16>>, tensor<1024xf16>, tensor<1024xi1>) -> ()

import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)
