# Row softmax (Triton tutorial 02 form): reductions, exp, -inf padding, division.
# VARIANT: kernel=softmax_kernel signature=*fp32:16,*fp32:16,i32,i32,i32 constexprs={"BLOCK_SIZE": 1024}
# CHECK: %[[ROW:[0-9]+]] = "tt.get_program_id"() <{axis = 0 : i32}>
# CHECK: "arith.muli"(%[[ROW]], %arg2)
# CHECK: %[[NEG:[0-9]+]] = "arith.constant"() <{value = dense<0xFF800000> : tensor<1024xf32>}>
# CHECK: %[[ROWV:[0-9]+]] = "tt.load"(%{{[0-9]+}}, %{{[0-9]+}}, %[[NEG]])
# CHECK: %[[MAX:[0-9]+]] = "tt.reduce"(%[[ROWV]]) <{axis = 0 : i32}> ({
# CHECK: ^bb0(%[[A:.*]]: f32 loc({{.*}}), %[[B:.*]]: f32 loc({{.*}})):
# CHECK: %[[M:[0-9]+]] = "arith.maxnumf"(%[[A]], %[[B]])
# CHECK: "tt.reduce.return"(%[[M]]) : (f32) -> ()
# CHECK: }) : (tensor<1024xf32>) -> f32
# CHECK: %[[MS:[0-9]+]] = "tt.splat"(%[[MAX]]) : (f32) -> tensor<1024xf32>
# CHECK: %[[SUB:[0-9]+]] = "arith.subf"(%[[ROWV]], %[[MS]])
# CHECK: %[[EXP:[0-9]+]] = "math.exp"(%[[SUB]])
# CHECK: %[[DEN:[0-9]+]] = "tt.reduce"(%[[EXP]]) <{axis = 0 : i32}> ({
# CHECK: "arith.addf"
# CHECK: }) : (tensor<1024xf32>) -> f32
# CHECK: %[[DS:[0-9]+]] = "tt.splat"(%[[DEN]])
# CHECK: %[[OUT:[0-9]+]] = "arith.divf"(%[[EXP]], %[[DS]])
# CHECK: "tt.store"(%{{[0-9]+}}, %[[OUT]], %{{[0-9]+}})

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    row = tl.load(input_ptrs, mask=col_offsets < n_cols, other=-float('inf'))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    output_ptrs = output_row_start_ptr + col_offsets
    tl.store(output_ptrs, softmax_output, mask=col_offsets < n_cols)
