# Bitonic standard-library functions (tl.sort, tl.topk, tl.flip, tl.bitonic_merge) on 1-D and
# 2-D blocks; each kernel loads a block, applies one function, and stores the whole result.

import triton
import triton.language as tl


@triton.jit
def sort_rows_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.sort(x, descending=DESC))


@triton.jit
def sort_vector_kernel(x_ptr, y_ptr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.sort(x, 0, DESC))


@triton.jit
def sort_packed_kernel(key_ptr, pos_ptr, key_out_ptr, base_ptr, n, N: tl.constexpr):
    # sort (key, position) pairs packed in one uint32: key in the high half, position in the low;
    # then a per-key base offset is read through the unsigned sorted keys (ptr + uint32 block)
    offs = tl.arange(0, N)
    key = tl.load(key_ptr + offs, mask=offs < n, other=0xFFFF).to(tl.uint32)
    packed = tl.sort(((key << 16) | offs).to(tl.uint32), 0)
    sorted_key = packed >> 16
    base = tl.load(base_ptr + sorted_key, mask=sorted_key != 0xFFFF, other=-1)
    tl.store(key_out_ptr + offs, sorted_key.to(tl.int32) + base)
    tl.store(pos_ptr + offs, (packed & 0xFFFF).to(tl.int32))


@triton.jit
def topk_rows_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    top = tl.topk(x, K)
    tl.store(y_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], top)


@triton.jit
def flip_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, x.flip(DIM))


@triton.jit
def merge_halves_kernel(x_ptr, y_ptr, N: tl.constexpr, DESC: tl.constexpr):
    # the first half ascending and the second descending form a bitonic sequence
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.bitonic_merge(x, descending=DESC))


@triton.jit
def sort_columns_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(y_ptr + offs, tl.sort(tl.load(x_ptr + offs), dim=0))
