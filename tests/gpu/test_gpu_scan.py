"""tt.scan on the GPU (tests/data/gpu_kernels/misc.py) against torch: cumsum, running maxima and order-sensitive affine maps, forward and reverse, along either axis of a block, of a slice layout, over one warp or several, int32 and int64 bit for bit; poisoned outputs.

Artifacts as in tests/gpu/test_backend_gpu_reduce.py (`$TTBUILD_TEST_ARTIFACTS`, else
./build/test-artifacts, else built here).
"""

from __future__ import annotations

import pytest
from test_backend_gpu_reduce import lib, torch  # noqa: F401  (fixtures)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [1, 300, 512])
def test_scans_forward_reverse_and_masked(torch, lib, n):  # noqa: F811  (fixtures)
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(16 * 32 + 512, device="cuda", generator=gen)
    out = torch.full((16, 32), float("nan"), device="cuda")
    rs = torch.full((16, 32), float("nan"), device="cuda")
    c1 = torch.full((520,), float("nan"), device="cuda")
    lib.variant("scan_16x32")[(1,)](out, rs, c1, x, n)
    torch.cuda.synchronize()
    x2 = x[:512].view(16, 32).double()
    cs = x2.cumsum(dim=1)
    torch.testing.assert_close(out.double(), cs, rtol=1e-5, atol=1e-5)
    rev = cs.flip(0).cummax(dim=0).values.flip(0)
    torch.testing.assert_close(rs.double(), rev, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c1[:n].double(), x[:n].double().cumsum(0), rtol=1e-5, atol=1e-4)
    assert torch.isnan(c1[n:]).all()


@pytest.mark.parametrize("variant,n", [("scan_long_4096", 4096), ("scan_long_256", 256), ("scan_long_512_w1", 512),
                                       ("scan_long_32_w4", 32)])
def test_long_scans_keep_their_order(torch, lib, variant, n):  # noqa: F811  (fixtures)
    """One line over 8 warps (4096: two chunks per thread), 2 warps (256), one warp (512: four
    chunks per thread, carried by shuffles) and 4 warps holding 32 (copies in every warp): forward
    and reverse cumsum, and an order-sensitive affine scan."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(n, device="cuda", generator=gen)
    y = 1 + 0.01 * torch.randn(n, device="cuda", generator=gen)
    cs, rev, aff = (torch.full((n,), float("nan"), device="cuda") for _ in range(3))
    lib.variant(variant)[(1,)](x, y, cs, rev, aff)
    torch.cuda.synchronize()
    xd, yd = x.double().cpu(), y.double().cpu()
    torch.testing.assert_close(cs.double().cpu(), xd.cumsum(0), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(rev.double().cpu(), xd.flip(0).cumsum(0).flip(0), rtol=1e-4, atol=1e-3)
    ref, acc = torch.empty(n, dtype=torch.float64), 0.0
    for i in range(n):  # b_i = b_{i-1} * y_i + x_i
        acc = acc * yd[i].item() + xd[i].item() if i else xd[0].item()
        ref[i] = acc
    torch.testing.assert_close(aff.double().cpu(), ref, rtol=1e-4, atol=1e-3)


def _affine(y, x, dim):
    """b_0 = x_0, b_i = b_(i-1) * y_i + x_i along `dim` (float64 CPU tensors)."""
    y, x = y.movedim(dim, 0), x.movedim(dim, 0)
    out = x.clone()
    for i in range(1, x.shape[0]):
        out[i] = out[i - 1] * y[i] + x[i]
    return out.movedim(0, dim)


@pytest.mark.parametrize("variant,M,N", [("scan_block_16x64_w4", 16, 64), ("scan_block_64x16_w4", 64, 16),
                                         ("scan_block_4x8_w4", 4, 8), ("scan_block_128x32_w8", 128, 32)])
def test_block_scans_along_both_axes(torch, lib, variant, M, N):  # noqa: F811  (fixtures)
    """Scans along the rows and the columns of one block (lanes, warps, several lines per thread,
    copies where the block is smaller than the layout): cumsum forward and reverse, and affine maps
    (order-sensitive, two operands) forward and reverse."""
    gen = torch.Generator(device="cuda").manual_seed(M * N)
    x = torch.randn(M, N, device="cuda", generator=gen)
    y = 1 + 0.01 * torch.randn(M, N, device="cuda", generator=gen)
    fwd, rev, aff, raff = (torch.full((M, N), float("nan"), device="cuda") for _ in range(4))
    lib.variant(variant)[(1,)](x, y, fwd, rev, aff, raff)
    torch.cuda.synchronize()
    xd, yd = x.double().cpu(), y.double().cpu()
    for got, want in [(fwd, xd.cumsum(1)), (rev, xd.flip(0).cumsum(0).flip(0)), (aff, _affine(yd, xd, 0)),
                      (raff, _affine(yd.flip(1), xd.flip(1), 1).flip(1))]:
        torch.testing.assert_close(got.double().cpu(), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("variant,M,N", [("scan_slice_16x64_w4", 16, 64), ("scan_slice_128x32_w8", 128, 32)])
def test_scan_of_a_slice_layout(torch, lib, variant, M, N):  # noqa: F811  (fixtures)
    """A cumsum of a block's row sums, scanned in the reduction's slice layout."""
    gen = torch.Generator(device="cuda").manual_seed(M + N)
    x = torch.randn(M, N, device="cuda", generator=gen)
    sl = torch.full((M + 1,), float("nan"), device="cuda")
    lib.variant(variant)[(1,)](x, sl)
    torch.cuda.synchronize()
    torch.testing.assert_close(sl[:M].double().cpu(), x.double().cpu().sum(1).cumsum(0), rtol=1e-4, atol=1e-3)
    assert torch.isnan(sl[M:]).all()


@pytest.mark.parametrize("variant,n,dtype", [("scan_int_2048_w4", 2048, "int32"), ("scan_int_64_w2", 64, "int32"),
                                             ("scan_i64_1024_w4", 1024, "int64")])
def test_integer_scans_are_exact(torch, lib, variant, n, dtype):  # noqa: F811  (fixtures)
    """An integer cumsum forward and a running maximum from the end, bit for bit (64-bit values
    cross lanes as two shuffled halves)."""
    gen = torch.Generator(device="cuda").manual_seed(n)
    dt = getattr(torch, dtype)
    x = torch.randint(-1000, 1000, (n,), device="cuda", dtype=dt, generator=gen) * (1 << 33 if dtype == "int64" else 1)
    fwd, rev = (torch.full((n,), -7, device="cuda", dtype=dt) for _ in range(2))
    lib.variant(variant)[(1,)](x, fwd, rev)
    torch.cuda.synchronize()
    xc = x.cpu()
    assert torch.equal(fwd.cpu(), xc.cumsum(0).to(dt))
    assert torch.equal(rev.cpu(), xc.flip(0).cummax(0).values.flip(0))
