"""The frontend's kernels in kernels/ (tutorial 04 dropout, cumsum, argmax, tutorial 03 matmul): their variants build, dropout computes Triton's mask, and matmul stops where the backend stops (tt.dot) with a located "not supported yet"."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from ttbuild.errors import NotSupportedYet
from ttbuild.frontend.locs import locate
from ttbuild.stages import llir, parse, ttgir, ttir

import ttir_eval  # noqa: E402  (tests/frontend is on sys.path)
from test_random import reference, uniform  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels"
MINE = ("dropout.py", "cumsum.py", "argmax.py", "matmul.py")
VARIANTS = [v for v in tomllib.loads((KERNELS / "variants.toml").read_text())["variant"] if v["file"] in MINE]


def stages(variant: dict, until: str):
    src = (KERNELS / variant["file"]).read_bytes()
    p = parse.run({"source": src}, {"kernel": variant["kernel"], "file": variant["file"]})
    out = {"loc": p["loc"]}
    out["ttir"] = ttir.run({"json": p["json"]}, {"signature": variant["signature"].split(","),
                                                 "constexprs": variant.get("constexprs", {})})["ttir"]
    if until == "ttir":
        return out
    out["ttgir"] = ttgir.run({"ttir": out["ttir"]}, {"num_warps": variant.get("num_warps", 4), "num_ctas": 1,
                                                     "num_stages": variant.get("num_stages", 3),
                                                     "target": "cuda:90"})["ttgir"]
    if until == "ttgir":
        return out
    out["llir"] = llir.run({"ttgir": out["ttgir"]}, {"target": "cuda:90", "enable_fp_fusion": True,
                                                     "debug": False})["llir"]
    return out


def test_every_frontend_kernel_has_variants():
    assert sorted({v["file"] for v in VARIANTS}) == sorted(MINE)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v["name"])
def test_variant_builds_to_its_last_stage(variant):
    out = stages(variant, {"cubin": "llir"}.get(variant.get("until", "cubin"), variant.get("until", "cubin")))
    text = out["ttir"].decode()
    assert '"tt.store"' in text


@pytest.mark.parametrize("p", [0.5, 0.25])
def test_dropout_keeps_exactly_where_triton_rand_exceeds_p(p):
    v = dict(next(v for v in VARIANTS if v["name"] == "dropout_1024"), constexprs={"BLOCK_SIZE": 256})
    text = stages(v, "ttir")["ttir"].decode()
    n, seed = 200, 123
    x = np.linspace(1.0, 2.0, 256, dtype=np.float32)
    bufs = {"x": x, "out": np.full(256, -7.0, np.float32)}
    ttir_eval.run(text, ["x", "out", n, np.float32(p), seed], bufs)
    keep = uniform(reference(seed, np.arange(256))[0]) > np.float32(p)
    want = np.where(keep, x / (np.float32(1) - np.float32(p)), np.float32(0))
    np.testing.assert_array_equal(bufs["out"][:n], want[:n])
    assert (bufs["out"][n:] == -7.0).all()  # masked off: untouched
    assert 0.2 < keep[:n].mean() < 0.9


def _dot_line() -> int:
    lines = (KERNELS / "matmul.py").read_text().splitlines()
    return next(i for i, l in enumerate(lines, 1) if "tl.dot(" in l)


@pytest.mark.parametrize("name", [v["name"] for v in VARIANTS if v["kernel"] == "matmul_kernel"])
def test_matmul_past_its_until_stage_names_tt_dot_and_its_line(name):
    v = next(v for v in VARIANTS if v["name"] == name)
    assert v["until"] == "ttgir"
    out = stages(v, "ttgir")
    assert '"tt.dot"' in out["ttgir"].decode()
    with pytest.raises(NotSupportedYet) as e:
        stages(v, "llir")
    located = locate(e.value, out["loc"])
    assert located.message == f"not supported yet: tt.dot at matmul.py:{_dot_line()} in stage llir"
    assert "accumulator = tl.dot(a, b, accumulator)" in str(located)


def test_build_without_until_reports_tt_dot_location(tmp_path):
    lib = tmp_path / "kernels"
    lib.mkdir()
    shutil.copy(KERNELS / "matmul.py", lib)
    block = next(v for v in VARIANTS if v["kernel"] == "matmul_kernel")
    lines = ["[[variant]]"] + [f"{k} = {_toml(val)}" for k, val in block.items() if k != "until"]
    (lib / "variants.toml").write_text("\n".join(lines) + "\n")
    proc = subprocess.run([sys.executable, "-m", "ttbuild", "build", str(lib), "-o", str(tmp_path / "art"),
                           "--cache", "off"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert re.search(rf"not supported yet: tt\.dot at matmul\.py:{_dot_line()} in stage llir", proc.stdout + proc.stderr), \
        proc.stdout[-3000:] + proc.stderr[-3000:]


def _toml(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v).lower() if isinstance(v, bool) else str(v)
