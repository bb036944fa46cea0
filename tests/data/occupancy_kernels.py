"""Our norm-style kernels whose CTAs per SM fell below Triton's build under the llir stage's register cap (issue 31): a one-row norm, a chunked group statistic, a grid-stride backward."""

import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt, tanh


@triton.jit
def row_norm_fwd(out_ptr, out_stride, in_ptr, in_stride, gain_ptr, bias_ptr, mu_ptr, inv_ptr, width, eps,
                 BLOCK: tl.constexpr):
    # One program per row: out = (x - mean(x)) / sqrt(var(x) + eps) * gain + bias; mean and 1/std kept
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    inside = offs < width
    g = tl.load(gain_ptr + offs, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + offs, mask=inside, other=0.0).to(tl.float32)
    v = tl.load(in_ptr + row * in_stride + offs, mask=inside, other=0.0)
    x = v.to(tl.float32)
    mu = tl.sum(x, axis=0) / width
    d = tl.where(inside, x - mu, 0.0)
    inv = rsqrt(tl.sum(d * d, axis=0) / width + eps)
    tl.store(mu_ptr + row, mu.to(v.dtype))
    tl.store(inv_ptr + row, inv.to(v.dtype))
    tl.store(out_ptr + row * out_stride + offs, ((x - mu) * inv * g + b).to(v.dtype), mask=inside)


@triton.jit
def group_stat_fwd(out_ptr, in_ptr, gain_ptr, bias_ptr, stat_ptr, n_elem, per_group, eps, BLOCK: tl.constexpr):
    # One program per (sample, group) of n_elem contiguous values: sums first, then normalize with a
    # gain and bias per channel (per_group channels share the group)
    sample = tl.program_id(0)
    group = tl.program_id(1)
    base = (sample * tl.num_programs(1) + group) * n_elem
    lanes = tl.arange(0, BLOCK)
    total = 0.0
    total_sq = 0.0
    for start in tl.range(0, n_elem, BLOCK):
        idx = start + lanes
        x = tl.load(in_ptr + base + idx, mask=idx < n_elem, other=0.0)
        total += tl.sum(x)
        total_sq += tl.sum(x * x)
    mean = total / n_elem
    inv = rsqrt(total_sq / n_elem - mean * mean + eps)
    per_channel = n_elem // per_group
    for start in tl.range(0, n_elem, BLOCK):
        idx = start + lanes
        ok = idx < n_elem
        x = tl.load(in_ptr + base + idx, mask=ok, other=mean)
        ch = group * per_group + idx // per_channel
        g = tl.load(gain_ptr + ch, mask=ok)
        b = tl.load(bias_ptr + ch, mask=ok)
        tl.store(out_ptr + base + idx, (x - mean) * inv * g + b, mask=ok)
    tl.store(stat_ptr + sample * tl.num_programs(1) + group, mean)


@triton.jit
def tanh_scale_bwd(grad_out, grad_in, part_scale, part_gain, part_shift, inp, scale_ptr, gain_ptr, rows,
                   WITH_SHIFT: tl.constexpr, WIDTH: tl.constexpr, BLOCK: tl.constexpr):
    # Grid (WIDTH / BLOCK, programs): program (c, p) walks rows p, p + programs, ... of column block c,
    # y = tanh(s * x) * gain (+ shift): writes dx and keeps per-program partial sums of ds, dgain, dshift
    cols = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < WIDTH
    first = tl.program_id(1).to(tl.int64)
    s = tl.load(scale_ptr).to(tl.float32)
    gain = tl.load(gain_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    ds = 0.0
    dgain = tl.zeros((BLOCK,), dtype=tl.float32)
    if WITH_SHIFT:
        dshift = tl.zeros((BLOCK,), dtype=tl.float32)
    for r in range(first, rows, tl.num_programs(1)):
        x = tl.load(inp + r * WIDTH + cols, mask=ok, other=0.0).to(tl.float32)
        g = tl.load(grad_out + r * WIDTH + cols, mask=ok, other=0.0).to(tl.float32)
        t = tanh(s * x)
        if WITH_SHIFT:
            dshift += g
        dgain += g * t
        inner = (1 - t * t) * g * gain
        ds += tl.sum(x * inner, 0)
        tl.store(grad_in + r * WIDTH + cols, s * inner, mask=ok)
    tl.store(part_gain + first * WIDTH + cols, dgain, mask=ok)
    if WITH_SHIFT:
        tl.store(part_shift + first * WIDTH + cols, dshift, mask=ok)
    tl.store(part_scale + first * tl.num_programs(0) + tl.program_id(0), ds)
