"""tt.dot on tensor cores (CPU). What is checked:

The TTGIR accelerate-matmul produces (filecheck on encodings, swizzle, placement), warpsPerCTA as
Triton chooses it, PTX mma.sync shapes/counts and ldmatrix (.trans per majorness), the FMA path,
ptxas register use without spills, and Triton (optional oracle) accepting our TTGIR.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import tomllib
from filecheck_util import filecheck
from oracle import run_triton

import ttbuild

KDIR = Path(__file__).parents[2] / "data" / "gpu_kernels"
SOURCE = KDIR / "dot.py"
VARIANTS = {v["name"]: v for v in tomllib.loads((KDIR / "variants.toml").read_text())["variant"]
            if v["file"] == "dot.py"}
MATMUL = Path(__file__).parents[3] / "kernels" / "matmul.py"
MATMUL_SIG = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32,i32:16,i32,i32:16,i32,i32:16,i32"

_CACHE: dict = {}


def build(source: Path, kernel: str, signature: str, constexprs: dict, num_warps: int = 4,
          until: str = "ptx", num_stages: int = 3, mma_v3: bool = False) -> dict[str, bytes]:
    """The kernel compiled for sm_90 on mma.sync (this file's subject; `mma_v3=True` lets wgmma
    take the dots it covers, tests/backend/llir/test_backend_wgmma.py)."""
    key = (source, kernel, signature, tuple(sorted(constexprs.items())), num_warps, until, num_stages, mma_v3)
    if key not in _CACHE:
        _CACHE[key] = ttbuild.compile(source, kernel=kernel, signature=signature, constexprs=constexprs,
                                      num_warps=num_warps, num_stages=num_stages, until=until,
                                      disable_mma_v3=not mma_v3)
    return _CACHE[key]


def variant(name: str, until: str = "ptx") -> dict[str, bytes]:
    v = VARIANTS[name]
    return build(SOURCE, v["kernel"], v["signature"], v.get("constexprs", {}), v.get("num_warps", 4), until,
                 v.get("num_stages", 3))


def matmul(bm, bn, bk, num_warps, until="ptx"):
    cx = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
    return build(MATMUL, "matmul_kernel", MATMUL_SIG, cx, num_warps, until)




MMA = "#ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [2, 2], instrShape = [16, 8]}>"


def test_ttgir_matmul_loop_structure(tmp_path):
    """Operands: local_alloc right after each load into Triton's swizzle, local_load into dot_op
    right before the dot; the accumulator is carried in #mma and converted once, after the loop."""
    checks = f"""
CHECK: "arith.constant"() <{{value = dense<0.000000e+00> : tensor<64x64xf32, {MMA}>}}>
CHECK: "scf.for"
CHECK: %[[A:.+]] = "tt.load"
CHECK-NEXT: %[[SA:.+]] = "ttg.local_alloc"(%[[A]]) {{allocation.offset = {{{{[0-9]+}}}} : i32}} : (tensor<64x32xf16, #ttg.blocked<{{{{.*}}}}>>) -> !ttg.memdesc<64x32xf16, #ttg.swizzled_shared<{{vec = 8, perPhase = 2, maxPhase = 4, order = [1, 0]}}>, #ttg.shared_memory>
CHECK: %[[B:.+]] = "tt.load"
CHECK-NEXT: %[[SB:.+]] = "ttg.local_alloc"(%[[B]]) {{allocation.offset = {{{{[0-9]+}}}} : i32}} : (tensor<32x64xf16, #ttg.blocked<{{{{.*}}}}>>) -> !ttg.memdesc<32x64xf16, #ttg.swizzled_shared<{{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}}>, #ttg.shared_memory>
CHECK: %[[LA:.+]] = "ttg.local_load"(%[[SA]]) {{{{.*}}}} -> tensor<64x32xf16, #ttg.dot_op<{{opIdx = 0, parent = {MMA}, kWidth = 2}}>>
CHECK-NEXT: %[[LB:.+]] = "ttg.local_load"(%[[SB]]) {{{{.*}}}} -> tensor<32x64xf16, #ttg.dot_op<{{opIdx = 1, parent = {MMA}, kWidth = 2}}>>
CHECK-NEXT: "tt.dot"(%[[LA]], %[[LB]], %{{{{.+}}}}) {{{{.*}}}} -> tensor<64x64xf32, {MMA}>
CHECK: "scf.yield"
CHECK: "ttg.convert_layout"(%{{{{.+}}}}) : (tensor<64x64xf32, {MMA}>) -> tensor<64x64xf32, #ttg.blocked
CHECK: "tt.store"
"""
    filecheck(variant("dot_f16_rr_64x64x32_w4", "ttgir")["ttgir"], checks, tmp_path)


def test_ttgir_column_major_operands_keep_their_order(tmp_path):
    """Column-major A (M fastest) and B (K fastest): the tiles keep order [0, 1], swizzled as
    Triton's formula gives for those orders."""
    checks = """
CHECK: "ttg.local_alloc"{{.*}} -> !ttg.memdesc<64x32xf16, #ttg.swizzled_shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [0, 1]}>
CHECK: "ttg.local_alloc"{{.*}} -> !ttg.memdesc<32x64xf16, #ttg.swizzled_shared<{vec = 8, perPhase = 2, maxPhase = 4, order = [0, 1]}>
"""
    filecheck(variant("dot_f16_cc_64x64x32_w4", "ttgir")["ttgir"], checks, tmp_path)


def test_ttgir_epilogue_converts_after_truncf(tmp_path):
    """The matmul's `accumulator.to(tl.float16)` runs on #mma; the conversion moves fp16."""
    checks = """
CHECK: "arith.truncf"{{.*}} : (tensor<128x128xf32, #ttg.nvidia_mma<{{.*}}>>) -> tensor<128x128xf16, #ttg.nvidia_mma
CHECK-NEXT: "ttg.convert_layout"{{.*}} : (tensor<128x128xf16, #ttg.nvidia_mma<{{.*}}>>) -> tensor<128x128xf16, #ttg.blocked
"""
    filecheck(matmul(128, 128, 64, 8, "ttgir")["ttgir"], checks, tmp_path)


@pytest.mark.parametrize("name,warps", [("dot_f16_rr_64x64x32_w4", "[2, 2]"), ("dot_f16_rr_128x128x64_w4", "[2, 2]"),
                                        ("dot_bf16_rr_128x128x64_w8", "[2, 4]"), ("dot_f16_rr_16x16x16_w4", "[1, 4]"),
                                        ("dot_bf16_cc_32x64x16_w2", "[1, 2]"),
                                        ("dot_batched_f16_4x32x32x32_w4", "[4, 1, 1]")])
def test_warps_per_cta_as_triton(name, warps):
    """Triton's warpsPerTileV2 (values Triton 3.6 prints for the same shapes and warps)."""
    text = variant(name, "ttgir")["ttgir"].decode()
    assert f"warpsPerCTA = {warps}, instrShape" in text


def _count(ptx: bytes, pattern: str) -> int:
    return len(re.findall(pattern, ptx.decode()))


@pytest.mark.parametrize("name,shape,types,count,ldm,trans", [
    # rr: A K-fast (plain), B N-fast (.trans); cc: A M-fast (.trans), B K-fast (plain). rc and cr
    # get one order for both tiles (coalesce gives every tensor tied through the shared offs_m /
    # offs_n vectors one layout), so they repeat those two cases.
    ("dot_f16_rr_64x64x32_w4", "m16n8k16", "f32.f16.f16.f32", 16, 8, 4),
    ("dot_f16_cc_64x64x32_w4", "m16n8k16", "f32.f16.f16.f32", 16, 8, 4),
    ("dot_bf16_rr_128x128x64_w8", "m16n8k16", "f32.bf16.bf16.f32", 64, 24, 8),
    ("dot_f16acc_rr_64x64x32_w4", "m16n8k16", "f16.f16.f16.f16", 16, 8, 4),
    # 8- and 32-bit operands use ldmatrix only K-fast (rr: A; cc: B), never .trans
    ("dot_f32_tf32_rr_64x64x32_w4", "m16n8k8", "f32.tf32.tf32.f32", 32, 8, 0),
    ("dot_f32_tf32x3_rr_64x64x32_w4", "m16n8k8", "f32.tf32.tf32.f32", 96, 8, 0),   # three products per step
    ("dot_fp8e4_rr_64x64x64_w4", "m16n8k32", "f32.e4m3.e4m3.f32", 16, 4, 0),
    ("dot_fp8e5_cc_64x64x64_w4", "m16n8k32", "f32.e5m2.e5m2.f32", 16, 4, 0),
    ("dot_i8_rr_64x64x64_w4", "m16n8k32", "s32.s8.s8.s32", 16, 4, 0),
    ("dot_i8_cc_64x64x64_w4", "m16n8k32", "s32.s8.s8.s32", 16, 4, 0),
    ("dot_batched_f16_4x32x32x32_w4", "m16n8k16", "f32.f16.f16.f32", 16, 8, 4),
])
def test_ptx_mma_and_ldmatrix(name, shape, types, count, ldm, trans):
    """Per warp, one mma.sync per (m16 tile, n8 tile, k step) of its share, ldmatrix.x4 (x2 for a
    lone n tile) per fragment group, `.trans` exactly for operands stored M- (A) or N- (B) fast."""
    p = variant(name)["ptx"]
    assert _count(p, r"mma\.sync\.aligned\.\w+") == count
    assert _count(p, rf"mma\.sync\.aligned\.{shape}\.row\.col\.{re.escape(types)} ") == count
    assert _count(p, r"ldmatrix\.sync\.aligned") == ldm
    assert _count(p, r"ldmatrix\.sync\.aligned\.m8n8\.x\d\.trans") == trans


@pytest.mark.parametrize("name,dims,threads", [("dot_fma_f64_32x32x16_w4", (32, 32, 16), 128),
                                               ("dot_fma_f32_ieee_64x32x32_w4", (64, 32, 32), 128),
                                               ("dot_batched_fma_f64_2x32x16x16_w4", (2, 32, 16, 16), 128),
                                               ("dot_batched_fma_f32_ieee_4x16x32x16_w2", (4, 16, 32, 16), 64)])
def test_fma_path_for_fp64_and_ieee(name, dims, threads):
    """fp64 and fp32 "ieee" dots take the FMA path, rank 3 (batched) too: one fma per output
    element a thread owns and per k (batch x M x N x K / threads) for each tt.dot."""
    out = variant(name)
    ttgir = out["ttgir"].decode()
    assert "#ttg.dot_op<{opIdx = 0, parent = #ttg.blocked<" in ttgir
    assert "nvidia_mma" not in ttgir
    assert _count(out["ptx"], r"mma\.sync") == 0
    n = 1
    for d in dims:
        n *= d
    assert _count(out["ptx"], r"\bfma\.rn\.f(64|32)") == ttgir.count('"tt.dot"') * n // threads


def _ptxas_v(ptx_text: bytes, tmp_path) -> str:
    from ttbuild.toolchain import ptxas_path
    f = tmp_path / "k.ptx"
    f.write_bytes(ptx_text)
    proc = subprocess.run([str(ptxas_path()), "-arch=sm_90a", "-v", "-o", str(tmp_path / "k.cubin"), str(f)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


@pytest.mark.parametrize("cfg", [(64, 64, 32, 4), (64, 128, 32, 4), (128, 64, 32, 4)])
def test_ptxas_no_spills_matmul(cfg, tmp_path):
    """Tutorial-03 matmul tiles compile without local-memory spills (ptxas -v)."""
    info = _ptxas_v(matmul(*cfg)["ptx"], tmp_path)
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", info), info


LIBRARY = Path(__file__).parents[3] / "kernels"
LIBRARY_VARIANTS = {v["name"]: v for v in tomllib.loads((LIBRARY / "variants.toml").read_text())["variant"]}


def library(name: str, until: str = "ptx") -> dict[str, bytes]:
    """A variant of kernels/variants.toml, built with its own options."""
    v = LIBRARY_VARIANTS[name]
    return build(LIBRARY / v["file"], v["kernel"], v["signature"], v.get("constexprs", {}), v.get("num_warps", 4),
                 until, v.get("num_stages", 3))


# Issue 11: no register spills on the 128x128 and 128x256 tiles of tutorial 03's configs and in
# attention's forward pass at d128 (Triton's build of the same sources spills on none of them).
# Attention at d64 sits at the 255-register limit: its key-mask row, rebuilt in the accumulator's
# layout so no conversion crosses shared memory in the loop, costs a few spilled words there
# (faster: 0.95-0.99x Triton instead of 0.86x with the conversion and no spill); bounded here:
# 12 bytes since the epilogue divides and narrows on #mma (56 when it converted the fp32 tile).
@pytest.mark.parametrize("name,spill", [("matmul_fp16_128x128x64_w4_s4", 0), ("matmul_fp16_128x256x64_w8_s3", 0),
                                        ("linear_fp16_relu_128x128x64_w4_s4", 0), ("attn_fwd_d128", 0),
                                        ("attn_fwd_d128_causal", 0), ("attn_fwd_d64", 16)])
def test_ptxas_no_spills_large_tiles(name, spill, tmp_path):
    info = _ptxas_v(library(name)["ptx"], tmp_path)
    m = re.search(r"\b(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    assert m and int(m.group(1)) <= spill and int(m.group(2)) <= spill, info


def test_layer_norm_backward_fits_its_register_cap(tmp_path):
    """Issue 11: layer norm backward's dx kernel (8192 columns, 8 warps) keeps its fp16 partial
    sums paired through the lock loop and the if/else (the SLP vectorizer, on as in Triton's
    optimize_module): no spill under the 128-register cap that holds two programs per SM. With
    the vectorizer off it needed 165 registers and spilled 28 bytes."""
    info = _ptxas_v(library("ln_bwd_dx_8192_w8")["ptx"], tmp_path)
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", info), info
    assert int(re.search(r"Used (\d+) registers", info).group(1)) <= 128, info


def test_ldmatrix_repetitions_share_address_registers():
    """The four m16 repetitions of A in a k step, and the k steps of B, differ by
    swizzle-invariant shifts: one address register, the rest `[reg + imm]` (as Triton)."""
    p = library("matmul_fp16_128x128x64_w4_s4")["ptx"].decode()
    addrs = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4(?:\.trans)?\.shared\.b16 \{[^}]*\}, \[(%r\d+)(?:\+\d+)?\]", p)
    assert len(addrs) == 32 and len(set(addrs)) <= 8, addrs


def test_ptx_uses_32bit_shared_pointers_and_reqntid():
    p = variant("dot_f16_rr_64x64x32_w4")["ptx"].decode()
    assert ".reqntid 128" in p
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x4(\.trans)?\.shared\.b16 \{[^}]*\}, \[%r\d+", p)


ORACLE_VARIANTS = ["dot_f16_rr_64x64x32_w4", "dot_f16_cc_64x64x32_w4", "dot_bf16_rr_128x128x64_w8",
                   "dot_f32_tf32_rr_64x64x32_w4", "dot_i8_rc_64x64x64_w4", "dot_f16acc_rr_64x64x32_w4",
                   "dot_batched_f16_4x32x32x32_w4", "dot_trans_f16_64x64x32_w4", "dot_fma_f64_32x32x16_w4",
                   "dot_batched_fma_f64_2x32x16x16_w4"]

COMPILE_COUNT = """
import os, sys, triton
os.environ["DISABLE_MMA_V3"] = "1"
from triton.backends.compiler import GPUTarget
for path in sys.argv[1:]:
    k = triton.compile(path, target=GPUTarget("cuda", 90, 32))
    print("ok", path, k.asm["ptx"].count("mma.sync"))
"""


def test_triton_accepts_our_ttgir(tmp_path):
    """Triton 3.6 takes our TTGIR (the encodings we print are its own) through to cubin, and
    emits the same number of mma.sync as we do."""
    paths = []
    for name in ORACLE_VARIANTS:
        p = tmp_path / f"{name}.ttgir"
        p.write_bytes(variant(name, "ttgir")["ttgir"])
        paths.append(str(p))
    out = run_triton(COMPILE_COUNT, *paths)
    got = {line.split()[1]: int(line.split()[2]) for line in out.splitlines() if line.startswith("ok ")}
    assert len(got) == len(paths), out
    for name, path in zip(ORACLE_VARIANTS, paths):
        ours = _count(variant(name)["ptx"], r"mma\.sync\.aligned")
        if "fma" not in name:
            assert got[path] == ours, (name, got[path], ours)


def test_loop_invariant_operand_staged_once_before_the_loop(tmp_path):
    """Attention's Q (loaded before the loop) is written to shared memory once, before scf.for;
    K^T (tl.trans of a load, so loaded through transposed pointers: ttgir/transpose_loads.py) and
    V come through the pipeline's rings, K's with order [0, 1]; nothing is allocated in the loop,
    and P = fp16(S) reaches the second dot as a register-only #mma -> #dot_op conversion, as
    Triton does, not through shared memory."""
    checks = """
CHECK: "ttg.local_alloc"(%{{.*}}) -> !ttg.memdesc<64x64xf16
CHECK-DAG: "ttg.local_alloc"() {{.*}} -> !ttg.memdesc<2x64x32xf16, #ttg.swizzled_shared<{{.*}}order = [0, 1]
CHECK-DAG: "ttg.local_alloc"() {{.*}} -> !ttg.memdesc<2x32x64xf16
CHECK: "scf.for"
CHECK-NOT: "ttg.local_alloc"
CHECK: "ttg.convert_layout"{{.*}}#ttg.nvidia_mma{{.*}} -> tensor<64x32xf16, #ttg.dot_op<{opIdx = 0
CHECK-NOT: "ttg.local_alloc"
CHECK: "scf.yield"
"""
    filecheck(variant("dot_chain_64x32x64_w4", "ttgir")["ttgir"], checks, tmp_path)


def test_fp16_accumulator_converts_through_packed_padded_rows():
    """The matmul epilogue's #mma -> #blocked conversion of the fp16 tile (allocation.packed_pitch):
    each thread stores its neighbour pairs as 32-bit words (64 for a 128x128 tile on 4 warps, was
    128 16-bit stores into 4-byte slots) and reads 128-bit vectors back (16, was 32); the scratch
    is 128 rows of 256 + 16 bytes (was 64 KiB), under the 48 KiB of the pipeline's rings."""
    ptx = library("matmul_fp16_128x128x64_w4_s4")["ptx"]
    assert _count(ptx, r"st\.shared\.(?:v2\.b16|b32)\s") == 64
    assert _count(ptx, r"st\.shared\.b16\s") == 0
    assert _count(ptx, r"ld\.shared\.v4\.b32\s") == 16


def test_packed_pitch_only_where_pairs_are_neighbours():
    from ttbuild.backend.analysis.allocation import convert_bytes, packed_pitch
    from ttbuild.backend.ir.encodings import NvidiaMma

    mma = NvidiaMma((4, 1))
    assert packed_pitch(mma, (128, 128), "f16") == 272 and packed_pitch(mma, (128, 128), "bf16") == 272
    assert convert_bytes((128, 128), "f16", mma) == 128 * 272
    assert packed_pitch(mma, (128, 128), "f32") is None  # 32-bit elements: one word each already
    assert packed_pitch(mma, (32, 128), "f16") is None  # 4 warps x 16 rows do not fit in 32
    assert packed_pitch(NvidiaMma((2, 2)), (64, 8), "f16") is None  # wraps along N
    assert convert_bytes((128, 128), "f16") == 128 * 128 * 4



def test_spilling_mma_sync_gemm_keeps_the_whole_register_budget():
    """An fp8 GEMM with per-block scales (64x128x128, 4 warps, mma.sync) spills even at 255
    registers; under `.reqntid 128` alone ptxas (12.8, 13.0) gives its PTX (and Triton's) 32
    registers and a ~3 KB stack frame. The cubin stage assembles it again with `.maxnreg 255`
    and keeps that: 255 registers, a smaller frame."""
    from ttbuild.backend.nvptx.cubin_info import kernel_resources
    from ttbuild.backend.nvptx.ptxas import assemble

    src = Path(__file__).resolve().parents[2] / "data" / "regalloc_kernels.py"
    out = ttbuild.compile(src, kernel="fp8_block_gemm_kernel", until="cubin", num_warps=4, num_stages=3,
                          disable_mma_v3=True, constexprs={"BM": 64, "BN": 128, "BK": 128},
                          signature="*fp8e4nv:16,*fp8e4nv:16,*bf16:16,*fp32:16,*fp32:16,i32,i32,i32,"
                                    "i32:16,i32:16,i32:16,i32,i32")
    ptx = out["ptx"]
    assert b"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in ptx
    assert b".reqntid 128" in ptx and b".maxnreg" not in ptx
    plain_regs, plain_frame = kernel_resources(assemble(ptx, options=["-maxrregcount=255"]))  # the retry is off
    regs, frame = kernel_resources(out["cubin"])
    assert plain_regs <= 64 and plain_frame > 2048, (plain_regs, plain_frame)
    assert regs > 128 and frame < plain_frame, (regs, frame)


def test_a_kernel_that_does_not_spill_is_assembled_once(monkeypatch):
    from ttbuild.backend.nvptx import ptxas

    calls = []
    real = ptxas._ptxas
    monkeypatch.setattr(ptxas, "_ptxas", lambda *a: calls.append(a) or real(*a))
    ptx = variant("dot_f16_rr_64x64x32_w4")["ptx"]
    assert ptxas.kernel_resources(ptxas.assemble(ptx))[1] == 0 and len(calls) == 1


@pytest.mark.parametrize("ptx,regs,frame,options,want", [
    (b".entry k()\n.reqntid 128\n{\n", 32, 2984, (), b".reqntid 128\n.maxnreg 255\n"),
    (b".entry k()\n.reqntid 512, 1, 1\n{\n", 40, 64, (), b".reqntid 512, 1, 1\n.maxnreg 128\n"),
    (b".entry k()\n.reqntid 128\n{\n", 255, 900, (), None),            # registers already all used
    (b".entry k()\n.reqntid 128\n{\n", 32, 0, (), None),               # no stack: nothing to win
    (b".entry k()\n.maxntid 128\n.maxnreg 255\n{\n", 32, 96, (), None),  # a register directive already
    (b".entry k()\n.maxntid 256\n.maxnreg 128\n{\n", 128, 96, (), None),  # .maxntid: ptxas._within_occupancy
    (b".entry k()\n.maxntid 256\n.maxnreg 128\n{\n", 100, 96, (), None),  # spilled below the cap
    (b".entry k()\n.maxntid 256\n.maxnreg 128\n{\n", 128, 0, (), None),   # no stack
    (b".entry k()\n.reqntid 128\n{\n", 32, 96, ("-maxrregcount=64",), None),
])
def test_register_retry_only_for_a_starved_reqntid_kernel(ptx, regs, frame, options, want):
    from ttbuild.backend.nvptx.ptxas import register_retry

    got = register_retry(ptx, regs, frame, options)
    assert (got is None) == (want is None)
    if want is not None:
        assert want in got and got.count(b".maxnreg") == 1
