# Block pointers carried through scf.for (the matmul-with-block-ptr pattern): the loop carries the
# offsets that move (the column offset; the row indices are made once, outside the loop), as
# Triton's TTIR after rewrite_tensor_pointer and its canonicalizer.
# tl.advance(src, (0, BN)): only the column offset moves

import triton
import triton.language as tl


@triton.jit
def bp_rowsum(out_ptr, in_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(in_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(pid * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(N, BN)):
        acc += tl.load(src, boundary_check=(0, 1), padding_option="zero")
        src = tl.advance(src, (0, BN))
    dst = tl.make_block_ptr(out_ptr, shape=(M,), strides=(1,), offsets=(pid * BM,), block_shape=(BM,), order=(0,))
    tl.store(dst, tl.sum(acc, axis=1), boundary_check=(0,))
