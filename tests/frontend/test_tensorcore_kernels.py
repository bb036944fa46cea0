"""The tensor-core kernels of kernels/ (matmul fp16/fp8, linear, grouped GEMM, attention forward and backward): every variant builds to its `until` stage, and Triton 3.6 turns our TTIR into the same kernel as the same source (mma.sync, ldmatrix, cp.async counts and shared memory on cuda:90 with DISABLE_MMA_V3=1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib
from oracle import run_triton

from ttbuild.signature import split_entries
from ttbuild.stages import parse, ttgir, ttir

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels"
FILES = ("matmul.py", "matmul_fp8.py", "linear.py", "grouped_gemm.py", "attention.py")
VARIANTS = [v for v in tomllib.loads((KERNELS / "variants.toml").read_text())["variant"] if v["file"] in FILES]
DOT_KERNELS = {"matmul_kernel", "matmul_fp8_kernel", "linear_kernel", "grouped_matmul_kernel", "_attn_fwd", "_attn_fwd_desc", "_attn_bwd"}


def _ttir(v: dict) -> bytes:
    p = parse.run({"source": (KERNELS / v["file"]).read_bytes()}, {"kernel": v["kernel"], "file": v["file"]})
    return ttir.run({"json": p["json"]}, {"signature": split_entries(v["signature"]),
                                          "constexprs": v.get("constexprs", {})})["ttir"]


def test_every_kernel_file_has_variants():
    assert {v["file"] for v in VARIANTS} == set(FILES)
    assert {v["kernel"] for v in VARIANTS} >= DOT_KERNELS | {"_attn_bwd_preprocess"}


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v["name"])
def test_variant_reaches_ttgir_with_its_dots(variant):
    """Each variant gets through ttgir (the dot kernels stop there until the tensor-core backend
    lands: their `until` is "ttgir", and the rest build fully through doit)."""
    text = _ttir(variant)
    g = ttgir.run({"ttir": text}, {"num_warps": variant.get("num_warps", 4), "num_ctas": 1,
                                   "num_stages": variant.get("num_stages", 3), "target": "cuda:90"})["ttgir"].decode()
    dots = text.decode().count('"tt.dot"')
    # split_rows runs the 4-warp d128 backward's dK/dV loops (4 dots each) once per 64 keys
    extra = {"attn_bwd_d128": 4, "attn_bwd_d128_causal": 8}.get(variant["name"], 0)
    if variant["kernel"] in DOT_KERNELS:  # on sm_90 a dot may become a ttng.warp_group_dot (wgmma)
        assert dots >= 1 and g.count('"tt.dot"') + g.count('"ttng.warp_group_dot"') == dots + extra
    else:
        assert dots == 0


# Compiles each (TTIR path, kernel file, kernel, signature dict, constexprs, attrs, num_warps,
# num_stages) twice with Triton for cuda:90 forced onto mma.sync: from our TTIR and from the
# kernel source with the same specialization; prints both PTX/shared-memory summaries as JSON.
COMPARE = r"""
import importlib.util, json, os, sys, types
os.environ["DISABLE_MMA_V3"] = "1"          # before triton compiles anything (it is in its cache key)
sys.modules.setdefault("torch", types.ModuleType("torch"))  # kernel files import torch, unused
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

def summary(k):
    ptx = k.asm["ptx"]
    return {"mma.sync": ptx.count("mma.sync"), "wgmma": ptx.count("wgmma.mma_async"),
            "ldmatrix": ptx.count("ldmatrix"), "cp.async": ptx.count("cp.async.cg") + ptx.count("cp.async.ca"),
            "shared": k.metadata.shared}

out = []
for job in json.loads(sys.argv[1]):
    opts = {"num_warps": job["num_warps"], "num_stages": job["num_stages"]}
    target = GPUTarget("cuda", 90, 32)
    ours = summary(triton.compile(job["ttir"], target=target, options=opts))
    spec = importlib.util.spec_from_file_location("k", job["file"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    attrs = {(i,): [["tt.divisibility", 16]] for i in job["div16"]}
    src = ASTSource(getattr(mod, job["kernel"]), signature=job["signature"], constexprs=job["constexprs"], attrs=attrs)
    out.append({"name": job["name"], "ours": ours, "source": summary(triton.compile(src, target=target, options=opts))})
print(json.dumps(out))
"""

# Small members of each family (Triton compiles a large attention backward for tens of seconds).
SAME_AS_SOURCE = ["matmul_fp16_64x32x32_w2_s5", "matmul_fp16_128x128x64_w4_s4", "matmul_fp8_128x64x64_w4_s4",
                  "linear_fp16_gelu_64x64x32_w4_s3_any", "grouped_gemm_64x128x64_sm132", "attn_fwd_d64_causal_any",
                  "attn_bwd_d64", "attn_bwd_preprocess_d64"]


def _job(v: dict, ttir_path: Path) -> dict:
    """The Triton specialization our variant stands for: constexprs by name, the rest typed and
    `tt.divisibility = 16` where the signature says `:16`."""
    import ast

    src = (KERNELS / v["file"]).read_text()
    fn = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef) and n.name == v["kernel"])
    entries = iter(v["signature"].split(","))
    sig, div16 = {}, []
    for i, a in enumerate(fn.args.args):
        if a.arg in v["constexprs"]:
            sig[a.arg] = "constexpr"
        else:
            ty, _, div = next(entries).partition(":")
            sig[a.arg] = ty
            if div:
                div16.append(i)
    return {"name": v["name"], "ttir": str(ttir_path), "file": str(KERNELS / v["file"]), "kernel": v["kernel"],
            "signature": sig, "constexprs": v["constexprs"], "div16": div16,
            "num_warps": v.get("num_warps", 4), "num_stages": v.get("num_stages", 3)}


def test_triton_builds_our_ttir_into_the_kernel_it_builds_from_the_source(tmp_path):
    jobs = []
    for name in SAME_AS_SOURCE:
        v = next(v for v in VARIANTS if v["name"] == name)
        path = tmp_path / f"{name}.ttir"
        path.write_bytes(_ttir(v))
        jobs.append(_job(v, path))
    results = json.loads(run_triton(COMPARE, json.dumps(jobs), timeout=1200).strip().splitlines()[-1])
    for r in results:
        assert r["ours"] == r["source"], r
        if r["name"] != "attn_bwd_preprocess_d64":
            assert r["ours"]["mma.sync"] > 0 and r["ours"]["wgmma"] == 0, r
