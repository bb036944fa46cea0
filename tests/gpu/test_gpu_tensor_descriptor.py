"""Tensor descriptors on a real GPU: kernels/matmul_descriptor.py (tutorial 09's device-descriptor form, descriptors lowered to pointer loads with bounds masks) against torch, at sizes that are not multiples of the tile (the out-of-bounds tiles load as zeros and are not stored), bit-exact on small integers."""

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
