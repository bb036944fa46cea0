# Matmul, Triton tutorial 03 form (grouped ordering, K loop, tl.dot into an fp32 accumulator).
# VARIANT: kernel=matmul_kernel signature=*fp16:16,*fp16:16,*fp16:16,i32,i32,i32,i32:16,i32:16,i32:16,i32:16,i32:16,i32:16 constexprs={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
# CHECK: "tt.get_program_id"() <{axis = 0 : i32}>
# CHECK: "arith.divsi"
# CHECK: "arith.minsi"
# CHECK: "arith.remsi"
# CHECK: %[[ACC0:[0-9]+]] = "arith.constant"() <{value = dense<0.000000e+00> : tensor<128x128xf32>}>
# Loop-carried values in name order: a_ptrs, accumulator, b_ptrs.
# CHECK: "scf.for"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[ACC0]], %{{[0-9]+}}) ({
# CHECK: ^bb0(%{{.*}}: i32 loc({{.*}}), %[[AP:[a-z0-9]+]]: tensor<128x64x!tt.ptr<f16>> loc({{.*}}), %[[ACC:[a-z0-9]+]]: tensor<128x128xf32> loc({{.*}}), %[[BP:[a-z0-9]+]]: tensor<64x128x!tt.ptr<f16>> loc({{.*}})):
# CHECK: %[[A:[0-9]+]] = "tt.load"(%[[AP]]
# CHECK: %[[B:[0-9]+]] = "tt.load"(%[[BP]]
# CHECK: %[[D:[0-9]+]] = "tt.dot"(%[[A]], %[[B]], %[[ACC]]) <{inputPrecision = 0 : i32, maxNumImpreciseAcc = 0 : i32}> : (tensor<128x64xf16>, tensor<64x128xf16>, tensor<128x128xf32>) -> tensor<128x128xf32>
# CHECK: "scf.yield"(%{{[0-9]+}}, %[[D]], %{{[0-9]+}})
# CHECK: "arith.truncf"{{.*}} : (tensor<128x128xf32>) -> tensor<128x128xf16>
# CHECK: "tt.store"

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)
