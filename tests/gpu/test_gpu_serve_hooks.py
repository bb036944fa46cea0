"""GPU tests of serving's extras on the serve test project: Triton's launch hooks on served launches, the --summary line, and `ttbuild tune --recorded` retiming the recorded autotune keys."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from test_gpu_serve import _artifacts, _run, recorded  # noqa: F401  (recorded: test_gpu_serve's fixture)

pytestmark = pytest.mark.gpu

HOOKED = """
import sys
import torch
import ttbuild.runtime as rt
rt.serve(sys.argv[1], miss="error")
from triton import knobs
from servepkg import ops
names = []
knobs.runtime.launch_enter_hook.add(lambda md: names.append(("enter", md.get()["name"])))
knobs.runtime.launch_exit_hook.add(lambda md: names.append(("exit", md.get()["name"])))
x = torch.randn(4096, device="cuda")
torch.testing.assert_close(ops.scale(x, 2.0), 2.0 * x)
torch.testing.assert_close(ops.rowsum(x.view(64, 64)), x.view(64, 64).sum(1), rtol=1e-4, atol=1e-4)
print(names)
"""


def _art():
    art = _artifacts()
    if not (art / "lib").is_dir():
        pytest.skip(f"no {art} (tests/gpu/build_test_artifacts.py builds it)")
    return art


def test_served_launches_call_tritons_hooks_and_compile_nothing(recorded):  # noqa: F811
    art = _art()
    cache = recorded / "hooks-cache"
    cache.mkdir()
    out = _run([sys.executable, "-c", HOOKED, str(art)], recorded / "proj", cache, TTBUILD_SERVE_SUMMARY="1")
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.splitlines()[-1] == str([("enter", "scale_kernel"), ("exit", "scale_kernel"),
                                               ("enter", "rowsum_kernel"), ("exit", "rowsum_kernel")])
    assert list(cache.rglob("*")) == []
    assert out.stderr.splitlines()[-1] == ("ttbuild serve: 2 launches served, 0 missed (policy error); "
                                           "Triton compiled 0 kernels (0 more from its cache)")


def test_tune_recorded_retimes_the_recorded_keys(recorded, tmp_path):  # noqa: F811
    art = tmp_path / "art"
    shutil.copytree(_art(), art)
    table = recorded / "tuning" / "rowsum_kernel.json"
    before = json.loads(table.read_text())
    assert all("args" in e and e["grids"] for e in before["entries"])
    out = _run([sys.executable, "-m", "ttbuild", "tune", "-o", str(art), "--recorded", str(table), "--rep-ms", "20"],
               recorded / "proj", recorded / "tune-cache")
    assert out.returncode == 0, out.stderr[-4000:]
    after = json.loads((art / "tuning" / "rowsum_kernel.json").read_text())
    assert after["configs"] == before["configs"] and after["retuned"]["entries"] == len(before["entries"])
    for e in after["entries"]:
        assert sorted(e["times_ms"]) == sorted(before["configs"]) and all(t > 0 for t in e["times_ms"].values())
        assert e["config"] == int(min(e["times_ms"], key=e["times_ms"].get))
