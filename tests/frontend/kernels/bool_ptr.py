# Bool pointers are bytes in memory (Triton semantic._load_legacy / store): a *i1 pointer is
# bitcast to *i8, loads compare the byte with 0, stores widen the bool with extui.
# VARIANT: kernel=bool_kernel signature=*i1,*i32 constexprs={"B": 32}
# CHECK: %[[P8:[0-9]+]] = "tt.bitcast"(%{{[0-9]+}}) : (tensor<32x!tt.ptr<i1>>) -> tensor<32x!tt.ptr<i8>>
# CHECK: %[[ONE:[0-9]+]] = "arith.constant"() <{value = dense<1> : tensor<32xi8>}>
# CHECK: %[[L:[0-9]+]] = "tt.load"(%[[P8]], %{{[0-9]+}}, %[[ONE]]) {{.*}} -> tensor<32xi8>
# CHECK: "arith.cmpi"(%[[L]], %{{[0-9]+}}) <{predicate = 1 : i64}> : (tensor<32xi8>, tensor<32xi8>) -> tensor<32xi1>
# The store reuses the load's i8 pointers (CSE).
# CHECK-NOT: "tt.bitcast"
# CHECK: %[[W:[0-9]+]] = "arith.extui"({{.*}}) : (tensor<32xi1>) -> tensor<32xi8>
# CHECK: "tt.store"(%[[P8]], %[[W]]) {{.*}} : (tensor<32x!tt.ptr<i8>>, tensor<32xi8>) -> ()

import triton
import triton.language as tl


@triton.jit
def bool_kernel(pb, pi, B: tl.constexpr):
    r = tl.arange(0, B)
    b = tl.load(pb + r, mask=r < 8, other=True)
    tl.store(pb + r, tl.load(pi + r) > 0)
    tl.store(pi + r, b.to(tl.int32))
