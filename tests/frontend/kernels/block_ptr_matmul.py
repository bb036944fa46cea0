# The matmul-with-block-pointers pattern (tutorial 03 written with tl.make_block_ptr): both
# operands' block pointers are carried through scf.for as offsets, tl.dot accumulates.
# carried names in sorted order: a's (row, col) offsets, acc, b's (row, col) offsets:
# a advances along columns, b along rows; the other offsets pass through unchanged

import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), (0, 1))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a, boundary_check=(0, 1))
        y = tl.load(b, boundary_check=(0, 1))
        acc = tl.dot(x, y, acc)
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c, acc.to(tl.float16), boundary_check=(0, 1))
