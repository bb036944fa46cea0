# tl.make_block_ptr / tl.advance with boundary_check and padding_option, lowered to the TTIR that
# Triton's make_ttir leaves after rewrite_tensor_pointer: i64 offsets per dimension from
# make_range/expand_dims, times the stride, broadcast and summed; masks 0 <= idx < shape.
# VARIANT: kernel=bp_copy signature=*fp32:16,*fp32:16,i32,i32,i32 constexprs={"BM": 16, "BN": 32}
# CHECK-NOT: tt.make_tensor_ptr
# CHECK: %[[PID:[0-9]+]] = "tt.get_program_id"
# shape and strides become i64, the runtime offset too:
# CHECK: %[[M:[0-9]+]] = "arith.extsi"(%arg2) : (i32) -> i64
# CHECK: %[[N:[0-9]+]] = "arith.extsi"(%arg3) : (i32) -> i64
# CHECK: %[[SM:[0-9]+]] = "arith.extsi"(%arg4) : (i32) -> i64
# CHECK: %[[OFF0:[0-9]+]] = "arith.extsi"
# dim 0: offset + arange(0, 16), as a 16x1 column
# CHECK: %[[R0:[0-9]+]] = "tt.make_range"() <{end = 16 : i32, start = 0 : i32}>
# CHECK: %[[R0L:[0-9]+]] = "arith.extsi"(%[[R0]]) : (tensor<16xi32>) -> tensor<16xi64>
# CHECK: %[[S0:[0-9]+]] = "tt.splat"(%[[OFF0]]) : (i64) -> tensor<16xi64>
# CHECK: %[[I0:[0-9]+]] = "arith.addi"(%[[S0]], %[[R0L]])
# CHECK: %[[ROW:[0-9]+]] = "tt.expand_dims"(%[[I0]]) <{axis = 1 : i32}> : (tensor<16xi64>) -> tensor<16x1xi64>
# dim 1: constant offset 0 and stride 1 fold away (as Triton's canonicalizer folds them)
# CHECK: %[[R1:[0-9]+]] = "tt.make_range"() <{end = 32 : i32, start = 0 : i32}>
# CHECK: %[[R1L:[0-9]+]] = "arith.extsi"(%[[R1]])
# CHECK: %[[COL:[0-9]+]] = "tt.expand_dims"(%[[R1L]]) <{axis = 0 : i32}> : (tensor<32xi64>) -> tensor<1x32xi64>
# CHECK: %[[SSM:[0-9]+]] = "tt.splat"(%[[SM]]) : (i64) -> tensor<16x1xi64>
# CHECK: "arith.muli"(%[[ROW]], %[[SSM]])
# CHECK: %[[OFFS:[0-9]+]] = "arith.addi"
# CHECK: %[[P:[0-9]+]] = "tt.addptr"(%{{[0-9]+}}, %[[OFFS]]) : (tensor<16x32x!tt.ptr<f32>>, tensor<16x32xi64>)
# boundary_check=(0, 1): idx0 < M and idx0 >= 0 (runtime offset), idx1 < N only (offset constexpr 0)
# CHECK: "arith.cmpi"(%[[ROW]], %{{[0-9]+}}) <{predicate = 2 : i64}>
# CHECK: "arith.cmpi"(%[[ROW]], %{{[0-9]+}}) <{predicate = 5 : i64}>
# CHECK: "arith.cmpi"(%[[COL]], %{{[0-9]+}}) <{predicate = 2 : i64}>
# CHECK-NOT: "arith.cmpi"(%[[COL]]
# CHECK: %[[MASK:[0-9]+]] = "arith.andi"({{.*}}tensor<16x32xi1>
# padding_option="zero":
# CHECK: %[[ZERO:[0-9]+]] = "arith.constant"() <{value = dense<0.000000e+00> : tensor<16x32xf32>}>
# CHECK: %[[X:[0-9]+]] = "tt.load"(%[[P]], %[[MASK]], %[[ZERO]])
# CHECK: "tt.store"(%{{[0-9]+}}, %{{[0-9]+}}, %[[MASK]])
# tl.advance(src, (0, BN)): the column index moves by 32, masks against N only; padding "nan"
# CHECK: "arith.constant"() <{value = dense<32> : tensor<32xi64>}>
# CHECK: %[[NAN:[0-9]+]] = "arith.constant"() <{value = dense<0x7FC00000> : tensor<16x32xf32>}>
# CHECK: "tt.load"(%{{[0-9]+}}, %{{[0-9]+}}, %[[NAN]])
# no boundary_check: no mask
# CHECK: "tt.store"(%{{[0-9]+}}, %{{[0-9]+}}) <{

import triton
import triton.language as tl


@triton.jit
def bp_copy(out_ptr, in_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(in_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(pid * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(pid * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    x = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    tl.store(dst, x + 1.0, boundary_check=(0, 1))
    src = tl.advance(src, (0, BN))
    y = tl.load(src, boundary_check=(1,), padding_option="nan")
    tl.store(tl.advance(dst, (0, BN)), y)
