"""Test-only GPU kernels (tests/data/gpu_kernels: 2-D row/column reductions, argmax, shapes, atomics, libdevice math) against torch, poisoned outputs (scans: test_gpu_scan.py).

Artifacts: `$TTBUILD_TEST_ARTIFACTS`, else ./build/test-artifacts when present (both written on a
CPU machine by `python tests/gpu/build_test_artifacts.py DIR`: the GPU machine has no MLIR), else
built here into a temporary directory. The tutorial kernels of kernels/ are tested in tests/gpu.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
KERNELS = Path(__file__).parents[1] / "data" / "gpu_kernels"


def prebuilt_test_artifacts() -> str | None:
    """Prebuilt artifacts of the test-only kernels, or None to build them here."""
    d = os.environ.get("TTBUILD_TEST_ARTIFACTS")
    default = Path(__file__).parents[2] / "build" / "test-artifacts"
    return d or (str(default) if (default / "lib").is_dir() else None)



@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(scope="module")
def lib(torch, tmp_path_factory):
    import ttbuild.runtime as rt

    art = prebuilt_test_artifacts()
    if art is None:
        art = str(tmp_path_factory.mktemp("art"))
        subprocess.run([sys.executable, "-m", "ttbuild", "build", str(KERNELS), "-o", art, "--cache", "off"],
                       check=True)
    return rt.load(art)


def _cdiv(a, b):
    return -(-a // b)


# (variant, BM, M, N, stride)
ROWS = [("rows_32x64", 32, 50, 60, 61), ("rows_32x64", 32, 64, 64, 64), ("rows_16x256_aligned", 16, 40, 240, 256)]


@pytest.mark.parametrize("variant,bm,M,N,stride", ROWS)
def test_row_sums_expand_dims_broadcast(torch, lib, variant, bm, M, N, stride):
    gen = torch.Generator(device="cuda").manual_seed(M * N)
    x = torch.randn(M, stride, device="cuda", generator=gen)
    out = torch.full((M + 1, stride), float("nan"), device="cuda")
    sums = torch.full((M + 1,), float("nan"), device="cuda")
    lib.variant(variant)[(_cdiv(M, bm),)](out, sums, x, M, N, stride)
    torch.cuda.synchronize()
    s = x[:, :N].double().sum(dim=1)
    torch.testing.assert_close(sums[:M].double(), s, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[:M, :N].double(), x[:, :N].double() - s[:, None] / N, rtol=1e-5, atol=1e-5)
    assert torch.isnan(out[:M, N:]).all() and torch.isnan(out[M:]).all() and torch.isnan(sums[M:]).all()


# (variant, BM, BN, M, N, stride): column reductions; cols_16x256 stores through a layout conversion
COLS = [("cols_64x32", 64, 32, 50, 100, 112), ("cols_64x32", 64, 32, 64, 32, 32),
        ("cols_16x256", 16, 256, 13, 600, 608)]


@pytest.mark.parametrize("variant,bm,bn,M,N,stride", COLS)
def test_column_max_and_sum(torch, lib, variant, bm, bn, M, N, stride):
    gen = torch.Generator(device="cuda").manual_seed(M + N)
    x = torch.randn(M, stride, device="cuda", generator=gen)
    cmax = torch.full((N + 4,), float("nan"), device="cuda")
    csum = torch.full((N + 4,), float("nan"), device="cuda")
    lib.variant(variant)[(_cdiv(N, bn),)](cmax, csum, x, M, N, stride)
    torch.cuda.synchronize()
    torch.testing.assert_close(cmax[:N], x[:, :N].max(dim=0).values)
    torch.testing.assert_close(csum[:N].double(), x[:, :N].double().sum(dim=0), rtol=1e-5, atol=1e-5)
    assert torch.isnan(cmax[N:]).all() and torch.isnan(csum[N:]).all()


@pytest.mark.parametrize("M,N,stride", [(20, 100, 112), (8, 128, 128), (3, 1, 16)])
def test_argmax_rows(torch, lib, M, N, stride):
    gen = torch.Generator(device="cuda").manual_seed(M * 3 + N)
    x = torch.randn(M, stride, device="cuda", generator=gen)
    idx = torch.full((M + 1,), -7, device="cuda", dtype=torch.int32)
    lib.variant("argmax_8x128")[(_cdiv(M, 8),)](idx, x, M, N, stride)
    torch.cuda.synchronize()
    assert torch.equal(idx[:M].long(), x[:, :N].argmax(dim=1))
    assert idx[M].item() == -7


@pytest.mark.parametrize("variant,B,n", [("shapes_16", 16, 0), ("shapes_16", 16, 3), ("shapes_16", 16, -2),
                                         ("shapes_128", 128, 2)])  # 128: 64 KB of dynamic shared memory
def test_trans_reshape_while_and_ternary(torch, lib, variant, B, n):
    p = torch.randn(B, B, device="cuda")
    q = torch.full((B * B + 8,), float("nan"), device="cuda")
    lib.variant(variant)[(1,)](p, q, n)
    torch.cuda.synchronize()
    s = n * 2 if n > 0 else n + 1
    ref = p.t().reshape(-1).double() * 0.5 ** max(n, 0) + s
    torch.testing.assert_close(q[:B * B].double(), ref, rtol=1e-6, atol=1e-6)
    assert torch.isnan(q[B * B:]).all()


def test_atomics_once_per_element_and_scalar_once_per_program(torch, lib):
    G, B = 37, 64
    counts = torch.zeros(B, device="cuda", dtype=torch.int32)
    olds = torch.full((G, B), -1, device="cuda", dtype=torch.int32)
    ticket = torch.zeros(1, device="cuda", dtype=torch.int32)
    tickets = torch.full((G,), -1, device="cuda", dtype=torch.int32)
    lib.variant("atomics_64")[(G,)](counts, olds, ticket, tickets)
    torch.cuda.synchronize()
    # 64 elements over 128 threads: duplicate holders must not add twice
    assert counts.tolist() == [G] * B
    assert ticket.item() == G
    # every program saw each old value once, in some order
    assert sorted(tickets.tolist()) == list(range(G))
    for j in range(B):
        assert sorted(olds[:, j].tolist()) == list(range(G))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_atomic_max_and_min(torch, lib, dtype):
    """tl.atomic_max / atomic_min on fp32 and fp64 (Triton's integer-atomic decomposition): the
    extremes of values of both signs, -0.0 and +0.0 and infinities included, and each old value
    is a value the slot held (the start value or one of the inputs)."""
    dt = getattr(torch, dtype)
    n = 3000
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.randn(n, device="cuda", generator=gen, dtype=torch.float64) * 1e3).to(dt)
    x[:8] = torch.tensor([-0.0, 0.0, float("-inf"), float("inf"), -1e-30, 1e-30, -5.0, 5.0], dtype=dt)
    x[4 * 100 + 1] = float("inf")     # slot 1's max is +inf
    x[4 * 200 + 2] = float("-inf")    # slot 2's min is -inf
    start = torch.tensor([-float("inf")] * 4 + [float("inf")] * 4, device="cuda", dtype=dt)
    out = start.clone()
    olds = torch.full((n,), float("nan"), device="cuda", dtype=dt)
    lib.variant(f"float_minmax_fp{dt.itemsize * 8}")[(_cdiv(n, 256),)](out, olds, x, n)
    torch.cuda.synchronize()
    groups = x.view(-1, 4)
    assert torch.equal(out[:4], groups.max(dim=0).values)
    assert torch.equal(out[4:], groups.min(dim=0).values)
    seen = set(x.tolist()) | {float("-inf")}
    assert not torch.isnan(olds).any() and set(olds.tolist()) <= seen


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_atomic_add(torch, lib, dtype):
    """tl.atomic_add on fp16 and bf16 (atom.add.noftz.f16/.bf16): small integers add exactly in
    any order, so each slot equals the sum torch computes; the block sums slot too."""
    dt = getattr(torch, dtype)
    n = 3000
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randint(-3, 4, (n,), device="cuda", generator=gen).to(dt)
    out = torch.zeros(9, device="cuda", dtype=dt)
    lib.variant(f"half_atomic_add_{'fp16' if dt == torch.float16 else 'bf16'}")[(_cdiv(n, 256),)](out, x, n)
    torch.cuda.synchronize()
    sums = x.float().view(-1, 8).sum(dim=0)
    assert torch.equal(out[:8].float(), sums)
    assert out[8].float().item() == x.float().sum().item()


@pytest.mark.parametrize("n", [1000, 5000])
def test_libdevice_math(torch, lib, n):
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(n, device="cuda", generator=gen) * 3
    y = torch.full((n + 4,), float("nan"), device="cuda")
    lib.variant("math_1024")[(_cdiv(n, 1024),)](y, x, n)
    torch.cuda.synchronize()
    xd = x.double()
    ref = torch.sin(xd) + 2 * torch.cos(xd) + 3 * torch.erf(xd) + torch.rsqrt(xd.abs() + 1) + xd.abs().sqrt()
    torch.testing.assert_close(y[:n].double(), ref, rtol=1e-5, atol=1e-5)
    assert torch.isnan(y[n:]).all()


@pytest.mark.parametrize("variant,block", [("axpb_1024", 1024), ("axpb_8192_w1", 8192)])
@pytest.mark.parametrize("n", [1, 1023, 8192, 10003])
def test_a_mask_of_unknown_alignment_loads_and_stores_exactly_the_elements_in_bounds(torch, lib, variant, block, n):
    """Both forms of an access whose mask is not uniform over a 4-element chunk: a branch per
    chunk (vector or scalar path) and, past MAX_BRANCHED_CHUNKS, predicated scalar accesses."""
    x = torch.randn(n, device="cuda")
    y = torch.full((_cdiv(n, block) * block + 4,), float("nan"), device="cuda")
    lib.variant(variant)[(_cdiv(n, block),)](y, x, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(y[:n], 3.0 * x - 1.0)
    assert torch.isnan(y[n:]).all()


def test_reshape_chain_keeps_row_major_order(torch, lib):
    x = torch.randn(512 + 8, device="cuda")
    rows = torch.full((8 + 4,), float("nan"), device="cuda")
    out = torch.full((512 + 8,), float("nan"), device="cuda")
    lib.variant("reshape_512")[(1,)](x, rows, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(rows[:8].double(), x[:512].double().view(8, 64).sum(dim=1), rtol=1e-5, atol=1e-5)
    assert torch.equal(out[:512], x[:512] * 2)
    assert torch.isnan(rows[8:]).all() and torch.isnan(out[512:]).all()


@pytest.mark.parametrize("variant,block,bins,n", [("histogram_1024x64", 1024, 64, 1000),
                                                  ("histogram_1024x64", 1024, 64, 1024),
                                                  ("histogram_64x16", 64, 16, 50)])
def test_histogram_with_and_without_mask(torch, lib, variant, block, bins, n):
    """tl.histogram against torch.bincount; values past the bins land by their low bits, as
    Triton's lowering bins them (log2(max(bins, 32)) bits; slots past `bins` are not returned)."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randint(0, bins, (block,), device="cuda", dtype=torch.int32, generator=gen)
    x[:8] = torch.tensor([bins, bins + 3, 2 * bins, -1, 5, 5, 5, 0], device="cuda", dtype=torch.int32)
    out, masked = (torch.full((bins,), -7, device="cuda", dtype=torch.int32) for _ in range(2))
    lib.variant(variant)[(1,)](x, out, masked, n)
    torch.cuda.synchronize()
    slots = max(bins, 32)
    xs = x[:n].long() & (slots - 1)
    loaded = torch.cat([xs, torch.zeros(block - n, dtype=torch.long, device="cuda")])  # other=0
    assert torch.equal(masked.long(), torch.bincount(xs, minlength=slots)[:bins])
    assert torch.equal(out.long(), torch.bincount(loaded, minlength=slots)[:bins])


def test_histogram_bins_as_tritons_does_out_of_range_values_too(torch, lib, tmp_path):
    """Differential: Triton 3.6 compiles the same kernel source (tests/data/gpu_kernels/misc.py)
    and both count values from -100 to 199 into 64 and 16 bins identically."""
    pytest.importorskip("triton")
    import importlib.util

    spec = importlib.util.spec_from_file_location("misc_kernels", Path(__file__).parents[1] / "data" / "gpu_kernels" / "misc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for variant, block, bins, n in [("histogram_1024x64", 1024, 64, 1000), ("histogram_64x16", 64, 16, 50)]:
        gen = torch.Generator(device="cuda").manual_seed(n)
        x = torch.randint(-100, 200, (block,), device="cuda", dtype=torch.int32, generator=gen)
        theirs, ours = [[torch.zeros(bins, device="cuda", dtype=torch.int32) for _ in range(2)] for _ in range(2)]
        mod.histogram_kernel[(1,)](x, *theirs, n, BLOCK=block, BINS=bins)
        lib.variant(variant)[(1,)](x, *ours, n)
        torch.cuda.synchronize()
        assert torch.equal(theirs[0], ours[0]) and torch.equal(theirs[1], ours[1]), variant


def test_softmax_ravel_and_xor_sum(torch, lib):
    """Triton's standard-library tl.softmax (fp16 in, fp32 out), tl.ravel and tl.xor_sum against torch."""
    M, N = 16, 64
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = (torch.randn(M, N, device="cuda", generator=gen) * 4).half()
    i = torch.randint(-2**31, 2**31 - 1, (M, N), device="cuda", generator=gen, dtype=torch.int32)
    sm = torch.full((M, N), float("nan"), device="cuda")
    flat = torch.full((M * N,), float("nan"), device="cuda", dtype=torch.float16)
    xs = torch.zeros(M, device="cuda", dtype=torch.int32)
    lib.variant("standard_ops_16x64")[(1,)](x, sm, flat, i, xs)
    torch.cuda.synchronize()
    torch.testing.assert_close(sm, torch.softmax(x.float(), dim=1), rtol=1e-5, atol=1e-6)
    assert torch.equal(flat, (x * 2).flatten())
    ref = i[:, 0].clone()
    for k in range(1, N):
        ref ^= i[:, k]
    assert torch.equal(xs, ref)


def test_join_interleave_and_split_of_a_permuted_reshape(torch, lib):
    """tt.join / tt.split with the layouts Triton infers (register renamings) against torch."""
    M, N = 32, 64
    x, y = torch.randn(M, N, device="cuda"), torch.randn(M, N, device="cuda")
    inter = torch.full((M, 2 * N), float("nan"), device="cuda")
    lo, hi = (torch.full((M, N // 2), float("nan"), device="cuda") for _ in range(2))
    lib.variant("join_split_32x64")[(1,)](x, y, inter, lo, hi)
    torch.cuda.synchronize()
    assert torch.equal(inter, torch.stack([x, y * 2.0], dim=-1).reshape(M, 2 * N))
    s = x + y
    assert torch.equal(lo, s[:, : N // 2]) and torch.equal(hi, s[:, N // 2:])


@pytest.mark.parametrize("n", [1000, 5000])
def test_libdevice_namespace(torch, lib, n):
    """Issue 12: libdevice functions tl.math does not have, against torch in float64."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.rand(n, device="cuda", generator=gen) * 1.8 - 0.9  # asin and erfinv need |x| < 1
    ints = torch.randint(1, 2**30, (n,), device="cuda", generator=gen, dtype=torch.int32)
    y = torch.full((n + 4,), float("nan"), device="cuda")
    c = torch.full((n + 4,), -7, device="cuda", dtype=torch.int32)
    lib.variant("libdevice_1024")[(_cdiv(n, 1024),)](y, x, c, ints, n)
    torch.cuda.synchronize()
    xd = x.double()
    ref = torch.asin(xd) + torch.erfinv(xd) + torch.sign(xd) * (8 * xd.abs()) ** (1 / 3) + torch.hypot(xd, torch.tensor(3.0, device="cuda", dtype=torch.float64))
    torch.testing.assert_close(y[:n].double(), ref, rtol=1e-5, atol=1e-5)
    clz = 32 - torch.floor(torch.log2(ints.double())).long() - 1
    assert torch.equal(c[:n].long(), clz)
    assert torch.isnan(y[n:]).all() and (c[n:] == -7).all()


def test_inline_asm_and_pdl_calls(torch, lib):
    """Issue 12: tl.inline_asm_elementwise with one and two results, a broadcast number, and the
    PDL calls (griddepcontrol.*: no-ops in a plain launch)."""
    n = 1000
    x = torch.randn(n, device="cuda")
    y = torch.full((n + 4,), float("nan"), device="cuda")
    z = torch.full((n + 4,), -7, device="cuda", dtype=torch.int32)
    lib.variant("inline_asm_256")[(_cdiv(n, 256),)](y, z, x, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(y[:n], x * 3 + x, rtol=1e-6, atol=1e-6)
    assert torch.equal(z[:n], torch.arange(n, device="cuda", dtype=torch.int32))
    assert torch.isnan(y[n:]).all() and (z[n:] == -7).all()


def test_launch_pdl_back_to_back(torch, lib):
    """launch_pdl=True through cuLaunchKernelEx: a kernel that waits in gdc_wait after one that
    calls gdc_launch_dependents, on one stream; the second reads what the first wrote."""
    n = 1000
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    y2 = torch.full((n,), float("nan"), device="cuda")
    z = torch.zeros(n, device="cuda", dtype=torch.int32)
    k = lib.variant("inline_asm_256")
    for _ in range(3):
        k[(_cdiv(n, 256),)](y, z, x, n, launch_pdl=True)
        k[(_cdiv(n, 256),)](y2, z, y, n, launch_pdl=True)
    torch.cuda.synchronize()
    torch.testing.assert_close(y2, (x * 4) * 4, rtol=1e-5, atol=1e-5)


def test_inline_asm_with_packed_bytes(torch, lib):
    n = 3000
    x = torch.randint(0, 100, (n,), device="cuda", dtype=torch.int8)  # no 0xFF byte: no carry across bytes
    y = torch.full((n + 4,), -7, device="cuda", dtype=torch.int8)
    lib.variant("inline_asm_packed_1024")[(_cdiv(n, 1024),)](y, x, n)
    torch.cuda.synchronize()
    assert torch.equal(y[:n], x + 1) and (y[n:] == -7).all()


@pytest.mark.parametrize("flag", [0, 1])
def test_block_pointer_advanced_in_a_runtime_if(torch, lib, flag):
    n = 400  # the second block is partly out of bounds: zero padding
    x = torch.randn(n, device="cuda")
    out = torch.full((256,), float("nan"), device="cuda")
    lib.variant("block_ptr_if_256")[(1,)](out, x, flag, n)
    torch.cuda.synchronize()
    ref = torch.zeros(256, device="cuda")
    part = x[256 * flag:256 * (flag + 1)]
    ref[:part.numel()] = part
    assert torch.equal(out, ref)


@pytest.mark.parametrize("flag", [0, 1])
def test_block_pointer_rebound_in_a_runtime_if(torch, lib, flag):
    n, m = 200, 300  # each block partly out of bounds: zero padding
    x, y = torch.randn(n, device="cuda"), torch.randn(m, device="cuda")
    out = torch.full((256,), float("nan"), device="cuda")
    lib.variant("block_ptr_rebind_256")[(1,)](out, x, y, flag, n, m)
    torch.cuda.synchronize()
    ref = torch.zeros(256, device="cuda")
    part = y[1:257] if flag else x[:256]
    ref[:part.numel()] = part
    assert torch.equal(out, ref)


def test_block_pointer_rebound_in_a_loop(torch, lib):
    n = 1000  # the last block partly out of bounds: zero padding
    x = torch.randint(-50, 50, (n,), device="cuda").float()
    out = torch.full((128,), float("nan"), device="cuda")
    lib.variant("block_ptr_loop_rebind_128")[(1,)](out, x, n)
    torch.cuda.synchronize()
    ref = torch.nn.functional.pad(x, (0, 1024 - n)).reshape(8, 128).sum(0)
    assert torch.equal(out, ref)


# e2m1 nibble -> value (OCP MX: sign, 2 exponent bits, 1 mantissa bit)
_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _mx_decode(torch, x, fmt, k_axis):
    """A block of one MX format as float64, e2m1 unpacked along K (first element in the low nibble)."""
    if fmt == "e2m1":
        table = torch.tensor(_E2M1, dtype=torch.float64, device=x.device)
        lo, hi = table[(x & 15).long()], table[(x >> 4).long()]
        return torch.stack((lo, hi), dim=k_axis + 1).flatten(k_axis, k_axis + 1)
    return x.double()


def test_nvfp4_dot_scaled_matches_the_dequantized_product(torch, lib):
    """NVFP4: e2m1 elements times their e4m3 scale (one per 16 along K), products exact in bf16,
    an fp32 sum, against torch in float64."""
    m, n, k = 64, 64, 128
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randint(0, 256, (m, k // 2), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    b = torch.randint(0, 256, (k // 2, n), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    sa = (torch.rand((m, k // 16), device="cuda", generator=gen) * 4).to(torch.float8_e4m3fn)
    sb = (torch.rand((n, k // 16), device="cuda", generator=gen) * 4).to(torch.float8_e4m3fn)
    c = torch.full((m, n), 7.0, device="cuda")
    lib.variant("dot_nvfp4_64x64x128")[(1,)](a, sa, b, sb, c)
    torch.cuda.synchronize()
    ref = ((_mx_decode(torch, a, "e2m1", 1) * sa.double().repeat_interleave(16, dim=1))
           @ (_mx_decode(torch, b, "e2m1", 0) * sb.double().repeat_interleave(16, dim=1).T))
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-6 * ref.abs().max().item())


@pytest.mark.parametrize("name, fa, fb, m, n, k, fast", [
    ("dot_scaled_e2m1_e4m3", "e2m1", "e4m3", 64, 64, 128, False),
    ("dot_scaled_e5m2_e2m1_fast", "e5m2", "e2m1", 32, 64, 64, True)])
def test_dot_scaled_matches_the_dequantized_product(torch, lib, name, fa, fb, m, n, k, fast):
    """tl.dot_scaled against torch on the dequantized blocks: element x 2^(scale - 127) per 32
    along K, products exact in bf16, an fp32 sum; a scale of 255 gives a NaN row (without fast_math)."""
    gen = torch.Generator(device="cuda").manual_seed(k + n)

    def block(fmt, shape):
        if fmt == "e2m1":
            return torch.randint(0, 256, shape, device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
        dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
        return (torch.randn(shape, device="cuda", generator=gen) * 2).to(dt)

    a = block(fa, (m, k // 2 if fa == "e2m1" else k))
    b = block(fb, (k // 2 if fb == "e2m1" else k, n))
    sa = torch.randint(120, 134, (m, k // 32), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    sb = torch.randint(120, 134, (n, k // 32), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    sa[3, 0] = 255  # NaN scale: row 3 of C is NaN unless fast_math
    c = torch.full((m, n), 7.0, device="cuda")
    lib.variant(name)[(1,)](a, sa, b, sb, c)
    torch.cuda.synchronize()
    scale_a = torch.exp2(sa.double() - 127).repeat_interleave(32, dim=1)
    scale_b = torch.exp2(sb.double() - 127).repeat_interleave(32, dim=1).T
    ref = (_mx_decode(torch, a, fa, 1) * scale_a) @ (_mx_decode(torch, b, fb, 0) * scale_b)
    rows = [r for r in range(m) if r != 3]
    assert torch.allclose(c[rows].double(), ref[rows], rtol=1e-5, atol=1e-6 * ref.abs().max().item())
    if not fast:  # with fast_math a 255 scale is not special-cased (Triton: no NaN select)
        assert torch.isnan(c[3]).all()


def _e8m0(torch, gen, rows, k):
    """Random e8m0 scales [rows, k / 32] and their values repeated along K as float64 [rows, k]."""
    s = torch.randint(120, 134, (rows, k // 32), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    return s, torch.exp2(s.double() - 127).repeat_interleave(32, dim=1)


def test_batched_dot_scaled_matches_the_dequantized_products(torch, lib):
    """Rank-3 tl.dot_scaled: each batch's e2m1 x e4m3 product with the scales every batch shares."""
    nb, m, n, k = 2, 64, 64, 64
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randint(0, 256, (nb, m, k // 2), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    b = (torch.randn((nb, k, n), device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
    sa, scale_a = _e8m0(torch, gen, m, k)
    sb, scale_b = _e8m0(torch, gen, n, k)
    c = torch.full((nb, m, n), 7.0, device="cuda")
    lib.variant("dot_scaled_batched_2x64x64x64")[(1,)](a, sa, b, sb, c)
    torch.cuda.synchronize()
    ref = (_mx_decode(torch, a, "e2m1", 2) * scale_a) @ (b.double() * scale_b.T)
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-6 * ref.abs().max().item())


def test_dot_scaled_packed_along_m_and_n(torch, lib):
    """e2m1 packed along M (lhs_k_pack=False: byte [i, k] holds rows 2i, 2i + 1) and along N."""
    m, n, k = 64, 64, 64
    gen = torch.Generator(device="cuda").manual_seed(12)
    a = torch.randint(0, 256, (m // 2, k), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    b = torch.randint(0, 256, (k, n // 2), device="cuda", generator=gen, dtype=torch.int32).to(torch.uint8)
    sa, scale_a = _e8m0(torch, gen, m, k)
    sb, scale_b = _e8m0(torch, gen, n, k)
    c = torch.full((m, n), 7.0, device="cuda")
    lib.variant("dot_scaled_mn_packed_64x64x64")[(1,)](a, sa, b, sb, c)
    torch.cuda.synchronize()
    ref = (_mx_decode(torch, a, "e2m1", 0) * scale_a) @ (_mx_decode(torch, b, "e2m1", 1) * scale_b.T)
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-6 * ref.abs().max().item())


@pytest.mark.parametrize("y", [0, 5, 90, -4])
def test_descriptor_gather_and_scatter(torch, lib, y):
    """desc.gather(rows, y) / desc.scatter: the rows by index (some out of range) at columns
    y..y+32, out-of-bounds elements zero; the scatter writes exactly the in-bounds ones."""
    M, N, R, W = 40, 100, 16, 32
    x = torch.randn(M, N, device="cuda")
    rows = torch.tensor([3, 39, 0, 41, 17, -1, 8, 8 + 1, 25, 60, 1, 2, 30, 31, 38, 12], device="cuda",
                        dtype=torch.int32)
    out = torch.full((R, W), float("nan"), device="cuda")
    dst = torch.full((M, N), -7.0, device="cuda")
    lib.variant("desc_gather_16x32")[(1,)](x, out, dst, rows, M, N, y)
    torch.cuda.synchronize()
    r = rows.long()[:, None]
    c = torch.arange(y, y + W, device="cuda")[None, :]
    inside = (r >= 0) & (r < M) & (c >= 0) & (c < N)
    want = torch.where(inside, x[r.clamp(0, M - 1), c.clamp(0, N - 1)], torch.zeros((), device="cuda"))
    assert torch.equal(out, want)
    ref = torch.full((M, N), -7.0, device="cuda")
    i, j = inside.nonzero(as_tuple=True)
    ref[r[i, 0], c[0, j]] = want[i, j] * 2.0
    assert torch.equal(dst, ref)


@pytest.mark.parametrize("name, dtype, bm, bn", [("tma_tile_fp16_64x32", "float16", 64, 32),
                                                 ("tma_tile_fp32_32x64", "float32", 32, 64),
                                                 ("tma_tile_i8_16x16", "int8", 16, 16)])
def test_tma_load_reads_every_swizzle_back_in_place(torch, lib, name, dtype, bm, bn):
    """A host descriptor tile loaded by TMA (64-byte, 128-byte in two boxes, unswizzled) and read
    back into registers through the swizzle: every element in place, zeros past (M, N)."""
    M, N = 3 * bm - 5, 2 * bn + 16 if bn >= 32 else 2 * bn
    dt = getattr(torch, dtype)
    x = (torch.arange(M * N, device="cuda") % 97 - 40).to(dt).reshape(M, N)
    gm, gn = -(-M // bm), -(-N // bn)
    out = torch.full((gm * bm, gn * bn), 77, device="cuda", dtype=dt)
    from ttbuild.runtime import TensorDescriptor as TD

    lib.variant(name)[(gm, gn)](TD.from_tensor(x, [bm, bn]), out, M, N)
    torch.cuda.synchronize()
    want = torch.zeros((gm * bm, gn * bn), device="cuda", dtype=dt)
    want[:M, :N] = x
    assert torch.equal(out, want + 1)


@pytest.mark.parametrize("name, dtype, op, bm, bn, made", [
    ("tma_reduce_add_fp32_32x64", "float32", "add", 32, 64, False),
    ("tma_reduce_add_fp16_64x64", "float16", "add", 64, 64, False),
    ("tma_reduce_max_i32_64x32", "int32", "max", 64, 32, False),
    ("tma_reduce_xor_i64_16x32", "int64", "xor", 16, 32, False),
    ("tma_reduce_or_u64_16x32", "uint64", "or", 16, 32, False),
    ("tma_reduce_made_max_u32_64x32", "uint32", "max", 64, 32, True),
    ("tma_reduce_made_min_i32_64x32", "int32", "min", 64, 32, True)])
def test_tma_reductions_combine_every_program_in_bounds(torch, lib, name, dtype, op, bm, bn, made):
    """desc.atomic_<op> through TMA (cp.reduce.async.bulk.tensor): three programs reduce their
    tiles into the same block of out at once (atomic per element), elements past (M, N) are
    skipped, min / max compare as the element type's signedness (u32 values past 2**31 are the
    largest), on a host descriptor and on a map the kernel makes; the bitwise reduction of an int64
    descriptor takes the pointer form (relaxed atomics) and gives the same bits."""
    M, N, K = 3 * bm - 5, 2 * bn + 8, 3
    gm, gn = -(-M // bm), -(-N // bn)
    g = torch.Generator(device="cuda").manual_seed(7)
    if dtype.startswith("float"):  # small integers: every sum exact in any order
        draw = lambda *s: torch.randint(-8, 9, s, device="cuda", generator=g).to(getattr(torch, dtype))  # noqa: E731
    else:
        bits = 64 if dtype.endswith("64") else 32
        lo, hi = -2 ** (bits - 2), 2 ** (bits - 2)
        # int64 draws cover the 32-bit range through wrap-around below (u32: past 2**31 too)
        draw = lambda *s: torch.randint(lo, hi, s, device="cuda", generator=g, dtype=torch.int64) * 2 + \
            torch.randint(0, 2, s, device="cuda", generator=g, dtype=torch.int64)  # noqa: E731
    x, y = draw(K, gm * bm, gn * bn), draw(M, N)
    ref = y.clone()
    for k in range(K):
        part = x[k, :M, :N]
        if op == "add":
            ref = ref + part
        elif op == "xor":
            ref = ref ^ part
        elif op == "or":
            ref = ref | part
        else:
            wrap = (lambda v: v & 0xFFFFFFFF) if dtype == "uint32" else (lambda v: (v + 2 ** 31) % 2 ** 32 - 2 ** 31)
            a, b = wrap(ref), wrap(part)
            ref = torch.maximum(a, b) if op == "max" else torch.minimum(a, b)
    if dtype in ("int32", "uint32"):  # the 32-bit bits of the int64 draws
        x, y, ref = ((v + 2 ** 31) % 2 ** 32 - 2 ** 31 for v in (x, y, ref))
        x, y, ref = (v.to(torch.int32) for v in (x, y, ref))
        if dtype == "uint32":
            x, y = x.view(torch.uint32), y.view(torch.uint32)
    if dtype == "uint64":  # the bits of the int64 draws
        x, y = x.view(torch.uint64), y.view(torch.uint64)
    from ttbuild.runtime import TensorDescriptor as TD

    if made:
        lib.variant(name)[(gm, gn, K)](y, x, M, N)
    else:
        lib.variant(name)[(gm, gn, K)](TD.from_tensor(y, [bm, bn]), x)
    torch.cuda.synchronize()
    got = y.view(torch.int32) if dtype == "uint32" else y.view(torch.int64) if dtype == "uint64" else y
    assert torch.equal(got, ref)
