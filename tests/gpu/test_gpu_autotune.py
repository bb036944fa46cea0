"""The autotuned matmul (kernels/matmul_autotune.py, @triton.autotune + @triton.heuristics) on a real GPU: `ttbuild tune`'s core tunes it over three shapes, the recorded winner is the fastest config when every config is timed again, and launches through the table compute A @ B at tuned, nearby and odd shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
SHAPES = [{"M": 256, "N": 256, "K": 256}, {"M": 1024, "N": 1024, "K": 1024}, {"M": 2048, "N": 1024, "K": 512}]
# Timing noise between two timings of the same kernel: the winner must be within this of the best.
NOISE = 1.10
JITTER_MS = 0.0015  # a launch's jitter: 10% of a 7 us kernel (256^3) is below what one re-timing resolves


@pytest.fixture(scope="module")
def tuned(lib, tmp_path_factory):
    from ttbuild.runtime.tuned import TunedLauncher

    try:
        launcher = lib["tuned_matmul_kernel"]
    except KeyError:
        pytest.skip("tuned_matmul_kernel is not in the library (rebuild: `doit`)")
    assert isinstance(launcher, TunedLauncher)
    return launcher


def test_the_recorded_winner_is_the_fastest_config_timed_again(torch, tuned, tmp_path):
    from ttbuild.runtime import tuner

    # the row's harness, with three small shapes so the test stays short
    plan = {"tuned_matmul_fp16": {"args": "matmul_autotune_tune.py:make_args", "shapes": SHAPES}}
    doc = tuner.tune_kernel(tuned, str(KERNELS), str(tmp_path), "tuned_matmul_kernel", only=plan,
                            warmup_ms=10, rep_ms=40)
    table = json.loads((tmp_path / "tuned_matmul_kernel.json").read_text())
    assert table == json.loads(json.dumps(doc)) and len(table["entries"]) == 3
    make = tuner.load_harness(str(KERNELS), "matmul_autotune_tune.py:make_args")
    for entry in table["entries"]:
        times = {int(c): t for c, t in entry["times_ms"].items()}
        assert entry["config"] == tuner.winner(times)  # reproducible from the recorded times
        args, grid = make(**entry["shape"])
        again = tuner.time_configs(tuned, tuple(args), grid, warmup_ms=10, rep_ms=40)
        best = min(t for t in again.values() if t is not None)
        assert again[entry["config"]] <= max(NOISE * best, best + JITTER_MS), (entry["shape"], again)


@pytest.mark.parametrize("shape", [(512, 512, 512), (500, 390, 200), (1024, 2040, 777)])
def test_launches_through_the_table_match_torch(torch, tuned, shape, tmp_path):
    from ttbuild.runtime.tuned import TunedLauncher
    from ttbuild.runtime.tuningtable import TABLE_SCHEMA, TuningTable

    M, N, K = shape
    table = TuningTable({"schema": TABLE_SCHEMA, "entries": [
        {"group": "tuned_matmul_fp16", "key": [512, 512, 512, "fp16", "fp16", "fp16"], "config": 3, "times_ms": {}}]})
    launcher = TunedLauncher(tuned.kernel, tuned.variants, table=table)
    # rows padded to 16 elements: the variants promise 16-divisible strides, not sizes
    pad = lambda n: -(-n // 16) * 16  # noqa: E731
    a = torch.randn(M, pad(K), device="cuda", dtype=torch.float16)[:, :K]
    b = torch.randn(K, pad(N), device="cuda", dtype=torch.float16)[:, :N]
    c = torch.full((M, pad(N)), float("nan"), device="cuda", dtype=torch.float16)[:, :N]
    grid = lambda meta: (-(-M // meta["BLOCK_SIZE_M"]) * -(-N // meta["BLOCK_SIZE_N"]),)  # noqa: E731
    launcher[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    chosen = launcher.config_for(a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    assert chosen["config"] == 3 and chosen["how"] == ("exact" if shape == (512, 512, 512) else "nearest")
    ref = a.float() @ b.float()
    assert torch.allclose(c.float(), ref, rtol=1e-2, atol=5e-2 * max(1, K / 256) ** 0.5)
    even = launcher.select(a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)).constexprs["EVEN_K"]
    assert even == (K % 32 == 0)


def test_online_tuning_records_an_unseen_key_and_launches_its_winner(torch, tuned, tmp_path):
    """TTBUILD_TUNE_ONLINE=1's path: the first launch at a key the table lacks times every config on
    the call's own arguments, writes the entry, and the result is still A @ B."""
    from ttbuild.runtime import tuner
    from ttbuild.runtime.tuned import TunedLauncher

    path = tmp_path / "tuned_matmul_kernel.json"
    launcher = TunedLauncher(tuned.kernel, tuned.variants, table=None, table_file=str(path), online=True)
    n = 384
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
    args = (a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    grid = lambda meta: (-(-n // meta["BLOCK_SIZE_M"]) * -(-n // meta["BLOCK_SIZE_N"]),)  # noqa: E731
    launcher[grid](*args)
    torch.cuda.synchronize()
    (entry,) = json.loads(path.read_text())["entries"]
    assert entry["key"] == [n, n, n, "fp16", "fp16", "fp16"] and len(entry["times_ms"]) == len(launcher.configs)
    assert entry["config"] == tuner.winner({int(k): t for k, t in entry["times_ms"].items()})
    assert launcher.config_for(*args) == {"config": entry["config"], "how": "exact", "key": tuple(entry["key"]),
                                          "kwargs": launcher.config_kwargs[entry["config"]]}
    assert torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)
