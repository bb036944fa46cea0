# tl.make_block_ptr / tl.advance with boundary_check and padding_option, lowered to the TTIR that
# Triton's make_ttir leaves after rewrite_tensor_pointer: i64 offsets per dimension from
# make_range/expand_dims, times the stride, broadcast and summed; masks 0 <= idx < shape.
# shape and strides become i64, the runtime offset too:
# dim 0: offset + arange(0, 16), as a 16x1 column
# dim 1: constant offset 0 and stride 1 fold away (as Triton's canonicalizer folds them)
# boundary_check=(0, 1): idx0 < M and idx0 >= 0 (runtime offset), idx1 < N only (offset constexpr 0)
# padding_option="zero":
# tl.advance(src, (0, BN)): the column index moves by 32, masks against N only; padding "nan"
# no boundary_check: no mask

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
