"""tl.sort, tl.topk and tl.flip on the GPU (tests/data/gpu_kernels/sorting.py) against torch.sort / torch.topk / torch.flip: rows past M untouched, packed key/position sort equals a stable argsort.

Artifacts as in tests/gpu/test_backend_gpu_reduce.py (`$TTBUILD_TEST_ARTIFACTS`, else
./build/test-artifacts, else built here).
"""

from __future__ import annotations

import pytest
from test_backend_gpu_reduce import lib, torch  # noqa: F401  (fixtures)

pytestmark = pytest.mark.gpu


def _cdiv(a, b):
    return -(-a // b)


def _input(th, dtype, shape, seed):
    gen = th.Generator(device="cuda").manual_seed(seed)
    if dtype.is_floating_point:
        return (th.randn(shape, device="cuda", generator=gen) * 100).to(dtype)
    info = th.iinfo(dtype)
    return th.randint(info.min, info.max, shape, device="cuda", generator=gen, dtype=dtype)


# (variant, dtype name, BM, N, descending, M)
SORTS = [("sort_f32_4x256", "float32", 4, 256, False, 13), ("sort_i32_desc_2x1024", "int32", 2, 1024, True, 5),
         ("sort_f16_16x32", "float16", 16, 32, False, 40), ("sort_i64_1x128", "int64", 1, 128, False, 3)]


@pytest.mark.parametrize("variant,dtype,bm,n,desc,m", SORTS)
def test_sort_rows_equals_torch_sort(torch, lib, variant, dtype, bm, n, desc, m):  # noqa: F811  (fixtures)
    dt = getattr(torch, dtype)
    x = _input(torch, dt, (m, n), m * n)
    if dt.is_floating_point:
        x[0, :4] = x[0, 4]  # ties
    y = torch.full((m + bm, n), 7, device="cuda", dtype=dt)
    lib.variant(variant)[(_cdiv(m, bm),)](x, y, m)
    torch.cuda.synchronize()
    assert torch.equal(y[:m], torch.sort(x, dim=-1, descending=desc).values)
    assert (y[m:] == 7).all()


def test_topk_equals_torch_topk(torch, lib):  # noqa: F811  (fixtures)
    m, n, k = 10, 128, 8
    x = _input(torch, torch.float32, (m, n), 99)
    y = torch.full((m + 4, k), float("nan"), device="cuda")
    lib.variant("topk_f32_4x128_k8")[(_cdiv(m, 4),)](x, y, m)
    torch.cuda.synchronize()
    assert torch.equal(y[:m], torch.topk(x, k, dim=-1).values)
    assert torch.isnan(y[m:]).all()


def test_flip_equals_torch_flip(torch, lib):  # noqa: F811  (fixtures)
    m, n = 20, 64
    x = _input(torch, torch.bfloat16, (m, n), 5)
    y = torch.zeros((m, n), device="cuda", dtype=torch.bfloat16)
    lib.variant("flip_bf16_8x64")[(_cdiv(m, 8),)](x, y, m)
    torch.cuda.synchronize()
    assert torch.equal(y, torch.flip(x, dims=[1]))


@pytest.mark.parametrize("n", [1, 700, 1024])
def test_packed_key_sort_is_a_stable_argsort(torch, lib, n):  # noqa: F811  (fixtures)
    gen = torch.Generator(device="cuda").manual_seed(n)
    keys = torch.randint(0, 64, (1024,), device="cuda", generator=gen, dtype=torch.int32)
    sorted_keys = torch.full((1024,), -1, device="cuda", dtype=torch.int32)
    pos = torch.full((1024,), -1, device="cuda", dtype=torch.int32)
    lib.variant("sort_keys_1024")[(1,)](keys, sorted_keys, pos, n)
    torch.cuda.synchronize()
    want = torch.sort(keys[:n], stable=True)
    assert torch.equal(sorted_keys[:n], want.values)
    assert torch.equal(pos[:n], want.indices.to(torch.int32))
    assert (sorted_keys[n:] == -1).all() and (pos[n:] == -1).all()
