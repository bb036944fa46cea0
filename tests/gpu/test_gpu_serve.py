"""GPU tests of record -> build -> serve on a project of our own (tests/data/serve_proj): recording yields the committed rows (None and dtype constexprs among them); serving compiles nothing.

The served run of the same call sites leaves Triton's cache empty and matches Triton's outputs.

The library is tests/data/serve_proj/variants.toml built on the CPU machine into
$TTBUILD_TEST_ARTIFACTS/serve (tests/gpu/build_test_artifacts.py), tuning table included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from ttbuild.record.rows import row_identity

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "tests" / "data" / "serve_proj"


def _artifacts() -> Path:
    # absolute: the recorded project runs in its own folder
    return Path(os.environ.get("TTBUILD_TEST_ARTIFACTS", REPO / "build" / "test-artifacts")).resolve() / "serve"


def _run(args, cwd, cache, **env):
    full = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(REPO), str(cwd)]), **env)
    return subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=540)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, torch):
    pytest.importorskip("triton")
    tmp = tmp_path_factory.mktemp("record")
    proj = tmp / "proj"
    shutil.copytree(PROJECT, proj, ignore=shutil.ignore_patterns("variants.toml", "tuning", "__pycache__"))
    out = _run([sys.executable, "-m", "ttbuild", "record", "--root", ".", "-o", str(tmp / "rows.toml"), "--tuning",
                str(tmp / "tuning"), "--", sys.executable, "drive.py", str(tmp / "triton.pt")], proj, tmp / "cache")
    assert out.returncode == 0, out.stderr[-4000:]
    return tmp


def test_recording_gives_the_committed_rows(recorded):
    rows = tomllib.loads((recorded / "rows.toml").read_text())["variant"]
    committed = tomllib.loads((PROJECT / "variants.toml").read_text())["variant"]
    assert {row_identity(r) for r in rows} == {row_identity(r) for r in committed}
    assert (recorded / "tuning" / "rowsum_kernel.json").is_file()


def test_served_run_compiles_nothing_and_matches_triton(recorded, torch):
    art = _artifacts()
    if not (art / "lib").is_dir():
        pytest.skip(f"no {art} (tests/gpu/build_test_artifacts.py builds it)")
    cache = recorded / "served-cache"
    cache.mkdir()
    proj = recorded / "proj"
    out = _run([sys.executable, "drive.py", str(recorded / "served.pt"), "--serve", str(art)], proj, cache)
    assert out.returncode == 0, out.stderr[-4000:]
    assert list(cache.rglob("*")) == []  # Triton compiled nothing
    want = torch.load(recorded / "triton.pt")
    got = torch.load(recorded / "served.pt")
    assert sorted(got) == sorted(want)
    # rowscale_kernel: served with w_ptr None (its default) and a tensor, OUT_DTYPE tl.float16 / tl.float32,
    # from rows spelled { none = true } / { dtype = "fp16" }
    assert {f"rowscale_{w}_torch.{d}" for w in ("w", "none") for d in ("float16", "float32")} <= set(got)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=1e-4, atol=1e-4, msg=key)
