"""tl.dot on tensor cores (mma.sync, ldmatrix, swizzled shared tiles) against torch on a real GPU: bit-exact small-integer inputs (every partial sum exact), one-hot A x arange B (a wrong lane or register names itself), all four A/B majorness combinations, M/N/K off the block, fp16/bf16/tf32/int8 inputs, fp16 accumulate, a dot without a loop, tl.trans feeding a dot, rank-3 dot, the FMA path (fp64, fp32 ieee; rank 2 and 3).

Artifacts: $TTBUILD_TEST_ARTIFACTS (default build/test-artifacts), tests/data/gpu_kernels/dot.py,
built by tests/gpu/build_test_artifacts.py on the CPU machine and carried to the GPU machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
ART = Path(os.environ.get("TTBUILD_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
LOOP_KERNELS = ("dot_f32acc_kernel", "dot_f16acc_kernel", "dot_i8_kernel")
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "i8": "int8", "i32": "int32",
                "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}


def _variants(kernels) -> list[dict]:
    lib = ART / "lib"
    out = [json.loads(p.read_text()) for p in sorted(lib.glob("*.json"))] if lib.is_dir() else []
    return [v for v in out if v["kernel"] in kernels]


def _ids(kernels):
    found = _variants(kernels)
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no dot artifacts in {ART}"))]
    return [pytest.param(v, id=v["variant"]) for v in found]


@pytest.fixture(scope="module")
def lib(torch):
    import ttbuild.runtime as rt
    if not (ART / "lib").is_dir():
        pytest.skip(f"no {ART / 'lib'}")
    return rt.load(str(ART))


def _dt(torch, v, i):
    return getattr(torch, TORCH_DTYPES[v["signature"].split(",")[i].lstrip("*").split(":")[0]])


def _cdiv(a, b):
    return -(-a // b)


def _round16(n):
    return _cdiv(n, 16) * 16


def _stored(torch, logical, col_major: bool, pad_value):
    """A strided copy of `logical` (R x C): row-major with ld = round16(C), or column-major
    with ld = round16(R); padding holds `pad_value` (never read by a correct kernel)."""
    r, c = logical.shape
    if col_major:
        ld = _round16(r)
        buf = torch.full((c, ld), pad_value, dtype=logical.dtype, device="cuda")
        buf[:, :r] = logical.t()
    else:
        ld = _round16(c)
        buf = torch.full((r, ld), pad_value, dtype=logical.dtype, device="cuda")
        buf[:, :c] = logical
    return buf, ld


def _check(torch, got, want, what):
    bad = (got.double() != want.double()).nonzero()
    if len(bad):
        i, j = bad[0].tolist()
        pytest.fail(f"{what}: {len(bad)} of {got.numel()} elements differ; first at ({i}, {j}): "
                    f"got {got[i, j].item()}, want {want[i, j].item()}; rows {sorted(set(bad[:, 0].tolist()))[:16]}, "
                    f"cols {sorted(set(bad[:, 1].tolist()))[:16]}")


def _run_loop(torch, lib, v, a, b):
    cx = v["constexprs"]
    M, K = a.shape
    N = b.shape[1]
    acc = _dt(torch, v, 2)
    A, lda = _stored(torch, a, cx["A_COL"], 7)
    B, ldb = _stored(torch, b, cx["B_COL"], 7)
    ldc = _round16(N)
    C = torch.full((M, ldc), -9, dtype=acc, device="cuda")
    lib.variant(v["variant"])[(_cdiv(M, cx["BM"]), _cdiv(N, cx["BN"]))](A, B, C, M, N, K, lda, ldb, ldc)
    torch.cuda.synchronize()
    return C[:, :N]


@pytest.mark.parametrize("v", _ids(LOOP_KERNELS))
def test_dot_small_integers_exact(torch, lib, v):
    """Random integers in -2..2: products and every partial sum are exact in fp16, bf16, tf32,
    fp32 and int32 (K <= 512), so the result must equal the float64 product bit for bit."""
    cx = v["constexprs"]
    bm, bn, bk = cx["BM"], cx["BN"], cx["BK"]
    dt = _dt(torch, v, 0)
    g = torch.Generator(device="cuda").manual_seed(bm * 131 + bn * 7 + bk)
    for M, N, K in [(bm, bn, bk), (2 * bm + 3, 3 * bn - 5, 5 * bk + 1), (bm - 1, bn + 1, 7)]:
        K = min(K, 512)
        a = torch.randint(-2, 3, (M, K), generator=g, device="cuda").to(dt)
        b = torch.randint(-2, 3, (K, N), generator=g, device="cuda").to(dt)
        got = _run_loop(torch, lib, v, a, b)
        want = (a.double() @ b.double())
        _check(torch, got, want, f"{v['variant']} M={M} N={N} K={K}")


@pytest.mark.parametrize("v", _ids(("dot_f32acc_kernel", "dot_f16acc_kernel")))
def test_dot_one_hot(torch, lib, v):
    """A = one-hot rows (row m picks k = (3m) mod K), B = distinct integers: C[m, n] must be
    B[k(m), n]; a misplaced lane or register shows as a value from the wrong (k, n)."""
    cx = v["constexprs"]
    dt = _dt(torch, v, 0)
    M, N, K = 2 * cx["BM"], 2 * cx["BN"], 2 * cx["BK"]
    a = torch.zeros((M, K), device="cuda", dtype=dt)
    km = (torch.arange(M, device="cuda") * 3) % K
    a[torch.arange(M, device="cuda"), km] = 1
    # distinct integers where the type holds them exactly (fp8 e4m3: 0..16; a NaN from an
    # unrepresentable value would poison whole columns through 0 * NaN)
    span = 16 if dt.itemsize == 1 else 512
    b = ((torch.arange(K, device="cuda")[:, None] * 37 + torch.arange(N, device="cuda")[None, :]) % span).to(dt)
    got = _run_loop(torch, lib, v, a, b)
    _check(torch, got, b.double()[km], f"{v['variant']} one-hot")


def _run_fixed(torch, lib, name, *tensors):
    v = next((x for x in _variants(("dot_single_kernel", "dot_trans_kernel", "dot_batched_kernel", "dot_fma_kernel",
                                    "dot_chain_kernel", "dot_batched_fma_kernel", "dot_chain_tf32_kernel"))
              if x["variant"] == name), None)
    if v is None:
        pytest.skip(f"no {name} in {ART}")
    lib.variant(name)[(1,)](*tensors)
    torch.cuda.synchronize()
    return v["constexprs"]


def test_dot_without_loop_adds_accumulator(torch, lib):
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randint(-2, 3, (64, 32), generator=g, device="cuda").half()
    b = torch.randint(-2, 3, (32, 32), generator=g, device="cuda").half()
    c = torch.randint(-8, 9, (64, 32), generator=g, device="cuda").float()
    want = a.double() @ b.double() + c.double()
    _run_fixed(torch, lib, "dot_single_f16_64x32x32_w4", a, b, c)
    _check(torch, c, want, "dot(a, b, c) without a loop")


def test_dot_trans_operand(torch, lib):
    g = torch.Generator(device="cuda").manual_seed(6)
    a = torch.randint(-2, 3, (64, 32), generator=g, device="cuda").half()
    bt = torch.randint(-2, 3, (64, 32), generator=g, device="cuda").half()
    c = torch.full((64, 64), -9.0, device="cuda")
    _run_fixed(torch, lib, "dot_trans_f16_64x64x32_w4", a, bt, c)
    _check(torch, c, a.double() @ bt.double().t(), "dot(a, trans(bt))")


def test_dot_batched(torch, lib):
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randint(-2, 3, (4, 32, 32), generator=g, device="cuda").half()
    b = torch.randint(-2, 3, (4, 32, 32), generator=g, device="cuda").half()
    c = torch.full((4, 32, 32), -9.0, device="cuda")
    _run_fixed(torch, lib, "dot_batched_f16_4x32x32x32_w4", a, b, c)
    want = torch.bmm(a.double(), b.double())
    for i in range(4):
        _check(torch, c[i], want[i], f"batched dot, batch {i}")


@pytest.mark.parametrize("name,dtype,shape", [("dot_fma_f64_32x32x16_w4", "float64", (32, 32, 16)),
                                               ("dot_fma_f32_ieee_64x32x32_w4", "float32", (64, 32, 32))])
def test_dot_fma_path(torch, lib, name, dtype, shape):
    """fp64 and fp32 with input_precision="ieee" (no mma shape): C = A @ B twice onto C, exact."""
    M, N, K = shape
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(8)
    a = torch.randint(-2, 3, (M, K), generator=g, device="cuda").to(dt)
    b = torch.randint(-2, 3, (K, N), generator=g, device="cuda").to(dt)
    c = torch.randint(-8, 9, (M, N), generator=g, device="cuda").to(dt)
    want = 2 * (a.double() @ b.double()) + c.double()
    _run_fixed(torch, lib, name, a, b, c)
    _check(torch, c, want, name)


@pytest.mark.parametrize("name,dtype,shape", [("dot_batched_fma_f64_2x32x16x16_w4", "float64", (2, 32, 16, 16)),
                                               ("dot_batched_fma_f32_ieee_4x16x32x16_w2", "float32", (4, 16, 32, 16))])
def test_dot_batched_fma_path(torch, lib, name, dtype, shape):
    """Rank-3 dot on the FMA path: C[b] += A[b] @ B[b], exact on small integers; a batch or lane
    mix-up shows as the batch it lands in."""
    B, M, N, K = shape
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randint(-3, 4, (B, M, K), generator=g, device="cuda").to(dt)
    b = torch.randint(-3, 4, (B, K, N), generator=g, device="cuda").to(dt)
    c = torch.randint(-8, 9, (B, M, N), generator=g, device="cuda").to(dt)
    want = torch.bmm(a.double(), b.double()) + c.double()
    _run_fixed(torch, lib, name, a, b, c)
    for i in range(B):
        _check(torch, c[i], want[i], f"{name}, batch {i}")


@pytest.mark.parametrize("name,scale", [("dot_chain_64x32x64_w4", 0), ("dot_chain_scaled_64x32x64_w4", 1),
                                        ("dot_chain_rowscaled_64x32x64_w4", 2)])
def test_chained_dots(torch, lib, name, scale):
    """Attention's two dots per iteration (warpsPerCTA = [4, 1] for both), the second's
    accumulator loop-carried in #mma as is, scaled by a constant, or by a per-row vector
    broadcast in #mma (attention's `acc * alpha[:, None]`)."""
    g = torch.Generator(device="cuda").manual_seed(9)
    n_ctx = 128
    q = torch.randint(-2, 3, (64, 64), generator=g, device="cuda").half()
    k = torch.randint(-2, 3, (n_ctx, 64), generator=g, device="cuda").half()
    v = torch.randint(-2, 3, (n_ctx, 64), generator=g, device="cuda").half()
    o = torch.full((64, 64), float("nan"), device="cuda")
    _run_fixed(torch, lib, name, q, k, v, o, n_ctx)
    want = torch.zeros((64, 64), dtype=torch.float64, device="cuda")
    for s in range(0, n_ctx, 32):
        p = q.double() @ k[s:s + 32].double().t()
        if scale == 1:
            want = want * 0.5
        if scale == 2:
            want = want * torch.where(p.max(dim=1).values > 0, 0.5, 0.25)[:, None]
        want = want + p @ v[s:s + 32].double()
    _check(torch, o, want, name)


@pytest.mark.parametrize("name,bm,bn", [("dot_chain_tf32_64x32x64_w4", 64, 32), ("dot_chain_tf32_128x64x64_w8", 128, 64)])
def test_chained_tf32_dots(torch, lib, name, bm, bn):
    """Attention's two dots on fp32 tiles: P (fp32) stays in registers as the tf32 A of an RS
    wgmma, moved there by warp shuffles. Integers in -2..2: S (|S| <= 256) is exact in tf32 and
    every sum in fp32, alpha a power of two, so the result is bit-exact."""
    g = torch.Generator(device="cuda").manual_seed(11)
    n_ctx = 4 * bn
    q = torch.randint(-2, 3, (bm, 64), generator=g, device="cuda").float()
    k = torch.randint(-2, 3, (n_ctx, 64), generator=g, device="cuda").float()
    v = torch.randint(-2, 3, (n_ctx, 64), generator=g, device="cuda").float()
    o = torch.full((bm, 64), float("nan"), device="cuda")
    _run_fixed(torch, lib, name, q, k, v, o, n_ctx)
    want = torch.zeros((bm, 64), dtype=torch.float64, device="cuda")
    for s in range(0, n_ctx, bn):
        p = q.double() @ k[s:s + bn].double().t()
        want = want * torch.where(p.max(dim=1).values > 0, 0.5, 0.25)[:, None] + p @ v[s:s + bn].double()
    _check(torch, o, want, name)


@pytest.mark.parametrize("v", _ids(("dot_f32acc_kernel",)))
def test_dot_random_fp_close(torch, lib, v):
    """Random normal inputs against an fp64 reference, per-dtype tolerance (fp32 accumulate)."""
    dt = _dt(torch, v, 0)
    M, N, K = 3 * v["constexprs"]["BM"] + 1, 2 * v["constexprs"]["BN"] - 3, 300
    g = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn((M, K), generator=g, device="cuda").to(dt)
    b = torch.randn((K, N), generator=g, device="cuda").to(dt)
    got = _run_loop(torch, lib, v, a, b).double()
    want = a.double() @ b.double()
    tol = {torch.float32: 2e-2, torch.float16: 1e-2, torch.bfloat16: 1e-2}.get(dt, 1e-1)  # tf32 inputs: 10 bits
    if v["constexprs"].get("PREC") == "tf32x3":
        tol = 1e-5  # three tf32 products recover fp32 accuracy
    assert torch.allclose(got, want, atol=tol * K ** 0.5, rtol=tol), (got - want).abs().max().item()


def _library_matmuls():
    """matmul_kernel variants of the kernels/ library ($TTBUILD_ARTIFACTS, default artifacts/)."""
    lib_dir = Path(os.environ.get("TTBUILD_ARTIFACTS") or REPO / "artifacts") / "lib"
    found = [json.loads(p.read_text()) for p in sorted(lib_dir.glob("*.json"))] if lib_dir.is_dir() else []
    found = [v for v in found if v["kernel"] == "matmul_kernel"]
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no matmul_kernel in {lib_dir}"))]
    return [pytest.param(v, id=v["variant"]) for v in found]


@pytest.mark.parametrize("v", _library_matmuls())
def test_tutorial_matmul_exact(torch, v):
    """kernels/matmul.py (tutorial 03: loop-carried pointers, grouped order, K mask, fused
    leaky ReLU) on small integers, M, N, K off the block (multiples of 16, which the variants'
    `i32:16` sizes promise, as Triton's JIT specializes them): equal to the fp32 reference bit for bit."""
    import ttbuild.runtime as rt
    lib = rt.load(str(Path(os.environ.get("TTBUILD_ARTIFACTS") or REPO / "artifacts")))
    cx = v["constexprs"]
    bm, bn, bk = cx["BLOCK_SIZE_M"], cx["BLOCK_SIZE_N"], cx["BLOCK_SIZE_K"]
    g = torch.Generator(device="cuda").manual_seed(3)
    for M, N, K in [(3 * bm + 16, 2 * bn + 16, 4 * bk + 16), (bm, bn, bk)]:
        # leading dimensions padded to multiples of 16 elements (the variants' i32:16 strides)
        a = torch.randint(-2, 3, (M, _round16(K)), generator=g, device="cuda").half()[:, :K]
        b = torch.randint(-2, 3, (K, _round16(N)), generator=g, device="cuda").half()[:, :N]
        c = torch.full((M, _round16(N)), float("nan"), device="cuda", dtype=torch.float16)[:, :N]
        grid = (_cdiv(M, bm) * _cdiv(N, bn),)
        lib.variant(v["variant"])[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                         c.stride(0), c.stride(1))
        torch.cuda.synchronize()
        acc = (a.double() @ b.double()).float()
        if cx["ACTIVATION"] == "leaky_relu":
            acc = torch.where(acc >= 0, acc, 0.01 * acc)
        _check(torch, c, acc.half(), f"{v['variant']} M={M} N={N} K={K}")


@pytest.mark.parametrize("v", _ids(("kmajor_matmul_kernel",)))
def test_kmajor_operands(torch, lib, v):
    """Both operands K-contiguous (B as its transpose's view), the form wgmma needs for tf32 and
    int8: int8 small integers bit-exact in int32, fp32 (tf32 products) within tf32's 10 bits;
    sizes off the block, K not a multiple of BK, a padded C row pitch."""
    cx = v["constexprs"]
    dt = _dt(torch, v, 0)
    g = torch.Generator(device="cuda").manual_seed(5)
    for M, N, K in [(2 * cx["BM"] + 16, 3 * cx["BN"] - 16, 5 * cx["BK"] + 16), (cx["BM"], cx["BN"], cx["BK"])]:
        if cx["INT"]:
            a = torch.randint(-8, 8, (M, K), generator=g, device="cuda").to(dt)
            bt = torch.randint(-8, 8, (N, K), generator=g, device="cuda").to(dt)
        else:
            a = torch.randn((M, K), generator=g, device="cuda").to(dt)
            bt = torch.randn((N, K), generator=g, device="cuda").to(dt)
        b = bt.t()  # K x N, K-contiguous
        out_dt = torch.int32 if cx["INT"] else torch.float32
        c = torch.full((M, _round16(N)), -7, dtype=out_dt, device="cuda")
        lib.variant(v["variant"])[(_cdiv(M, cx["BM"]), _cdiv(N, cx["BN"]))](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        torch.cuda.synchronize()
        want = a.double() @ b.double()
        if cx["INT"]:
            _check(torch, c[:, :N], want.to(torch.int32), v["variant"])
        else:
            assert torch.allclose(c[:, :N].double(), want, atol=2e-2 * K ** 0.5, rtol=2e-2), v["variant"]
        assert (c[:, N:] == -7).all(), "wrote past N"


@pytest.mark.parametrize("name,chunk", [("dot_fp8e4_rc_imp64_64x64x128_w4", 64), ("dot_fp8e4_rc_imp32_128x64x64_w4", 32)])
def test_fp8_partial_accumulation_bounds_the_loss(torch, lib, name, chunk):
    """fp8 with max_num_imprecise_acc = chunk (wgmma on sm_90): rows of A are 16 then 0.125s, B
    likewise, so C = 256 + (K - 1) / 64. wgmma's fp8 sums keep fewer bits than fp32, so products
    of 2**-6 next to 256 are rounded away, but only inside the first chunk: the rest are summed
    on their own and added in fp32. The loss is at most chunk * 2**-6; Triton's default
    (accumulate in place, dot_fp8e4_rc_64x64x128_w4) loses more on the same inputs."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch has no float8_e4m3fn")
    found = {v["variant"]: v for v in _variants(("dot_f32acc_kernel",))}
    if name not in found or "dot_fp8e4_rc_64x64x128_w4" not in found:
        pytest.skip(f"no {name} in {ART}")
    v = found[name]
    M, N, K = v["constexprs"]["BM"], v["constexprs"]["BN"], 512
    a = torch.full((M, K), 0.125, device="cuda")
    a[:, 0] = 16
    b = torch.full((K, N), 0.125, device="cuda")
    b[0, :] = 16
    a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    want = 256 + (K - 1) / 64
    loss = (want - _run_loop(torch, lib, v, a, b).double()).abs().max().item()
    assert loss <= chunk * 2.0 ** -6, loss
    plain = found["dot_fp8e4_rc_64x64x128_w4"]
    a2, b2 = a[:plain["constexprs"]["BM"]], b[:, :plain["constexprs"]["BN"]]
    loss_plain = (want - _run_loop(torch, lib, plain, a2, b2).double()).abs().max().item()
    assert loss_plain > loss, (loss_plain, loss)
