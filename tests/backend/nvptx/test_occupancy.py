"""The cubin stage's register cap (ttbuild.backend.nvptx.ptxas): it costs no CTA per SM against the directive-less assembly, and our norm-style kernels fit as many CTAs per SM as Triton's PTX of the same source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from oracle import ROW_SOURCE, run_triton

import ttbuild
from ttbuild.backend.nvptx import ptxas
from ttbuild.backend.nvptx.cubin_info import kernel_resources
from ttbuild.errors import CompilerWarning

SRC = Path(__file__).resolve().parents[2] / "data" / "occupancy_kernels.py"

# (case, kernel, signature, constexprs, num_warps, num_stages): the forms of issue 31's slow rows.
# ptxas 13.0 registers before the change / Triton's PTX / now: 56/48/47, 80/48/48, 38/30/30, 52/32/32.
CASES = [
    ("row_norm_w8", "row_norm_fwd", "*bf16:16,i32:16,*bf16:16,i32:16,*bf16:16,*bf16:16,*bf16:16,*bf16:16,i32:16,fp32",
     {"BLOCK": 4096}, 8, 3),
    ("group_stat_w4", "group_stat_fwd", "*bf16:16,*bf16:16,*bf16:16,*bf16:16,*bf16:16,i32:16,i32,fp32",
     {"BLOCK": 2048}, 4, 3),
    ("tanh_bwd_shift_w16", "tanh_scale_bwd",
     "*bf16:16,*bf16:16,*fp32:16,*fp32:16,*fp32:16,*bf16:16,*fp32:16,*fp32:16,i32:16",
     {"WITH_SHIFT": True, "WIDTH": 4096, "BLOCK": 1024}, 16, 2),
    ("tanh_bwd_w8", "tanh_scale_bwd", "*bf16:16,*bf16:16,*fp32:16,*fp32:16,*bf16:16,*fp32:16,*fp32:16,i32:16",
     {"WITH_SHIFT": False, "part_shift": None, "WIDTH": 4096, "BLOCK": 1024}, 8, 2),
]

# Triton compiles each job's row (its num_warps and num_stages) and writes its PTX to job["out"].
TRITON_PTX = ROW_SOURCE + r"""
for job in json.loads(sys.argv[2]):
    src = row_source(getattr(mod, job["kernel"]), job["signature"], job["constexprs"])
    k = triton.compile(src, target=target, options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]})
    open(job["out"], "w").write(k.asm["ptx"])
"""


@pytest.mark.parametrize("regs,threads,arch,ctas", [
    (47, 256, "sm_90a", 5), (56, 256, "sm_90a", 4), (30, 512, "sm_90a", 4), (38, 512, "sm_90a", 3),
    (48, 128, "sm_90a", 10), (80, 128, "sm_90a", 6), (16, 128, "sm_90a", 16),  # 64 warps at most
    (16, 32, "sm_90a", 32), (16, 256, "sm_89", 6), (255, 256, "sm_80", 1),
])
def test_ctas_per_sm_by_registers_warps_and_ctas(regs, threads, arch, ctas):
    assert ptxas.ctas_per_sm(regs, threads, arch) == ctas


@pytest.mark.parametrize("regs,threads,given,cap", [
    (47, 256, 128, 48),   # 5 CTAs of 8 warps: 51 registers, 48 in whole granules
    (110, 128, 255, 128),  # 4 CTAs of 4 warps (the library's layer norm w4): the cap as before
    (30, 512, 40, 32),
    (20, 128, 255, 32),   # 16 CTAs (the warp limit) up to 32 registers
    (20, 128, 24, 24),    # the llir stage's cap bounds it
])
def test_occupancy_cap_keeps_the_ctas_per_sm(regs, threads, given, cap):
    got = ptxas.occupancy_cap(regs, threads, given)
    assert got == cap
    assert ptxas.ctas_per_sm(got, threads) == ptxas.ctas_per_sm(regs, threads)


def _fake_ptxas(monkeypatch, figures):
    """ptxas replaced: the "cubin" is the PTX itself, kernel_resources reads (regs, frame) from
    `figures` by the PTX's `.maxnreg` (None: no directive). Returns the list of PTX assembled."""
    seen = []

    def fake(ptx, arch, options, notes=None):
        seen.append(ptx)
        return ptx

    def resources(cubin):
        m = ptxas._MAXNREG.search(cubin)
        return figures[int(m.group(1)) if m else None]

    monkeypatch.setattr(ptxas, "_ptxas", fake)
    monkeypatch.setattr(ptxas, "kernel_resources", resources)
    return seen


PTX = b".entry k()\n.maxntid 256\n.maxnreg 128\n{\n}\n"
PLAIN = b".entry k()\n.maxntid 256\n{\n}\n"


def test_a_cap_that_costs_a_cta_is_lowered_to_the_directive_less_ctas(monkeypatch):
    seen = _fake_ptxas(monkeypatch, {128: (80, 0), None: (50, 0), 64: (64, 0)})  # 3, 4 and 4 CTAs of 8 warps
    out = ptxas.assemble(PTX)
    assert seen[:2] == [PTX, PLAIN]
    assert out == seen[2] == b".entry k()\n.maxntid 256\n.maxnreg 64\n{\n}\n"


def test_a_cap_that_costs_nothing_is_kept(monkeypatch):
    # the library's layer norm w4: 128 registers under the cap, 110 without, 4 CTAs of 4 warps either way
    seen = _fake_ptxas(monkeypatch, {255: (128, 0), None: (110, 0)})
    ptx = b".entry k()\n.maxntid 128\n.maxnreg 255\n{\n}\n"
    assert ptxas.assemble(ptx) == ptx and len(seen) == 2


def test_a_kernel_at_the_most_ctas_an_sm_holds_is_assembled_once(monkeypatch):
    seen = _fake_ptxas(monkeypatch, {128: (32, 0)})  # 8 CTAs of 8 warps: 64 warps
    assert ptxas.assemble(PTX) == PTX and seen == [PTX]


def test_the_directive_less_cubin_when_no_register_is_spare(monkeypatch):
    seen = _fake_ptxas(monkeypatch, {128: (56, 0), None: (47, 0)})  # 4 and 5 CTAs; 48 keeps 5, 56 not
    assert ptxas.assemble(PTX) == PLAIN and len(seen) == 2


def test_the_lowered_cap_is_dropped_when_it_spills(monkeypatch):
    seen = _fake_ptxas(monkeypatch, {128: (80, 0), None: (50, 0), 64: (64, 16)})
    assert ptxas.assemble(PTX) == PLAIN and len(seen) == 3


def test_a_kernel_that_spills_under_the_cap_and_not_without_it(monkeypatch):
    # 16 warps under a cap of 40 (a KL-divergence loop spilled 232 bytes there): 72 registers, no stack
    _fake_ptxas(monkeypatch, {40: (40, 232), None: (72, 0)})
    assert ptxas.assemble(b".entry k()\n.maxntid 512\n.maxnreg 40\n{\n}\n") == b".entry k()\n.maxntid 512\n{\n}\n"


def test_the_smaller_frame_when_both_spill(monkeypatch):
    _fake_ptxas(monkeypatch, {128: (128, 96), None: (200, 40)})
    assert ptxas.assemble(PTX) == PLAIN


def test_maxrregcount_leaves_the_ptx_as_given(monkeypatch):
    seen = _fake_ptxas(monkeypatch, {128: (128, 0)})
    assert ptxas.assemble(PTX, options=["-maxrregcount=128"]) == PTX and seen == [PTX]


WS = (b".entry k()\n.reqntid 256\n.maxnreg 128\n{\n\tsetmaxnreg.inc.sync.aligned.u32 216;\n"
      b"\tsetmaxnreg.dec.sync.aligned.u32 40;\n}\n")
WS_ONE_CTA = b".entry k()\n.reqntid 256\n{\n}\n"


def _fake_ws_ptxas(monkeypatch, figures, serialized):
    """As _fake_ptxas, and ptxas's notes say wgmma was serialized for the PTX in `serialized`."""
    seen = _fake_ptxas(monkeypatch, figures)
    fake = ptxas._ptxas

    def with_notes(ptx, arch, options, notes=None):
        cubin = fake(ptx, arch, options, notes)
        if notes is not None:
            notes[cubin] = [f"(C7511) Potential Performance Loss: {ptxas.SERIALIZED} due to ..."] if ptx in serialized else []
        return cubin

    monkeypatch.setattr(ptxas, "_ptxas", with_notes)
    return seen


def test_a_two_cta_register_plan_that_serializes_wgmma_gives_way_to_one_cta(monkeypatch):
    seen = _fake_ws_ptxas(monkeypatch, {128: (128, 0), None: (250, 0)}, serialized={WS})
    assert ptxas.assemble(WS) == WS_ONE_CTA and seen == [WS, WS_ONE_CTA]


def test_a_two_cta_register_plan_that_holds_is_assembled_once(monkeypatch):
    seen = _fake_ws_ptxas(monkeypatch, {128: (128, 0)}, serialized=set())
    assert ptxas.assemble(WS) == WS and seen == [WS]


def test_the_two_cta_plan_stays_when_one_cta_is_no_better(monkeypatch):
    _fake_ws_ptxas(monkeypatch, {128: (128, 0), None: (255, 64)}, serialized={WS})
    with pytest.warns(CompilerWarning, match="serialized"):  # the kept cubin's note, as the build shows it
        assert ptxas.assemble(WS) == WS


def test_norm_kernels_fit_as_many_ctas_per_sm_as_tritons_ptx(tmp_path):
    """Triton 3.6's PTX of each row, assembled by the same ptxas as ours without a register
    directive (Triton states none), against our cubin: at least as many CTAs per SM. Under the
    llir stage's cap alone these lost one to four (the registers in CASES)."""
    jobs = [{"kernel": k, "signature": s, "constexprs": c, "num_warps": w, "num_stages": n,
             "out": str(tmp_path / f"{case}.ptx")} for case, k, s, c, w, n in CASES]
    run_triton(TRITON_PTX, str(SRC), json.dumps(jobs))
    for (case, kernel, sig, cx, warps, stages), job in zip(CASES, jobs):
        out = ttbuild.compile(SRC, kernel=kernel, until="cubin", num_warps=warps, num_stages=stages,
                              constexprs=cx, signature=sig)
        ours, _ = kernel_resources(out["cubin"])
        theirs, _ = kernel_resources(ptxas.assemble(Path(job["out"]).read_bytes()))
        threads = 32 * warps
        assert ptxas.ctas_per_sm(ours, threads) >= ptxas.ctas_per_sm(theirs, threads), (case, ours, theirs)


@pytest.mark.parametrize("arch,residency", [
    ("sm_90a", (64, 32)), ("sm_80", (64, 32)), ("sm_100a", (64, 32)), ("sm_75", (32, 16)),
    ("sm_86", (48, 16)), ("sm_89", (48, 24)), ("sm_120a", (48, 32)),
])
def test_sm_residency_is_the_targets(arch, residency):
    from ttbuild.target import Target
    assert Target.from_arch(arch).sm_residency == residency


@pytest.mark.parametrize("arch", ["90", "sm90", "compute_90", "sm_9"])
def test_from_arch_refuses_other_spellings(arch):
    from ttbuild.target import Target, TargetError
    with pytest.raises(TargetError, match="sm_90a"):
        Target.from_arch(arch)


def test_what_ptxas_says_of_a_kept_cubin_is_a_compiler_warning():
    """A wgmma loop whose accumulator in flight another instruction reads: ptxas serializes every
    wgmma of the kernel and says so (C75xx, without -v); the build warns at the kernel's def.
    The same PTX untouched assembles without a word."""
    import warnings

    from kernel_rows import compile_row

    ptx = compile_row("attn_fwd_d128", "ptx").decode()
    with warnings.catch_warnings(record=True) as clean:
        warnings.simplefilter("always")
        ptxas.assemble(ptx.encode())
    assert not [w for w in clean if isinstance(w.message, CompilerWarning)]
    loop = ptx.index("$L__BB0_2:")
    commits = [i for i in range(loop, len(ptx)) if ptx.startswith("wgmma.commit_group", i)]
    end = ptx.index("\n", commits[1])  # P.V's commit: its accumulator stays in flight into the next iteration
    acc = re.search(r"\{(%r\d+),", ptx[ptx.rindex("wgmma.mma_async", 0, commits[1]):]).group(1)
    read = f"\n\t{{ .reg .pred %tp; setp.eq.f32 %tp, {acc}, 0f7F800000; @%tp trap; }}"
    with pytest.warns(CompilerWarning, match=r"ptxas: .*wgmma\.mma_async instructions are serialized") as got:
        ptxas.assemble((ptx[:end] + read + ptx[end:]).encode())
    assert all(w.message.node_id == 0 and "kernel.ptx" not in str(w.message) for w in got)
