"""The frontend's kernels in kernels/ (tutorial 04 dropout, cumsum, argmax, tutorial 03 matmul): their variants build, dropout computes Triton's mask, and matmul builds through LLIR on tensor cores, and an op the backend lacks (a rank-3 fp64 tt.dot) stops the build with a located "not supported yet"."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
import ttir_eval  # noqa: E402  (tests/frontend is on sys.path)
from test_random import reference, uniform  # noqa: E402

from ttbuild.stages import llir, parse, ttgir, ttir

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
                                                     "target": "cuda:90",
                                                     "disable_mma_v3": variant.get("disable_mma_v3", False)})["ttgir"]
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


@pytest.mark.parametrize("name", [v["name"] for v in VARIANTS if v["kernel"] == "matmul_kernel"])
def test_matmul_builds_through_llir_on_tensor_cores(name):
    v = next(v for v in VARIANTS if v["name"] == name)
    assert "until" not in v
    out = stages(v, "llir")
    # sm_90: wgmma where Triton's MMAv3 conditions hold (a warpgroup, 64-row blocks), else mma.sync
    cx = v["constexprs"]
    wgmma = v.get("num_warps", 4) % 4 == 0 and cx["BLOCK_SIZE_M"] % 64 == 0 and not v.get("disable_mma_v3")
    want = "wgmma.mma_async.sync.aligned.m64n" if wgmma else "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    assert want in out["llir"].decode()


PRINT_FP8 = """import triton
import triton.language as tl


@triton.jit
def pfp8(a_ptr):
    x = tl.load(a_ptr + tl.arange(0, 16)).to(tl.float8e5)
    tl.device_print("x", x)
"""


def test_build_reports_unsupported_llir_location(tmp_path):
    """A construct the llir stage does not lower yet (printing fp8 values) fails that variant
    with the message and the kernel line it comes from."""
    lib = tmp_path / "kernels"
    lib.mkdir()
    (lib / "pfp8.py").write_text(PRINT_FP8)
    (lib / "variants.toml").write_text('[[variant]]\nname = "pfp8"\nfile = "pfp8.py"\nkernel = "pfp8"\n'
                                      'signature = "*fp32:16"\nnum_warps = 4\n')
    proc = subprocess.run([sys.executable, "-m", "ttbuild", "build", str(lib), "-o", str(tmp_path / "art"),
                           "--cache", "off"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    line = PRINT_FP8.splitlines().index('    tl.device_print("x", x)') + 1
    assert re.search(rf"not supported yet: tt\.print of f8E5M2 at pfp8\.py:{line} in stage llir",
                     proc.stdout + proc.stderr), proc.stdout[-3000:] + proc.stderr[-3000:]
