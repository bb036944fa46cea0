"""Kernel-body idioms of real Triton libraries (issue 30), ours: 0-d tensors with a reduction's result, `is None` on a pointer, annotated locals, a reduction of a reduction."""

import triton
import triton.language as tl
from triton.language import core
from triton.language.standard import _log2, zeros_like


@triton.jit
def rms_scale_kernel(x_ptr, out_ptr, n, eps, N: tl.constexpr, EPS: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / n
    # 0-d tensors from tl.full / tl.zeros, mixed with the 0-d sum and with Python numbers
    e = tl.full((), EPS, tl.float32)
    r = tl.rsqrt(ms + e + tl.full((), eps, tl.float32))
    z = tl.zeros((), tl.float32)
    r = tl.maximum(r, z) * 1.0 + (e - EPS)
    tl.store(out_ptr + offs, x * r, mask=offs < n)


@triton.jit
def bias_act_kernel(x_ptr, bias_ptr, res_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offs, mask=mask, other=0.0)
    if res_ptr is None:
        x = tl.maximum(x, 0.0)
    else:
        x += tl.load(res_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def annotated_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    dt: tl.dtype = out_ptr.dtype.element_ty
    offs: tl.tensor = tl.arange(0, BLOCK)
    scale: tl.constexpr = 0.5
    shift: float = 1.0
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (x * scale + shift).to(dt), mask=mask)


@triton.jit
def decode_scores_kernel(q_ptr, k_ptr, out_ptr, L: tl.constexpr, D: tl.constexpr):
    d = tl.arange(0, D)
    rows = tl.arange(0, L)
    q = tl.load(q_ptr + d)
    k = tl.load(k_ptr + rows[:, None] * D + d[None, :])
    qk = tl.sum(q[None, :] * k, 1)
    m = tl.max(qk, 0)
    p = tl.exp(qk - m)
    tl.store(out_ptr + rows, p / tl.sum(p, 0))


@triton.jit
def center_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    mean = tl.sum(x, axis=0) / n
    # a 0-d value indexed with None and expanded: a block of one, as in Triton
    lo = tl.expand_dims(tl.min(x, axis=0), 0)
    y = x - mean[None] - lo + tl.where(mean > 0, mean, tl.full((), 0.0, tl.float32))
    tl.store(out_ptr + offs, y, mask=offs < n)


@triton.jit
def zero_d_ops_kernel(x_ptr, out_ptr, flag_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    one = tl.full((), 1, tl.int32)
    half = tl.full((), 0.5, tl.float32)
    s = tl.max(x, axis=0)
    t = tl.exp(-half) * s + one
    y = tl.where(x > half, x, half) + t.to(tl.float16) + tl.minimum(half, s)
    tl.store(out_ptr + offs, y, mask=offs < n)
    tl.store(flag_ptr, (s > half).to(tl.int32) + one + tl.zeros((), tl.int32))


@triton.jit
def tile_sum_kernel(x_ptr, out_ptr, TILES: tl.constexpr, N: tl.constexpr,
                    acc_dtype: tl.constexpr = tl.float32, FLAT: tl.constexpr = True):
    # a builtin range's keywords are evaluated and ignored (Triton's visit_For), and a dtype default
    offs = tl.arange(0, N)
    acc = tl.zeros((N,), dtype=acc_dtype)
    for t in range(TILES, flatten=FLAT):
        acc += tl.load(x_ptr + t * N + offs).to(acc_dtype)
    tl.store(out_ptr + offs, acc)


@triton.jit
def lowest_of(dtype):
    # a dtype argument arrives as a constexpr: `.value` is the dtype, whose probes fold
    dt = dtype.value
    if dt.is_floating():
        low: tl.constexpr = float("-inf")
        return low
    if dt.is_int_signed():
        bits: tl.constexpr = dt.int_bitwidth
        low: tl.constexpr = -(2 ** (bits - 1))
        return low


@triton.jit
def masked_peak_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=lowest_of(x_ptr.dtype.element_ty))
    peak = tl.max(x, axis=0)
    if tl.constexpr(x.dtype.is_int64() or x.dtype.is_uint8()):
        peak = peak * 2
    tl.store(out_ptr, peak)


@triton.jit
def strided_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # tl.range's bounds given by keyword
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in tl.range(0, n, step=BLOCK):
        acc += tl.load(x_ptr + start + offs, mask=start + offs < n, other=0.0)
    for i in tl.range(2, step=1):
        acc = acc * 0.5
    tl.store(out_ptr + offs, acc)


@triton.jit
def core_names_kernel(x_ptr, out_ptr, N: core.constexpr):
    # tl's names read through triton.language.core, where they are defined
    acc = tl.zeros((N,), dtype=core.float32)
    for i in core.static_range(_log2(N) - 4):  # Triton's own constexpr helper: log2(64) - 4 = 2
        acc += tl.load(x_ptr + i * N + tl.arange(0, N))
    acc = tl.maximum(acc, zeros_like(acc))
    tl.store(out_ptr + tl.arange(0, N), acc / (acc.numel >> 5))  # tensor.numel: a constexpr, 64


@triton.jit
def sign_flip_kernel(x_ptr, out_ptr, N: tl.constexpr):
    # bit-level work on floats through the integer type of their width, as bitonic sorters do
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    ity = tl.core.get_int_dtype(bitwidth=x.dtype.primitive_bitwidth, signed=True)
    uty = triton.language.core.get_int_dtype(x.dtype.primitive_bitwidth, False)
    bits = x.to(ity, bitcast=True)
    top = (bits.to(uty, bitcast=True) >> (x.dtype.primitive_bitwidth - 1)).to(ity)
    sign = tl.full((N,), 1, ity) << (x.dtype.primitive_bitwidth - 1)
    flipped = tl.where(top != 0, ~bits, bits ^ sign)  # the order-preserving integer key of a float
    tl.static_assert(tl.core.get_int_dtype(1, True) == tl.int1)
    tl.store(out_ptr + offs, flipped.to(x.dtype, bitcast=True))


@triton.jit
def compare_numbers_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    # a comparison makes a tensor of the Python number first: fp16 > 0.5 compares in fp32, int16 != 0 in int32
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    keep = (x > 0.5) & (y != 0) & (x == 1) & (0 < y)
    tl.store(out_ptr + offs, tl.where(keep, x, x * 2))
