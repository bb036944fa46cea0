# Early `return` outside loops, at any nesting of runtime if's: the statements after the `if` are
# lowered into the branch that does not return (as Triton's cf.cond_br blocks order them), so the
# output is structured scf.if and the kernel ends after it.
# VARIANT: kernel=early_kernel signature=*fp32:16,*fp32:16,i32 constexprs={"BLOCK": 128}
# CHECK: %[[PID:[0-9]+]] = "tt.get_program_id"
# CHECK: %[[DONE:[0-9]+]] = "arith.cmpi"(%{{[0-9]+}}, %arg2) <{predicate = 5 : i64}>
# The returning branch is empty:
# CHECK: "scf.if"(%[[DONE]]) ({
# CHECK-NEXT: "scf.yield"() : () -> ()
# CHECK-NEXT: }, {
# CHECK: %[[X:[0-9]+]] = "tt.load"
# CHECK: %[[BIG:[0-9]+]] = "arith.cmpi"(%arg2, %{{[0-9]+}}) <{predicate = 4 : i64}>
# CHECK: "scf.if"(%[[BIG]]) ({
# CHECK: %[[FIRST:[0-9]+]] = "arith.cmpi"(%[[PID]], %{{[0-9]+}}) <{predicate = 0 : i64}>
# CHECK: "scf.if"(%[[FIRST]]) ({
# pid == 0 stores 3x and returns; no second store on that path:
# CHECK: "arith.mulf"(%[[X]]
# CHECK: "tt.store"
# CHECK-NEXT: "scf.yield"() : () -> ()
# CHECK-NEXT: }, {
# the rest of the kernel after the inner return, then after the outer if:
# CHECK: "arith.addf"(%[[X]]
# CHECK: "tt.store"
# CHECK: }) : (i1) -> ()
# CHECK: "scf.yield"() : () -> ()
# CHECK-NEXT: }, {
# n <= 1000: the outer if's else path runs only the final store
# CHECK-NOT: "arith.addf"
# CHECK: "tt.store"
# CHECK: }) : (i1) -> ()
# CHECK: }) : (i1) -> ()
# CHECK-NEXT: "tt.return"

import triton
import triton.language as tl


@triton.jit
def early_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if pid * BLOCK >= n:
        return
    x = tl.load(in_ptr + offs, mask=offs < n)
    if n > 1000:
        if pid == 0:
            tl.store(out_ptr + offs, x * 3.0, mask=offs < n)
            return
        x = x + 1.0
    tl.store(out_ptr + offs, x * 2.0, mask=offs < n)
