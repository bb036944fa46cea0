# tl.multiple_of / max_contiguous / max_constancy → discardable tt.divisibility / tt.contiguity /
# tt.constancy on the defining op (Triton's spelling: one i32 per dimension). A hint on a kernel
# argument has no defining op and is dropped (the signature's `:16` says it instead).

import triton
import triton.language as tl


@triton.jit
def hint_kernel(p, n, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    offs = tl.max_contiguous(tl.multiple_of(offs, B), B)
    r = tl.arange(0, B)
    two = tl.multiple_of(r[:, None] * B + r[None, :], [B, 1])
    m = tl.multiple_of(n, 16)
    same = tl.max_constancy(tl.zeros((B,), tl.int32) * pid, B)
    tl.store(p + offs, tl.load(p + offs + m + same))
    tl.store(p + two, 1.0)
