# argmax / argmin (tt.reduce over (value, index) pairs), tl.reduce with a @jit combine_fn,
# tl.max keeping dims, cumsum and associative_scan (tt.scan).
# VARIANT: kernel=reduce_kernel signature=*fp16:16,*i32:16,*fp32:16 constexprs={"M": 16, "N": 32}
# CHECK: %[[R:[0-9]+]] = "tt.make_range"() <{end = 32 : i32, start = 0 : i32}>
# CHECK: %[[E:[0-9]+]] = "tt.expand_dims"(%[[R]]) <{axis = 0 : i32}> : (tensor<32xi32>) -> tensor<1x32xi32>
# CHECK: %[[I:[0-9]+]] = "tt.broadcast"(%[[E]]) : (tensor<1x32xi32>) -> tensor<16x32xi32>
# The argmax indices reuse the load's column offsets (CSE).
# CHECK: %[[X:[0-9]+]] = "tt.load"{{.*}} -> tensor<16x32xf16>
# CHECK: %[[AM:[0-9]+]]:2 = "tt.reduce"(%[[X]], %[[I]]) <{axis = 1 : i32}> ({
# CHECK: ^bb0(%[[V1:[a-z0-9]+]]: f16 loc({{.*}}), %[[I1:[a-z0-9]+]]: i32 loc({{.*}}), %[[V2:[a-z0-9]+]]: f16 loc({{.*}}), %[[I2:[a-z0-9]+]]: i32 loc({{.*}})):
# CHECK: "arith.cmpf"(%[[V1]], %[[V2]]) <{fastmath = #arith.fastmath<none>, predicate = 2 : i64}>
# CHECK: "tt.reduce.return"(%{{[0-9]+}}, %{{[0-9]+}}) : (f16, i32) -> ()
# CHECK: }) : (tensor<16x32xf16>, tensor<16x32xi32>) -> (tensor<16xf16>, tensor<16xi32>)
# CHECK: "tt.reduce"{{.*}}<{axis = 0 : i32}>
# CHECK: "arith.cmpf"{{.*}}predicate = 4 : i64
# The @jit combine_fn is inlined into the region:
# CHECK: "tt.reduce"(%{{[0-9]+}}) <{axis = 1 : i32}> ({
# CHECK: ^bb0(%[[A:[a-z0-9]+]]: f32 loc({{.*}}), %[[B:[a-z0-9]+]]: f32 loc({{.*}})):
# CHECK: %[[P:[0-9]+]] = "arith.mulf"(%[[A]], %[[B]])
# CHECK: "tt.reduce.return"(%[[P]]) : (f32) -> ()
# CHECK: }) : (tensor<16x32xf32>) -> tensor<16xf32>
# keep_dims: reduce to 16 then expand back to 16x1:
# CHECK: "tt.reduce"
# CHECK: }) : (tensor<16x32xf32>) -> tensor<16xf32>
# CHECK: "tt.expand_dims"{{.*}} : (tensor<16xf32>) -> tensor<16x1xf32>
# CHECK: "tt.scan"(%{{[0-9]+}}) <{axis = 1 : i32, reverse = false}> ({
# CHECK: "tt.scan.return"
# CHECK: }) : (tensor<16x32xf32>) -> tensor<16x32xf32>
# CHECK: "tt.scan"(%{{[0-9]+}}) <{axis = 0 : i32, reverse = true}>
# CHECK: "arith.maxnumf"
# CHECK: "tt.store"

import triton
import triton.language as tl


@triton.jit
def mul_combine(a, b):
    return a * b


@triton.jit
def max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def reduce_kernel(x_ptr, idx_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    x = tl.load(x_ptr + offs)
    am = tl.argmax(x, axis=1)
    an = tl.argmin(x, axis=0)
    tl.store(idx_ptr + rm, am)
    tl.store(idx_ptr + M + rn, an)
    xf = x.to(tl.float32)
    prod = tl.reduce(xf, 1, mul_combine)
    mx = tl.max(xf, axis=1, keep_dims=True)
    cs = tl.cumsum(xf - mx, axis=1)
    rs = tl.associative_scan(cs, 0, max_combine, reverse=True)
    tl.store(out_ptr + offs, rs + prod[:, None])
