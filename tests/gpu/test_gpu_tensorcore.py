"""Tensor-core kernels of kernels/ (matmul fp16/fp8, linear, grouped GEMM, FlashAttention-2 forward and backward) against torch in fp32/fp64 on a real GPU: poisoned outputs and guard regions, sizes that are not multiples of the tile, every variant of variants.toml that was built (the rest skip by name)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import tomllib

pytestmark = pytest.mark.gpu

VARIANTS = tomllib.loads((Path(__file__).resolve().parents[2] / "kernels" / "variants.toml").read_text())["variant"]


def _names(kernel: str, pred=lambda v: True) -> list[str]:
    return [v["name"] for v in VARIANTS if v["kernel"] == kernel and pred(v)]


def _spec(name: str) -> dict:
    return next(v for v in VARIANTS if v["name"] == name)


def _launcher(lib, name: str):
    """The variant's launcher, or a skip naming why (kept short of cubin by `until`, or not built)."""
    try:
        return lib.variant(name)
    except KeyError:
        until = _spec(name).get("until", "cubin")
        pytest.skip(f"variant {name} is not in the library (until = {until!r} in variants.toml)" if until != "cubin"
                    else f"variant {name} is not in the library (rebuild: `doit`)")


def _cdiv(a, b):
    return -(-a // b)


def _sixteen(name: str) -> bool:
    """Whether the variant promises 16-divisible sizes/strides (no `_any` in its name)."""
    return not name.endswith("_any")


# ---------------------------------------------------------------------------- matmul (tutorial 03)

# (M, N, K): multiples of 16 (what the `:16` variants promise) but of no tile size, a K below
# every BLOCK_K, and for the *_any variants sizes and strides with no divisibility at all.
MM_SIZES_16 = [(400, 272, 208), (16, 32, 16), (528, 1040, 784)]
MM_SIZES_ANY = [(333, 517, 129), (1, 1, 1), (65, 33, 17)]


def _matmul_case(torch, name, M, N, K, gen, ints=False, fp8=False):
    """Inputs, a poisoned C with guard rows/columns, and the launch (positional, as Triton's)."""
    pad = 16 if _sixteen(name) else 3
    if ints:  # small integers: every product and partial sum is exact in fp32 and in fp16 C
        a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
        b = torch.randint(-2, 3, (K, N), device="cuda", generator=gen).half()
    else:
        a = torch.randn(M, K, device="cuda", generator=gen).half()
        b = torch.randn(K, N, device="cuda", generator=gen).half()
    if fp8:
        a = a.to(torch.float8_e4m3fn)
        b = b.T.contiguous().to(torch.float8_e4m3fn).T  # K-major B, as tutorial 03 passes fp8
    c_full = torch.full((M + 1, N + pad), float("nan"), device="cuda", dtype=torch.float16)
    c = c_full[:M, :N]
    spec = _spec(name)["constexprs"]
    grid = (_cdiv(M, spec["BLOCK_SIZE_M"]) * _cdiv(N, spec["BLOCK_SIZE_N"]),)
    return a, b, c, c_full, grid


def _check_c(torch, c, c_full, ref, M, N, rtol, atol):
    torch.cuda.synchronize()
    assert not torch.isnan(c).any(), "some outputs were never written"
    torch.testing.assert_close(c.double(), ref, rtol=rtol, atol=atol)
    assert torch.isnan(c_full[M:]).all() and torch.isnan(c_full[:M, N:]).all(), "wrote outside C"


def _leaky_relu(x):
    return x.where(x >= 0, 0.01 * x)


@pytest.mark.parametrize("name", _names("matmul_kernel"))
def test_matmul_fp16_matches_torch(torch, lib, name):
    run = _launcher(lib, name)
    act = _spec(name)["constexprs"]["ACTIVATION"]
    for i, (M, N, K) in enumerate(MM_SIZES_16 if _sixteen(name) else MM_SIZES_ANY):
        gen = torch.Generator(device="cuda").manual_seed(1000 * i + M)
        a, b, c, c_full, grid = _matmul_case(torch, name, M, N, K, gen)
        run[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        ref = a.double() @ b.double()
        if act == "leaky_relu":
            ref = _leaky_relu(ref)
        # fp16 C: half an ulp (2**-12 relative) plus fp32 accumulation error
        _check_c(torch, c, c_full, ref, M, N, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("name", _names("matmul_kernel"))
def test_matmul_fp16_small_integers_are_exact(torch, lib, name):
    """Integer inputs in [-2, 2], K <= 512: the exact product fits fp16, so any wrong lane,
    register, k-slice or pipeline stage shows up as a difference, with no tolerance to hide in."""
    run = _launcher(lib, name)
    M, N, K = (272, 400, 496) if _sixteen(name) else (131, 77, 301)
    gen = torch.Generator(device="cuda").manual_seed(K)
    a, b, c, c_full, grid = _matmul_case(torch, name, M, N, K, gen, ints=True)
    run[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    ref = a.double() @ b.double()
    if _spec(name)["constexprs"]["ACTIVATION"] == "leaky_relu":
        ref = _leaky_relu(ref).half().double()  # 0.01 x rounds; compare at fp16
        _check_c(torch, c, c_full, ref, M, N, rtol=1e-3, atol=0)
        return
    _check_c(torch, c, c_full, ref, M, N, rtol=0, atol=0)


@pytest.mark.parametrize("name", _names("matmul_fp8_kernel"))
def test_matmul_fp8_matches_torch(torch, lib, name):
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch has no float8_e4m3fn")
    run = _launcher(lib, name)
    for i, (M, N, K) in enumerate(MM_SIZES_16):
        gen = torch.Generator(device="cuda").manual_seed(77 * i + K)
        a, b, c, c_full, grid = _matmul_case(torch, name, M, N, K, gen, fp8=True)
        assert b.stride(0) == 1  # K-major
        run[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        # e4m3 values are exact in fp64, products in fp32 too (8 significant bits). On sm_90 the
        # dot runs on wgmma, whose fp8 sums keep fewer bits than fp32 (Triton's default
        # max_num_imprecise_acc of 2**30 there takes that, as ours does): the error is bounded by
        # a few units in 2**-10 of the sum of |a| |b|, not by C's magnitude (a wrong fragment is
        # off by whole products).
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        bound = 1e-2 + 1e-3 * ref.abs() + 2.0 ** -10 * (a.double().abs() @ b.double().abs())
        assert not torch.isnan(c).any(), "some outputs were never written"
        bad = ((c.double() - ref).abs() > bound).sum().item()
        assert bad == 0, f"{bad} elements off by more than the fp8 accumulation bound"
        assert torch.isnan(c_full[M:]).all() and torch.isnan(c_full[:M, N:]).all(), "wrote outside C"


@pytest.mark.parametrize("name", _names("matmul_fp8_kernel"))
def test_matmul_fp8_small_integers_are_exact(torch, lib, name):
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch has no float8_e4m3fn")
    run = _launcher(lib, name)
    M, N, K = 208, 144, 496
    gen = torch.Generator(device="cuda").manual_seed(5)
    a, b, c, c_full, grid = _matmul_case(torch, name, M, N, K, gen, ints=True, fp8=True)
    run[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    _check_c(torch, c, c_full, a.double() @ b.double(), M, N, rtol=0, atol=0)


# ---------------------------------------------------------------------------- linear layer

# (M, N, K): the plain variants promise N and K (and row strides) multiples of 16, as in real
# layers, M anything; *_any variants take anything.
LINEAR_SIZES_16 = [(333, 528, 144), (64, 128, 64), (1, 16, 16), (1000, 96, 208)]
LINEAR_SIZES_ANY = [(333, 517, 129), (1, 7, 5), (65, 33, 17)]


@pytest.mark.parametrize("name", _names("linear_kernel"))
def test_linear_matches_torch(torch, lib, name):
    run = _launcher(lib, name)
    spec = _spec(name)["constexprs"]
    F = torch.nn.functional
    pad = 16 if _sixteen(name) else 3
    for i, (M, N, K) in enumerate(LINEAR_SIZES_16 if _sixteen(name) else LINEAR_SIZES_ANY):
        gen = torch.Generator(device="cuda").manual_seed(31 * i + N)
        x = torch.randn(M, K, device="cuda", generator=gen).half()
        w = (torch.randn(N, K, device="cuda", generator=gen) / math.sqrt(K)).half()
        bias = torch.randn(N, device="cuda", generator=gen).half()
        y_full = torch.full((M + 1, N + pad), float("nan"), device="cuda", dtype=torch.float16)
        y = y_full[:M, :N]
        grid = (_cdiv(M, spec["BLOCK_SIZE_M"]) * _cdiv(N, spec["BLOCK_SIZE_N"]),)
        run[grid](x, w, bias, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                  y.stride(0), y.stride(1))
        ref = x.double() @ w.double().T + bias.double()
        ref = {"": ref, "relu": F.relu(ref), "leaky_relu": _leaky_relu(ref),
               "gelu": F.gelu(ref, approximate="tanh")}[spec["ACTIVATION"]]
        _check_c(torch, y, y_full, ref, M, N, rtol=2e-3, atol=1e-2)


# ---------------------------------------------------------------------------- grouped GEMM (tutorial 08)

GROUPS = [[(256, 128, 64), (200, 136, 72), (17, 33, 40), (128, 512, 256)],
          [(1024, 512, 256), (512, 256, 1024), (3, 5, 7)]]


@pytest.mark.parametrize("name", _names("grouped_matmul_kernel"))
@pytest.mark.parametrize("group", range(len(GROUPS)))
def test_grouped_gemm_matches_torch(torch, lib, name, group):
    run = _launcher(lib, name)
    gen = torch.Generator(device="cuda").manual_seed(group + 11)
    As, Bs, Cs, fulls = [], [], [], []
    for M, N, K in GROUPS[group]:
        As.append(torch.randn(M, K, device="cuda", generator=gen).half())
        Bs.append(torch.randn(K, N, device="cuda", generator=gen).half())
        full = torch.full((M * N + 64,), float("nan"), device="cuda", dtype=torch.float16)  # guard tail
        fulls.append(full)
        Cs.append(full[:M * N].view(M, N))

    def table(ts, dtype=torch.int64):
        return torch.tensor(ts, device="cuda", dtype=dtype)

    sizes = table([d for mnk in GROUPS[group] for d in mnk], torch.int32)
    lds = table([ld for a, b, c in zip(As, Bs, Cs) for ld in (a.stride(0), b.stride(0), c.stride(0))], torch.int32)
    num_sm = _spec(name)["constexprs"]["NUM_SM"]
    run[(num_sm,)](table([a.data_ptr() for a in As]), table([b.data_ptr() for b in Bs]),
                   table([c.data_ptr() for c in Cs]), sizes, lds, len(As))
    torch.cuda.synchronize()
    for i, (a, b, c, full) in enumerate(zip(As, Bs, Cs, fulls)):
        assert not torch.isnan(c).any(), f"GEMM {i}: some outputs were never written"
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-2, msg=f"GEMM {i}")
        assert torch.isnan(full[c.numel():]).all(), f"GEMM {i}: wrote past C"


# ---------------------------------------------------------------------------- attention (tutorial 06)

def _attn_reference(torch, q, k, v, causal, sm_scale):
    """O (fp32) and the log2-domain row statistic M = logsumexp(S) / ln 2, softmax in fp32."""
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return p @ v.float(), torch.logsumexp(s, dim=-1) / math.log(2)


def _qkv(torch, Z, H, N, D, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [(torch.randn(Z, H, N, D, device="cuda", generator=gen) * 0.5).half() for _ in range(3)]


def _fwd_shapes(name):
    d = _spec(name)["constexprs"]["HEAD_DIM"]
    if _sixteen(name):  # H and N_CTX multiples of 16, N_CTX of no block size
        return [(1, 16, 528, d), (2, 16, 256, d)]
    return [(2, 3, 1000, d), (1, 2, 130, d), (1, 1, 17, d)]


@pytest.mark.parametrize("name", _names("_attn_fwd"))
def test_attention_forward_matches_torch(torch, lib, name):
    run = _launcher(lib, name)
    spec = _spec(name)["constexprs"]
    causal = spec["STAGE"] == 3
    sm_scale = 0.5
    for Z, H, N, D in _fwd_shapes(name):
        q, k, v = _qkv(torch, Z, H, N, D, seed=N + D)
        o_full = torch.full((Z, H, N + 7, D), float("nan"), device="cuda", dtype=torch.float16)
        o = o_full[:, :, :N]  # rows N.. of every head are a guard
        m_full = torch.full((Z * H * N + 64,), float("nan"), device="cuda")
        m = m_full[:Z * H * N]
        grid = (_cdiv(N, spec["BLOCK_M"]), Z * H, 1)
        run[grid](q, k, v, sm_scale, m, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), Z, H, N)
        torch.cuda.synchronize()
        ref_o, ref_m = _attn_reference(torch, q, k, v, causal, sm_scale)
        assert not torch.isnan(o).any() and not torch.isnan(m).any(), "some outputs were never written"
        # P is rounded to fp16 before P @ V, as in the tutorial: ~1e-3 absolute on O
        torch.testing.assert_close(o.float(), ref_o, rtol=0, atol=1e-2)
        torch.testing.assert_close(m.view(Z, H, N), ref_m, rtol=0, atol=2e-3)
        assert torch.isnan(o_full[:, :, N:]).all() and torch.isnan(m_full[Z * H * N:]).all(), "wrote outside O/M"


@pytest.mark.parametrize("name", _names("_attn_fwd_desc"))
@pytest.mark.parametrize("shape", [(1, 2, 512), (2, 3, 256)])
def test_attention_forward_through_descriptors_matches_torch(torch, lib, name, shape):
    """Tutorial 06's descriptor form: Q, K, V, Out as (Z * H * N_CTX, HEAD_DIM) host descriptors,
    K and V through TMA rings, Q through one TMA load; O and M as the pointer form's."""
    from ttbuild.runtime import TensorDescriptor as TD

    run = _launcher(lib, name)
    spec = _spec(name)["constexprs"]
    D, BM, BN = spec["HEAD_DIM"], spec["BLOCK_M"], spec["BLOCK_N"]
    causal = spec["STAGE"] == 3
    Z, H, N = shape
    q, k, v = _qkv(torch, Z, H, N, D, seed=7 * N + D)
    o = torch.full((Z, H, N, D), float("nan"), device="cuda", dtype=torch.float16)
    m = torch.full((Z * H * N,), float("nan"), device="cuda")
    flat = lambda t: t.reshape(Z * H * N, D)  # noqa: E731
    descs = (TD.from_tensor(flat(q), [BM, D]), TD.from_tensor(flat(k), [BN, D]), TD.from_tensor(flat(v), [BN, D]),
             TD.from_tensor(flat(o), [BM, D]))
    run[(N // BM, Z * H, 1)](0.5, m, Z, H, *descs, N)
    torch.cuda.synchronize()
    ref_o, ref_m = _attn_reference(torch, q, k, v, causal, 0.5)
    assert not torch.isnan(o).any() and not torch.isnan(m).any(), "some outputs were never written"
    torch.testing.assert_close(o.float(), ref_o, rtol=0, atol=1e-2)
    torch.testing.assert_close(m.view(Z, H, N), ref_m, rtol=0, atol=2e-3)


def _bwd_names():
    return _names("_attn_bwd")


@pytest.mark.parametrize("name", _bwd_names())
@pytest.mark.parametrize("shape", [(1, 2, 1000), (2, 3, 200), (1, 2, 512)])
def test_attention_backward_matches_torch(torch, lib, name, shape):
    """dQ, dK, dV against torch autograd in fp32, from O and M computed by torch (so the
    backward is checked on its own); Delta comes from our _attn_bwd_preprocess."""
    spec = _spec(name)["constexprs"]
    D, causal = spec["HEAD_DIM"], spec["CAUSAL"]
    run = _launcher(lib, name)
    pre = _launcher(lib, f"attn_bwd_preprocess_d{D}")
    Z, H, N = shape
    sm_scale = 0.5
    q, k, v = _qkv(torch, Z, H, N, D, seed=N * 3 + D)
    do = (torch.randn(Z, H, N, D, device="cuda", generator=torch.Generator(device="cuda").manual_seed(N)) * 0.5).half()
    qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
    ref_o, ref_m = _attn_reference(torch, qf, kf, vf, causal, sm_scale)
    ref_o.backward(do.float())
    o, m = ref_o.detach().half(), ref_m.detach().contiguous()

    delta = torch.full((Z * H * N,), float("nan"), device="cuda")
    pre[(_cdiv(N, pre.variants[0].constexprs["BLOCK_M"]), Z * H)](o, do, delta, Z, H, N)
    torch.cuda.synchronize()
    torch.testing.assert_close(delta.view(Z, H, N), (o.float() * do.float()).sum(-1), rtol=1e-4, atol=1e-4)

    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    arg_k = k * (sm_scale / math.log(2))  # K pre-scaled to the log2 domain, as the tutorial's host code
    grid = (_cdiv(N, spec["BLOCK_N1"]), 1, Z * H)
    run[grid](q, arg_k, v, sm_scale, do, dq, dk, dv, m, delta, *q.stride(), H, N)
    torch.cuda.synchronize()
    for got, want, what in ((dq, qf.grad, "dQ"), (dk, kf.grad, "dK"), (dv, vf.grad, "dV")):
        assert not torch.isnan(got).any(), f"{what}: some outputs were never written"
        torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2, msg=what)
