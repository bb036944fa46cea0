# Backend GPU tests beyond reductions: scans, trans/reshape, while/if, atomics, libdevice math.

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def scan_kernel(out_ptr, rs_ptr, c1_ptr, in_ptr, n, M: tl.constexpr, N: tl.constexpr, BLOCK: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    x = tl.load(in_ptr + offs)
    cs = tl.cumsum(x, axis=1)
    tl.store(out_ptr + offs, cs)
    rs = tl.associative_scan(cs, 0, max_combine, reverse=True)
    tl.store(rs_ptr + offs, rs)
    r = tl.arange(0, BLOCK)
    v = tl.load(in_ptr + r, mask=r < n, other=0.0)
    tl.store(c1_ptr + r, tl.cumsum(v, axis=0), mask=r < n)


@triton.jit
def affine_combine(a1, b1, a2, b2):
    """(a1, b1) then (a2, b2) of maps x -> a * x + b: not commutative, so the scan's order shows."""
    return a1 * a2, b1 * a2 + b2


@triton.jit
def scan_long_kernel(x_ptr, y_ptr, cs_ptr, rev_ptr, aff_ptr, BLOCK: tl.constexpr):
    """Scans of one long line (more segments than a warp has lanes): cumsum forward and reverse,
    and an affine-map scan of (y, x) pairs whose result depends on the order of combination."""
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    tl.store(cs_ptr + r, tl.cumsum(x, axis=0))
    tl.store(rev_ptr + r, tl.cumsum(x, axis=0, reverse=True))
    _, b = tl.associative_scan((y, x), 0, affine_combine)
    tl.store(aff_ptr + r, b)


@triton.jit
def scan_block_kernel(x_ptr, y_ptr, fwd_ptr, rev_ptr, aff_ptr, raff_ptr, M: tl.constexpr, N: tl.constexpr):
    """Scans of an (M, N) block along both axes: cumsum forward along rows, reverse along columns;
    affine maps forward along columns, reverse along rows."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(fwd_ptr + offs, tl.cumsum(x, axis=1))
    tl.store(rev_ptr + offs, tl.cumsum(x, axis=0, reverse=True))
    _, b = tl.associative_scan((y, x), 0, affine_combine)
    tl.store(aff_ptr + offs, b)
    _, rb = tl.associative_scan((y, x), 1, affine_combine, reverse=True)
    tl.store(raff_ptr + offs, rb)


@triton.jit
def scan_slice_kernel(x_ptr, sl_ptr, M: tl.constexpr, N: tl.constexpr):
    """A cumsum of an (M, N) block's row sums: a scan of a slice layout."""
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(sl_ptr + tl.arange(0, M), tl.cumsum(tl.sum(tl.load(x_ptr + offs), axis=1), axis=0))


@triton.jit
def scan_int_kernel(x_ptr, fwd_ptr, rev_ptr, BLOCK: tl.constexpr):
    """Integer scans (exact): a cumsum forward and a running maximum from the end."""
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r)
    tl.store(fwd_ptr + r, tl.cumsum(x, axis=0))
    tl.store(rev_ptr + r, tl.associative_scan(x, 0, max_combine, reverse=True))


@triton.jit
def shapes_kernel(p, q, n, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(p + r[:, None] * B + r[None, :])
    acc = tl.reshape(tl.trans(x), (B * B,))
    i = n
    while i > 0:
        acc = acc * 0.5
        i = i - 1
    s = n * 2 if n > 0 else n + 1
    tl.store(q + tl.arange(0, B * B), acc + s)


@triton.jit
def atomics_kernel(counts_ptr, olds_ptr, ticket_ptr, tickets_ptr, B: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.arange(0, B)
    old = tl.atomic_add(counts_ptr + r, 1)
    tl.store(olds_ptr + pid * B + r, old)
    t = tl.atomic_add(ticket_ptr, 1)
    tl.store(tickets_ptr + pid, t)


@triton.jit
def float_minmax_kernel(out_ptr, olds_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """out[0..3] = max over the x with index % 4 == j, out[4..7] = min; olds gets each atomic_max's
    old value (Triton's float atomics: signed/unsigned integer atomics by the sign bit)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    old = tl.atomic_max(out_ptr + offs % 4, x, mask=m)
    tl.store(olds_ptr + offs, old, mask=m)
    tl.atomic_min(out_ptr + 4 + offs % 4, x, mask=m)


@triton.jit
def half_atomic_add_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """out[j] += every x with index % 8 == j (fp16 / bf16 tl.atomic_add: Triton 3.6 allows add only
    on 16-bit floats); out[8] += each program's fp32 block sum, rounded to out's dtype."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(out_ptr + offs % 8, x, mask=m)
    tl.atomic_add(out_ptr + 8, tl.sum(x.to(tl.float32), 0).to(out_ptr.dtype.element_ty))


@triton.jit
def math_kernel(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.sin(x) + 2.0 * tl.cos(x) + 3.0 * tl.math.erf(x) + tl.rsqrt(tl.abs(x) + 1.0) + tl.sqrt(tl.abs(x))
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def axpb_kernel(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
    # `offs < n` with n of unknown divisibility: not uniform over a 4-element chunk
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    tl.store(y_ptr + offs, 3.0 * x - 1.0, mask=m)


@triton.jit
def reshape_kernel(p, rows, out, BLOCK: tl.constexpr, R: tl.constexpr):
    # 1-D -> 2-D -> 3-D -> 1-D: each tt.reshape gets the layouts Triton infers from each other
    x = tl.load(p + tl.arange(0, BLOCK))
    m = tl.reshape(x, (R, BLOCK // R))
    tl.store(rows + tl.arange(0, R), tl.sum(m, axis=1))
    c = tl.reshape(m, (2, R // 2, BLOCK // R))
    tl.store(out + tl.arange(0, BLOCK), tl.reshape(c * 2.0, (BLOCK,)))


@triton.jit
def histogram_kernel(x_ptr, out_ptr, masked_ptr, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    # tl.histogram with and without a mask; BINS < 32 is padded to 32 slots, as Triton does
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r, mask=r < n, other=0)
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS))
    tl.store(masked_ptr + tl.arange(0, BINS), x.histogram(BINS, mask=r < n))


@triton.jit
def join_split_kernel(x_ptr, y_ptr, inter_ptr, lo_ptr, hi_ptr, M: tl.constexpr, N: tl.constexpr):
    # tl.join / tl.interleave (join + reshape) and the split of a permuted reshape, as tutorial 09's
    # subtiled epilogue does: each gets the layouts Triton infers, a renaming of registers
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rm * N + rn)
    y = tl.load(y_ptr + rm * N + rn)
    tl.store(inter_ptr + rm * (2 * N) + tl.arange(0, 2 * N)[None, :], tl.interleave(x, y * 2.0))
    halves = tl.permute(tl.reshape(x + y, (M, 2, N // 2)), (0, 2, 1))
    lo, hi = tl.split(halves)
    rh = tl.arange(0, N // 2)[None, :]
    tl.store(lo_ptr + rm * (N // 2) + rh, lo)
    tl.store(hi_ptr + rm * (N // 2) + rh, hi)


@triton.jit
def libdevice_kernel(y_ptr, x_ptr, c_ptr, i_ptr, n, BLOCK: tl.constexpr):
    """libdevice beyond tl.math (issue 12): asin, erfinv, cbrt, hypot with a number, clz, isnan."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.5)
    y = libdevice.asin(x) + libdevice.erfinv(x) + libdevice.cbrt(x * 8.0) + libdevice.hypot(x, 3.0)
    tl.store(y_ptr + offs, y, mask=m)
    i = tl.load(i_ptr + offs, mask=m, other=1)
    tl.store(c_ptr + offs, libdevice.clz(i) + libdevice.isnan(x), mask=m)


@triton.jit
def inline_asm_kernel(y_ptr, z_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """tl.inline_asm_elementwise (issue 12): one and two results per element, a broadcast number,
    and the PDL calls (no-ops in a launch without programmatic dependent launch)."""
    tl.extra.cuda.gdc_wait()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.inline_asm_elementwise("fma.rn.f32 $0, $1, $2, $1;", "=f,f,f", [x, 3.0], dtype=tl.float32,
                                  is_pure=True, pack=1)
    lo, hi = tl.inline_asm_elementwise("mov.b64 {$0, $1}, $2;", "=r,=r,l", [offs.to(tl.int64) << 32],
                                       dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(y_ptr + offs, y, mask=m)
    tl.store(z_ptr + offs, hi - lo, mask=m)


@triton.jit
def inline_asm_packed_kernel(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """tl.inline_asm_elementwise with pack = 4 on int8: four bytes share one 32-bit register
    (Triton's packing), each incremented by one."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.inline_asm_elementwise("add.u32 $0, $1, 0x01010101;", "=r,r", [x], dtype=tl.int8,
                                  is_pure=True, pack=4)
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def block_ptr_if_kernel(out_ptr, x_ptr, flag, n, BLOCK: tl.constexpr):
    """A block pointer advanced in one branch of a runtime `if` (issue 12): the load after the
    `if` reads the second block when `flag` is set."""
    p = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    if flag != 0:
        p = tl.advance(p, (BLOCK,))
    else:
        p = tl.advance(p, (0,))
    x = tl.load(p, boundary_check=(0,), padding_option="zero")
    tl.store(out_ptr + tl.arange(0, BLOCK), x)


@triton.jit
def block_ptr_rebind_kernel(out_ptr, x_ptr, y_ptr, flag, n, m, BLOCK: tl.constexpr):
    """A block pointer rebound in a runtime `if` to another block pointer (issue 12: another base,
    shape and offset): the load after the `if` reads x[0:BLOCK] (n elements), or y[1:1 + BLOCK]
    (m elements) when `flag` is set; out-of-bounds elements zero."""
    p = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    if flag != 0:
        p = tl.make_block_ptr(y_ptr, shape=(m,), strides=(1,), offsets=(1,), block_shape=(BLOCK,), order=(0,))
    x = tl.load(p, boundary_check=(0,), padding_option="zero")
    tl.store(out_ptr + tl.arange(0, BLOCK), x)


@triton.jit
def block_ptr_loop_rebind_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    """out[j] = sum over blocks i of x[i * BLOCK + j] (zero past n): the block pointer rebound in
    the loop to the next block's (its base and shape change, its offset stays 0), so the loop
    carries the base and the shape."""
    p = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, tl.cdiv(n, BLOCK)):
        acc += tl.load(p, boundary_check=(0,), padding_option="zero")
        p = tl.make_block_ptr(x_ptr + (i + 1) * BLOCK, shape=(n - (i + 1) * BLOCK,), strides=(1,), offsets=(0,),
                              block_shape=(BLOCK,), order=(0,))
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@triton.jit
def dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                      KA: tl.constexpr, KB: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr,
                      FAST: tl.constexpr):
    """C[M, N] = dot_scaled(A, A's scales, FA, B, B's scales, FB): A is [M, KA] (KA = K / 2 for
    packed e2m1), B [KB, N], the scales [M, K / 32] and [N, K / 32], one program, row-major."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rs = tl.arange(0, K // 32)
    a = tl.load(a_ptr + rm[:, None] * KA + tl.arange(0, KA)[None, :])
    b = tl.load(b_ptr + tl.arange(0, KB)[:, None] * N + rn[None, :])
    a_scale = tl.load(as_ptr + rm[:, None] * (K // 32) + rs[None, :])
    b_scale = tl.load(bs_ptr + rn[:, None] * (K // 32) + rs[None, :])
    c = tl.dot_scaled(a, a_scale, FA, b, b_scale, FB, fast_math=FAST)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@triton.jit
def dot_scaled_batched_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, BATCH: tl.constexpr, M: tl.constexpr,
                              N: tl.constexpr, K: tl.constexpr):
    """C[i] = dot_scaled(A[i], "e2m1", B[i], "e4m3") for i < BATCH, as one rank-3 dot: A [BATCH, M,
    K / 2] packed along K, B [BATCH, K, N], the scales [M, K / 32] and [N, K / 32] shared by every
    batch (Triton 3.6's scale shape for rank 3), row-major."""
    rb = tl.arange(0, BATCH)[:, None, None]
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rs = tl.arange(0, K // 32)
    a = tl.load(a_ptr + rb * (M * K // 2) + rm[None, :, None] * (K // 2) + tl.arange(0, K // 2)[None, None, :])
    b = tl.load(b_ptr + rb * (K * N) + tl.arange(0, K)[None, :, None] * N + rn[None, None, :])
    a_scale = tl.load(as_ptr + rm[:, None] * (K // 32) + rs[None, :])
    b_scale = tl.load(bs_ptr + rn[:, None] * (K // 32) + rs[None, :])
    c = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e4m3")
    tl.store(c_ptr + rb * (M * N) + rm[None, :, None] * N + rn[None, None, :], c)


@triton.jit
def dot_scaled_mn_packed_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                                K: tl.constexpr):
    """C = dot_scaled(A, "e2m1", B, "e2m1") with A [M / 2, K] packed along M and B [K, N / 2] packed
    along N (lhs_k_pack / rhs_k_pack False), the scales [M, K / 32] and [N, K / 32], row-major."""
    rs = tl.arange(0, K // 32)
    a = tl.load(a_ptr + tl.arange(0, M // 2)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * (N // 2) + tl.arange(0, N // 2)[None, :])
    a_scale = tl.load(as_ptr + tl.arange(0, M)[:, None] * (K // 32) + rs[None, :])
    b_scale = tl.load(bs_ptr + tl.arange(0, N)[:, None] * (K // 32) + rs[None, :])
    c = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e2m1", lhs_k_pack=False, rhs_k_pack=False)
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


@triton.jit
def dot_nvfp4_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """NVFP4 (tutorial 10's default format): e2m1 A [M, K / 2] and B [K / 2, N] packed along K, one
    fp8 e4m3 scale per 16 elements along K ([M, K / 16], [N, K / 16])."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rs = tl.arange(0, K // 16)
    a = tl.load(a_ptr + rm[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K // 2)[:, None] * N + rn[None, :])
    a_scale = tl.load(as_ptr + rm[:, None] * (K // 16) + rs[None, :])
    b_scale = tl.load(bs_ptr + rn[:, None] * (K // 16) + rs[None, :])
    c = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e2m1")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@triton.jit
def standard_ops_kernel(x_ptr, sm_ptr, flat_ptr, i_ptr, xs_ptr, M: tl.constexpr, N: tl.constexpr):
    """tl.softmax (Triton's standard library form: max widens fp16 to fp32), tl.ravel, tl.xor_sum."""
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rm * N + rn)
    tl.store(sm_ptr + rm * N + rn, tl.softmax(x, dim=1, keep_dims=True))
    tl.store(flat_ptr + tl.arange(0, M * N), tl.ravel(x * 2))
    i = tl.load(i_ptr + rm * N + rn)
    tl.store(xs_ptr + tl.arange(0, M), i.xor_sum(1))


@triton.jit
def desc_gather_kernel(x_ptr, out_ptr, dst_ptr, idx_ptr, M, N, y, R: tl.constexpr, W: tl.constexpr):
    # desc.gather / desc.scatter (rows by index, a column window; bounds-checked on both)
    src = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [1, W])
    dst = tl.make_tensor_descriptor(dst_ptr, [M, N], [N, 1], [1, W])
    rows = tl.load(idx_ptr + tl.arange(0, R))
    g = src.gather(rows, y)
    tl.store(out_ptr + tl.arange(0, R)[:, None] * W + tl.arange(0, W)[None, :], g)
    dst.scatter(g * 2.0, rows, y)


@triton.jit
def tma_tile_kernel(in_desc, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """out[tile] = in[tile] + 1 for the tile at program (i, j) of a host descriptor: one TMA load
    outside any loop (ttbuild.backend.ttgir.tma_lowering), read back through its swizzle;
    elements past (M, N) load as zeros, and the whole block is written (out is padded)."""
    i = tl.program_id(0) * BM
    j = tl.program_id(1) * BN
    x = in_desc.load([i, j])
    rm = i + tl.arange(0, BM)
    rn = j + tl.arange(0, BN)
    tl.store(out_ptr + rm[:, None] * (tl.num_programs(1) * BN) + rn[None, :], x + 1)


@triton.jit
def _reduce_tile(desc, i, j, x, OP: tl.constexpr):
    if OP == "add":
        desc.atomic_add([i, j], x)
    elif OP == "min":
        desc.atomic_min([i, j], x)
    elif OP == "max":
        desc.atomic_max([i, j], x)
    elif OP == "and":
        desc.atomic_and([i, j], x)
    elif OP == "or":
        desc.atomic_or([i, j], x)
    else:
        desc.atomic_xor([i, j], x)


@triton.jit
def _tile_of(x_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """Program (i, j, k)'s tile of x [K, H, W] (H, W the grid's tiles): its slice k at (i, j)."""
    i = tl.program_id(0) * BM
    j = tl.program_id(1) * BN
    w = tl.num_programs(1) * BN
    h = tl.num_programs(0) * BM
    rm = i + tl.arange(0, BM)
    rn = j + tl.arange(0, BN)
    return i, j, tl.load(x_ptr + tl.program_id(2) * h * w + rm[:, None] * w + rn[None, :])


@triton.jit
def tma_reduce_kernel(out_desc, x_ptr, BM: tl.constexpr, BN: tl.constexpr, OP: tl.constexpr):
    """desc.atomic_<OP> of a host descriptor: the programs of one (i, j) (program_id(2) = 0,
    1, ...) each reduce their slice's tile into out's block at (i, j), through TMA on sm_90;
    elements past out's extent are skipped."""
    i, j, x = _tile_of(x_ptr, BM, BN)
    _reduce_tile(out_desc, i, j, x, OP)


@triton.jit
def tma_reduce_made_kernel(y_ptr, x_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, OP: tl.constexpr):
    """As tma_reduce_kernel, through a descriptor the kernel makes (its tensormap written in the
    program's global scratch, with the element type's signedness)."""
    desc = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    i, j, x = _tile_of(x_ptr, BM, BN)
    _reduce_tile(desc, i, j, x, OP)
