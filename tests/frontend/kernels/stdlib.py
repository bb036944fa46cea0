# Smaller standard-library functions: tl.reduce_or, tl.cat, tl.add/sub/mul, tl.swizzle2d and
# tl.TRITON_MAX_TENSOR_NUMEL, each in the form kernels use it.

import triton
import triton.language as tl


@triton.jit
def any_flag_kernel(flags_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    # one row's flags or-ed together, and one column's, as bit sets
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    flags = tl.load(flags_ptr + offs)
    tl.store(out_ptr + tl.arange(0, M), tl.reduce_or(flags, 1))
    tl.store(out_ptr + M + tl.arange(0, N), flags.reduce_or(0))


@triton.jit
def cat_sum_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    # cat may reorder, so only an order-free use of it: the total of both blocks
    a = tl.load(a_ptr + tl.arange(0, N))
    b = tl.load(b_ptr + tl.arange(0, N))
    tl.static_assert(N * 2 <= tl.TRITON_MAX_TENSOR_NUMEL)
    tl.store(out_ptr, tl.sum(tl.cat(a, b, can_reorder=True), 0))


@triton.jit
def arith_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    r = tl.add(x, y) * 3
    r = tl.sub(r, tl.mul(x, 2, sanitize_overflow=False))
    tl.store(out_ptr + offs, tl.add(r, tl.mul(2, 3)))


@triton.jit
def grouped_tile_kernel(out_ptr, M, N, GROUP: tl.constexpr):
    # the tile this program computes when programs walk groups of GROUP tile rows column-first
    pid = tl.program_id(0)
    pid_m, pid_n = tl.swizzle2d(pid // N, pid % N, M, N, GROUP)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


@triton.jit
def noise_kernel(out_ptr, wide_ptr, seed, N: tl.constexpr):
    # two normal samples per counter pair, from the Philox words of counters made from the offsets
    offs = tl.arange(0, N)
    r0, r1, _, _ = tl.philox(seed, offs, offs + tl.program_id(0) * N, offs ^ 5, offs * 3)
    z0, z1 = tl.pair_uniform_to_normal(tl.uint_to_uniform_float(r0), tl.uint_to_uniform_float(r1))
    tl.store(out_ptr + offs, z0 + z1)
    k0, k1, _, _ = tl.philox_impl(r0, r1, r0 ^ r1, r1, seed.to(tl.uint32), (seed + 7).to(tl.uint32), n_rounds=4)
    tl.store(wide_ptr + offs, tl.uint_to_uniform_float((k0.to(tl.uint64) << 32) | k1))
