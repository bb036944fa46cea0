# 2-D blocks: x[:, None] / x[None, :] (tt.expand_dims), implicit tt.broadcast, 2-D pointer
# arithmetic, reductions along an axis, tl.expand_dims and tl.broadcast_to.
# VARIANT: kernel=rowsum_kernel signature=*fp32:16,*fp32:16,i32 constexprs={"BM": 32, "BN": 64}
# CHECK: %[[RM:[0-9]+]] = "tt.make_range"() <{end = 32 : i32, start = 0 : i32}>
# CHECK: %[[RN:[0-9]+]] = "tt.make_range"() <{end = 64 : i32, start = 0 : i32}>
# CHECK: %[[EM:[0-9]+]] = "tt.expand_dims"(%[[RM]]) <{axis = 1 : i32}> : (tensor<32xi32>) -> tensor<32x1xi32>
# CHECK: "arith.muli"(%[[EM]]
# CHECK: %[[EN:[0-9]+]] = "tt.expand_dims"(%[[RN]]) <{axis = 0 : i32}> : (tensor<64xi32>) -> tensor<1x64xi32>
# CHECK: "tt.broadcast"({{.*}}) : (tensor<32x1xi32>) -> tensor<32x64xi32>
# CHECK: "tt.broadcast"({{.*}}) : (tensor<1x64xi32>) -> tensor<32x64xi32>
# CHECK: %[[X:[0-9]+]] = "tt.load"{{.*}} -> tensor<32x64xf32>
# CHECK: %[[S:[0-9]+]] = "tt.reduce"(%[[X]]) <{axis = 1 : i32}>
# CHECK: }) : (tensor<32x64xf32>) -> tensor<32xf32>
# CHECK: "tt.expand_dims"(%[[S]]) <{axis = 1 : i32}> : (tensor<32xf32>) -> tensor<32x1xf32>
# CHECK: "tt.broadcast"({{.*}}) : (tensor<32x1xf32>) -> tensor<32x64xf32>
# CHECK: "tt.store"{{.*}} : (tensor<32x64x!tt.ptr<f32>>, tensor<32x64xf32>, tensor<32x64xi1>) -> ()

import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(out_ptr, in_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * stride + rn[None, :]
    mask = (rm[:, None] < BM) & (rn[None, :] < stride)
    x = tl.load(in_ptr + offs, mask=mask, other=0.0)
    s = tl.sum(x, axis=1)
    centered = x - tl.broadcast_to(tl.expand_dims(s, 1), (BM, BN)) / BN
    tl.store(out_ptr + offs, centered, mask=mask)
