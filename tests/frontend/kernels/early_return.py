# Early `return` outside loops, at any nesting of runtime if's: the statements after the `if` are
# lowered into the branch that does not return (as Triton's cf.cond_br blocks order them), so the
# output is structured scf.if and the kernel ends after it.
# The returning branch is empty:
# pid == 0 stores 3x and returns; no second store on that path:
# the rest of the kernel after the inner return, then after the outer if:
# n <= 1000: the outer if's else path runs only the final store

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
