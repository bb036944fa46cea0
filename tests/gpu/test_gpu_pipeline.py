"""Pipelined loops (tl.range(num_stages=3/4), cp.async ring in shared memory) against torch on a real GPU: row counts below, at and off the stage count, columns off the block, poisoned outputs.

Artifacts: $TTBUILD_TEST_ARTIFACTS/pipeline (default build/test-artifacts/pipeline), written by
tests/gpu/build_test_artifacts.py on the CPU machine and carried to the GPU machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
ART = Path(os.environ.get("TTBUILD_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts") / "pipeline"
ROWS = [0, 1, 2, 3, 5, 1003]
DTYPES = {"fp32": "float32", "fp16": "float16", "i32": "int32"}


def _variants() -> list[dict]:
    lib = ART / "lib"
    return [json.loads(p.read_text()) for p in sorted(lib.glob("*.json"))] if lib.is_dir() else []


def _ids(kernels):
    found = [v for v in _variants() if v["kernel"] in kernels]
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no pipeline artifacts in {ART}"))]
    return [pytest.param(v, id=v["variant"]) for v in found]


@pytest.fixture(scope="module")
def lib(torch):
    import ttbuild.runtime as rt
    if not (ART / "lib").is_dir():
        pytest.skip(f"no {ART / 'lib'}")
    return rt.load(str(ART))


def _cols(v) -> int:
    """Columns off the block; a multiple of 16 where the signature promises it (i32:16)."""
    bn = v["constexprs"]["BN"]
    aligned = next(p for p in v["params"] if p["name"] == "N")["divisibility"] == 16
    return 2 * bn + (48 if aligned else 37)


def _dtype(torch, v):
    return getattr(torch, DTYPES[v["signature"].split(",")[0].lstrip("*").split(":")[0]])


def _poisoned(torch, n):
    return torch.full((n,), float("nan"), device="cuda", dtype=torch.float32)


def _cdiv(a, b):
    return -(-a // b)


def _close(torch, out, ref, rows, half=False):
    """fp32 accumulation over `rows` terms; fp16 tiles may be summed in fp16 first (tl.sum)."""
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), "outputs never written"
    tol = 1e-2 if half else 1e-4
    torch.testing.assert_close(out.double(), ref.double(), rtol=tol, atol=tol * max(1, rows) ** 0.5)


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("v", _ids(("colsum_kernel", "colsum_plain_kernel", "colmax_kernel")))
def test_column_reductions(torch, lib, v, rows):
    N = _cols(v)
    gen = torch.Generator(device="cuda").manual_seed(rows * 7919 + N)
    x = torch.randn(rows, N, device="cuda", generator=gen).to(_dtype(torch, v))
    y = _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](x, y, rows, N, N)
    if v["kernel"] == "colmax_kernel":
        ref = x.double().amax(0) if rows else torch.full((N,), float("-inf"), device="cuda")
        torch.cuda.synchronize()
        assert torch.equal(y.double(), ref.double()), "max is exact"
    else:
        _close(torch, y, x.double().sum(0), rows, half=x.dtype == torch.float16)


@pytest.mark.parametrize("start,step", [(0, 1), (3, 2), (1, 5), (2000, 3)])
@pytest.mark.parametrize("v", _ids(("colsum_step_kernel",)))
def test_runtime_bounds_and_step(torch, lib, v, start, step):
    rows, N = 1001, _cols(v)
    x = torch.randn(rows, N, device="cuda")
    y = _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](x, y, rows, N, N, start, step)
    _close(torch, y, x[start::step].double().sum(0), rows)


@pytest.mark.parametrize("rows", [0, 2, 1003])
@pytest.mark.parametrize("v", _ids(("gather_kernel",)))
def test_indirect_load_through_pipelined_index(torch, lib, v, rows):
    N = _cols(v)
    src = torch.randn(4099, device="cuda")
    idx = torch.randint(0, src.numel(), (rows, N), device="cuda", dtype=torch.int32)
    y = _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](idx, src, y, rows, N)
    _close(torch, y, src[idx.long()].double().sum(0), rows)


@pytest.mark.parametrize("rows", [0, 1, 17, 1003])
@pytest.mark.parametrize("v", _ids(("tilesum_kernel",)))
def test_tiles_with_reduction_in_loop(torch, lib, v, rows):
    """The ring sits above the reduction's scratch: both live in the same iteration."""
    N = _cols(v)
    x = torch.randn(rows, N, device="cuda").to(_dtype(torch, v))
    y = _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](x, y, rows, N, N)
    _close(torch, y, x.double().sum(0), rows, half=x.dtype == torch.float16)


# Trip counts 1, 2, S-1, S, S+1 for every S in 2..5, none, and many.
CARRIED_ROWS = [0, 1, 2, 3, 4, 5, 6, 1003]


@pytest.mark.parametrize("rows", CARRIED_ROWS)
@pytest.mark.parametrize("v", _ids(("colsum_ptr_kernel",)))
def test_carried_pointer(torch, lib, v, rows):
    """`ptrs += stride_m` in a tl.range(num_stages=S) loop: the copies run through the pointer
    advanced ahead of the loop."""
    N = _cols(v)
    gen = torch.Generator(device="cuda").manual_seed(rows * 31 + N)
    x = torch.randn(rows, N, device="cuda", generator=gen).to(_dtype(torch, v))
    y = _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](x, y, rows, N, N)
    _close(torch, y, x.double().sum(0), rows, half=x.dtype == torch.float16)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 1003])
@pytest.mark.parametrize("v", _ids(("colsum_ptr_after_kernel",)))
def test_carried_pointer_read_after_loop(torch, lib, v, rows):
    """The loop's own pointer reaches the code after the loop unadvanced: z is row M-1 exactly."""
    N = _cols(v)
    x = torch.randn(rows, N, device="cuda")
    y, z = _poisoned(torch, N), _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](x, y, z, rows, N, N)
    _close(torch, y, x[:-1].double().sum(0), rows)
    assert torch.equal(z, x[-1])


# Row counts as (tiles, extra rows): 1, 2, S-1, S, S+1 tiles for S in 2..5, with masked tails.
TILE_ROWS = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1), (3, 0), (3, -1), (5, 0), (5, 7), (40, 3)]


@pytest.mark.parametrize("tiles,extra", TILE_ROWS)
@pytest.mark.parametrize("v", _ids(("tilesum_ptr_kernel", "tilesum_bp_kernel")))
def test_carried_tiles_with_masked_tails(torch, lib, v, tiles, extra):
    """[BM, BN] tiles through carried pointers (tail mask from a carried row offset) and through
    a block pointer advanced in the loop (bounds checked, zero padding)."""
    rows, N = tiles * v["constexprs"]["BM"] + extra, _cols(v)
    x = torch.randn(rows, N, device="cuda").to(_dtype(torch, v))
    y = _poisoned(torch, N)
    lib.variant(v["variant"])[(_cdiv(N, v["constexprs"]["BN"]),)](x, y, rows, N, N)
    _close(torch, y, x.double().sum(0), rows, half=x.dtype == torch.float16)


def _divisible(v, name: str) -> bool:
    return next(p for p in v["params"] if p["name"] == name)["divisibility"] == 16


@pytest.mark.parametrize("tail", [0, 16, 7])
@pytest.mark.parametrize("tiles", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("v", _ids(("matmul_kernel",)))
def test_matmul_pipelined_dot_loop(torch, lib, v, tiles, tail):
    """C = A @ B (tutorial-form kernel, the K loop pipelined at num_stages = S): K tiles 1..6
    (1, 2, S-1, S, S+1 for every S in 2..5), the last tile short by `tail` columns (masked,
    zero-filled by cp.async), M and N off the tile. Small-integer fp16 inputs: every partial sum
    is exact in fp32, so C must equal the float64 product bit for bit. A's rows are padded to a
    multiple of 16 elements (its row stride is declared i32:16)."""
    c = v["constexprs"]
    if tail % 16 and _divisible(v, "K"):
        pytest.skip("K must be a multiple of 16 for this variant")
    M, N, K = 2 * c["BM"] + 48, c["BN"] + 16, tiles * c["BK"] - tail
    gen = torch.Generator(device="cuda").manual_seed(tiles * 131 + tail)
    a = torch.randint(-2, 3, (M, -(-K // 16) * 16), device="cuda", generator=gen).half()[:, :K]
    b = torch.randint(-2, 3, (K, N), device="cuda", generator=gen).half()
    out = torch.full((M, N), float("nan"), device="cuda")
    grid = (_cdiv(M, c["BM"]) * _cdiv(N, c["BN"]),)
    lib.variant(v["variant"])[grid](a, b, out, M, N, K, a.stride(0), N, N)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).float()
    assert torch.equal(out, ref), f"{(out != ref).sum().item()} of {out.numel()} differ"


@pytest.mark.parametrize("tiles,tail", [(1, 0), (2, 16), (3, 0), (5, 16)])
@pytest.mark.parametrize("v", _ids(("matmul_persistent_kernel",)))
def test_matmul_pipelined_loop_nested_in_tile_loop(torch, lib, v, tiles, tail):
    """Each of NUM_PROGS programs walks several output tiles, running the pipelined K loop (and
    its prologue, and the epilogue scratch sharing the rings' bytes) once per tile: bit-exact."""
    c = v["constexprs"]
    M, N, K = 2 * c["BM"] + 48, 3 * c["BN"] + 16, tiles * c["BK"] - tail
    gen = torch.Generator(device="cuda").manual_seed(tiles * 7 + tail)
    a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
    b = torch.randint(-2, 3, (K, N), device="cuda", generator=gen).half()
    out = torch.full((M, N), float("nan"), device="cuda")
    lib.variant(v["variant"])[(c["NUM_PROGS"],)](a, b, out, M, N, K, K, N, N)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).float()
    assert torch.equal(out, ref), f"{(out != ref).sum().item()} of {out.numel()} differ"


@pytest.mark.parametrize("tiles", [1, 2, 3, 4])
@pytest.mark.parametrize("v", _ids(("matmul_rowsum_kernel",)))
def test_range_loop_with_dot_and_other_load(torch, lib, v, tiles):
    """C = A @ B + rowsum(R) through one loop with swizzled dot rings and a plain ring: bit-exact
    (small integers; R integer-valued fp32)."""
    c = v["constexprs"]
    M, N, K = c["BM"], c["BN"], tiles * c["BK"] - 16
    gen = torch.Generator(device="cuda").manual_seed(tiles)
    a = torch.randint(-2, 3, (M, K), device="cuda", generator=gen).half()
    b = torch.randint(-2, 3, (K, N), device="cuda", generator=gen).half()
    r = torch.randint(-8, 9, (tiles, M), device="cuda", generator=gen).float()
    out = torch.full((M, N), float("nan"), device="cuda")
    lib.variant(v["variant"])[(1,)](a, b, out, r, M, N, K, K, N)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double() + r.double().sum(0)[:, None]).float()
    assert torch.equal(out, ref), f"{(out != ref).sum().item()} of {out.numel()} differ"
