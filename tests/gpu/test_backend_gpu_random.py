"""Philox on the GPU: tl.rand / randint / randn / randint4x from our cubin equal Triton's kernel compiled from the same source, bit for bit (skips without triton), and the dropout of kernels/ keeps exactly the elements Triton's dropout keeps.

Artifacts: the test-only kernels as in tests/gpu/test_backend_gpu_reduce.py (`$TTBUILD_TEST_ARTIFACTS`,
else ./build/test-artifacts, else built here); the dropout variants from the library
(`$TTBUILD_ARTIFACTS`, else ./artifacts).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from test_backend_gpu_reduce import lib, torch  # noqa: F401  (fixtures)

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]


def _triton_module(path: Path):
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location(f"triton_src_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _outputs(torch, n):
    u = torch.full((n + 8,), float("nan"), device="cuda")
    i = torch.full((n + 8,), -1, device="cuda", dtype=torch.int32)
    g = torch.full((n + 8,), float("nan"), device="cuda")
    q = torch.full((4 * n + 8,), -1, device="cuda", dtype=torch.int32)
    return u, i, g, q


@pytest.mark.parametrize("variant,block,warps,seed,n", [
    ("random_i32seed", 1024, 4, 0, 1), ("random_i32seed", 1024, 4, 123, 5000),
    ("random_i32seed", 1024, 4, -7, 3001), ("random_i32seed", 1024, 4, 2**31 - 1, 2048),
    ("random_i64seed", 256, 2, 2**40 + 17, 1000), ("random_i64seed", 256, 2, -(2**35), 777),
])
def test_philox_equals_triton_bit_for_bit(torch, lib, variant, block, warps, seed, n):
    mod = _triton_module(REPO / "tests" / "data" / "gpu_kernels" / "random.py")
    ours, theirs = _outputs(torch, n), _outputs(torch, n)
    grid = (-(-n // block),)
    lib.variant(variant)[grid](*ours, seed, n)
    mod.random_kernel[grid](*theirs, seed, n, BLOCK=block, num_warps=warps)
    torch.cuda.synchronize()
    for name, a, b in zip(("rand", "randint", "randn", "randint4x"), ours, theirs):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32)), f"{name} differs from Triton's"
    u, i, g, q = ours
    assert ((u[:n] >= 0) & (u[:n] < 1)).all() and torch.isfinite(g[:n]).all()
    assert torch.isnan(u[n:]).all() and (i[n:] == -1).all() and (q[4 * n:] == -1).all(), "wrote past n"
    if n >= 2000:  # uniform enough that a wrong generator (e.g. constant or low bits only) shows
        assert abs(u[:n].double().mean().item() - 0.5) < 0.05 and 0.8 < g[:n].double().std().item() < 1.2


@pytest.fixture(scope="module")
def library(torch):
    import ttbuild.runtime as rt

    art = Path(os.environ.get("TTBUILD_ARTIFACTS", REPO / "artifacts"))
    if not (art / "lib").is_dir():
        pytest.skip(f"no {art / 'lib'} (build the kernels first: `doit`)")
    return rt.load(str(art))


@pytest.mark.parametrize("variant,dtype", [("dropout_1024", "float32"), ("dropout_fp16_1024", "float16")])
@pytest.mark.parametrize("n", [1, 1000, 2**20 + 3])
def test_dropout_keeps_what_triton_keeps(torch, library, variant, dtype, n):
    mod = _triton_module(REPO / "kernels" / "dropout.py")
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = (torch.rand(n, device="cuda", generator=gen) + 0.5).to(dt)  # never 0: kept elements are nonzero
    p, seed = 0.3, 1234 + n
    ours = torch.full((n + 8,), float("nan"), device="cuda", dtype=dt)
    theirs = torch.full((n,), float("nan"), device="cuda", dtype=dt)
    grid = (-(-n // 1024),)
    library.variant(variant)[grid](x, ours, n, p, seed)
    mod._seeded_dropout[grid](x, theirs, n, p, seed, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    assert torch.equal(ours[:n] != 0, theirs != 0), "a different keep mask: Philox or the compare differs"
    torch.testing.assert_close(ours[:n], theirs, rtol=0, atol=0)
    assert torch.isnan(ours[n:]).all()
    if n > 1000:
        assert abs((ours[:n] != 0).double().mean().item() - (1 - p)) < 0.01
