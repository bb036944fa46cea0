"""Tensor descriptors on a real GPU: kernels/matmul_descriptor.py and kernels/matmul_persistent.py (tutorial 09's forms: descriptors made in the kernel, lowered to pointer loads with bounds masks; host descriptors, through TMA on sm_90) against torch, at sizes that are not multiples of the tile (the out-of-bounds tiles load as zeros and are not stored), bit-exact on small integers."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

VARIANTS = [("matmul_desc_fp16_128x128x64_w4_s4", 128, 128, False), ("matmul_desc_fp16_128x256x64_w8_s3", 128, 256, True)]


def _launcher(lib, name):
    try:
        return lib.variant(name)
    except KeyError:
        pytest.skip(f"variant {name} is not in the library (rebuild: `doit`)")


@pytest.mark.parametrize("name, bm, bn, sixteen", VARIANTS, ids=[v[0] for v in VARIANTS])
@pytest.mark.parametrize("shape", [(500, 384, 208), (1024, 1024, 1024), (130, 272, 80), (64, 2048, 4096)])
def test_descriptor_matmul_is_exact_on_small_integers(torch, lib, name, bm, bn, sixteen, shape):
    M, N, K = shape
    if sixteen and M % 16:
        pytest.skip(f"{name} promises M a multiple of 16")
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
    b = torch.randint(-2, 3, (K, N), device="cuda", generator=gen).half()
    # a guard row after C: a store past (M, N) would land in it
    buf = torch.full((M + 1, N), float("nan"), device="cuda", dtype=torch.float16)
    c = buf[:M]
    grid = (-(-M // bm) * -(-N // bn),)
    _launcher(lib, name)[grid](a, b, c, M, N, K)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).half()
    assert torch.equal(c, ref)
    assert torch.isnan(buf[M]).all()


def _host_descriptors(torch, kind, a, b, c):
    """The three descriptor arguments as Triton's TensorDescriptor, ttbuild's, or plain tensors."""
    blocks = ([128, 64], [64, 128], [128, 128])
    if kind == "tensor":
        return a, b, c
    if kind == "triton":
        TD = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor
    else:
        from ttbuild.runtime import TensorDescriptor as TD
    return tuple(TD.from_tensor(t, blk) for t, blk in zip((a, b, c), blocks))


@pytest.mark.parametrize("kind", ["triton", "ttbuild", "tensor"])
@pytest.mark.parametrize("shape, variant", [((512, 384, 256), "matmul_hostdesc_fp16_128x128x64_w4_s4"),
                                            ((500, 376, 200), "matmul_hostdesc_fp16_128x128x64_w4_s4_any")])
def test_host_descriptor_matmul_is_exact_on_small_integers(torch, lib, kind, shape, variant):
    """Descriptor parameters filled by the runtime from each host form; extents that are multiples
    of 16 take the pipelined `:16` variant, the others the `_any` one; both bit-exact."""
    try:
        kernel = lib["matmul_host_descriptor_kernel"]
    except KeyError:
        pytest.skip("matmul_host_descriptor_kernel is not in the library (rebuild: `doit`)")
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M * N + K)
    a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
    b = torch.randint(-2, 3, (K, N), device="cuda", generator=gen).half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    descs = _host_descriptors(torch, kind, a, b, c)
    assert kernel.select(*descs, M, N, K).variant == variant
    kernel[(-(-M // 128) * -(-N // 128),)](*descs, M, N, K)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.double() @ b.double()).half())


@pytest.mark.parametrize("name", ["matmul_persistent_fp16_128x128x64_w4_s4",
                                  "matmul_persistent_fp16_128x128x64_w4_s4_subtile"])
@pytest.mark.parametrize("shape", [(500, 384, 208), (2048, 1024, 512), (4000, 2048, 208)])
def test_persistent_descriptor_matmul_is_exact_on_small_integers(torch, lib, name, shape):
    """Tutorial 09's descriptor-persistent form: 132 programs walk every tile (512 tiles at
    4000 x 2048: each program stores 3 or 4, so a tile's TMA store is still draining while the
    program writes the next one into the same shared tile, tma_lowering's deferred wait), B given
    N x K and used as b.T, C whole or in two halves."""
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M + 3 * N + K)
    a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
    b = torch.randint(-2, 3, (N, K), device="cuda", generator=gen).half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    _launcher(lib, name)[(132,)](a, b, c, M, N, K)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.double() @ b.double().T).half())


@pytest.mark.parametrize("name, bn", [("matmul_tma_persistent_fp16_128x128x64_w4_s4", 128),
                                      ("matmul_tma_persistent_fp16_128x256x64_w8_s3", 256),
                                      ("matmul_tma_persistent_fp16_128x128x64_w4_s4_ws", 128),
                                      ("matmul_tma_persistent_fp16_128x256x64_w8_s3_ws", 256)])
@pytest.mark.parametrize("shape", [(500, 376, 200), (2048, 1024, 512), (128, 256, 64), (4000, 2040, 200)])
def test_tma_persistent_matmul_is_exact_on_small_integers(torch, lib, name, bn, shape):
    """Tutorial 09's TMA-persistent form: A and B load through TMA on sm_90 (host descriptors
    encoded by the runtime), tiles past M, N and K filled with zeros by the TMA unit, C's
    out-of-range rows and columns left alone (a guard row after C); at 4000 x 2040 every
    program stores two or more tiles through the one shared tile (the deferred wait)."""
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M + 5 * N + K)
    a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
    b = torch.randint(-2, 3, (N, K), device="cuda", generator=gen).half()
    buf = torch.full((M + 1, N), float("nan"), device="cuda", dtype=torch.float16)
    c = buf[:M]
    from ttbuild.runtime import TensorDescriptor as TD

    descs = (TD.from_tensor(a, [128, 64]), TD.from_tensor(b, [bn, 64]), TD.from_tensor(c, [128, bn]))
    _launcher(lib, name)[(132,)](*descs, M, N, K)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.double() @ b.double().T).half())
    assert torch.isnan(buf[M]).all()
