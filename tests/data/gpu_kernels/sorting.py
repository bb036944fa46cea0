# Bitonic standard-library functions on the GPU (tests/gpu/test_gpu_sort.py): BM rows of N
# elements per program, rows past M masked off; and one program sorting packed key/position words.

import triton
import triton.language as tl


@triton.jit
def sort_rows_kernel(x_ptr, y_ptr, M, BM: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    offs = rows[:, None] * N + tl.arange(0, N)[None, :]
    mask = rows[:, None] < M
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.sort(x, descending=DESC), mask=mask)


@triton.jit
def topk_rows_kernel(x_ptr, y_ptr, M, BM: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    x = tl.load(x_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], mask=rows[:, None] < M)
    tl.store(y_ptr + rows[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K), mask=rows[:, None] < M)


@triton.jit
def flip_rows_kernel(x_ptr, y_ptr, M, BM: tl.constexpr, N: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    offs = rows[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs, mask=rows[:, None] < M)
    tl.store(y_ptr + offs, tl.flip(x, 1), mask=rows[:, None] < M)


@triton.jit
def sort_keys_kernel(key_ptr, sorted_ptr, pos_ptr, n, N: tl.constexpr):
    # keys (< 0xFFFF) packed above their positions: one sort orders by key, then by position
    offs = tl.arange(0, N)
    key = tl.load(key_ptr + offs, mask=offs < n, other=0xFFFF).to(tl.uint32)
    packed = tl.sort((key << 16) | offs.to(tl.uint32))
    tl.store(sorted_ptr + offs, (packed >> 16).to(tl.int32), mask=offs < n)
    tl.store(pos_ptr + offs, (packed & 0xFFFF).to(tl.int32), mask=offs < n)
