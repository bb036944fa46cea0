"""LLVM via llvmlite for NVPTX: the target machine, the O3 pipeline, and PTX emission.

Facts (docs/DESIGN.md "Backend facts"): cpu sm_90a, features +ptx90 (LLVM silently falls back
for versions it lacks), `, debug` stripped from `.target` or ptxas builds a debug binary.
"""

from __future__ import annotations

import functools
import re

import llvmlite.binding as llvm

from ttbuild.backend.nvptx import TRIPLE
from ttbuild.target import DEFAULT_TARGET, PTX_VERSION

_ARCH = DEFAULT_TARGET.arch


@functools.cache
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.cache
def target_machine(arch: str = _ARCH, ptx_version: int = PTX_VERSION, short_ptr: bool = False):
    """NVPTX target machine for `arch` emitting PTX ISA `ptx_version` (90 = 9.0); cached per process.

    short_ptr: 32-bit pointers for shared/const/local memory (data layout `p3:32:32`, LLVM's
    `-nvptx-short-ptr`, which Triton always uses): a shared address then takes one register
    instead of two, which tensor-core kernels (many ldmatrix/st.shared addresses live next to
    the accumulators) need. The option is global in LLVM, so it is set only while this target
    machine is created."""
    _init()
    target = llvm.Target.from_triple(TRIPLE)
    if not short_ptr:
        return target.create_target_machine(cpu=arch, features=f"+ptx{ptx_version}", opt=3)
    llvm.set_option("", "--nvptx-short-ptr")
    try:
        return target.create_target_machine(cpu=arch, features=f"+ptx{ptx_version}", opt=3)
    finally:
        llvm.set_option("", "--nvptx-short-ptr=false")


# An fadd/fsub/fmul with no fast-math flags yet (ours carry `contract` already when fusing).
_CONTRACTABLE = re.compile(r"= (fadd|fsub|fmul) (?=float|double|<)")


def _contract(text: str) -> str:
    return _CONTRACTABLE.sub(r"= \1 contract ", text)


@functools.cache
def _libdevice(data_layout: str):
    """libdevice parsed once per process (and data layout), the NVPTX triple set: each link
    takes a clone of it."""
    from ttbuild.toolchain import libdevice_path

    lib = llvm.parse_bitcode(libdevice_path().read_bytes())
    lib.triple = TRIPLE
    lib.data_layout = data_layout
    return lib


def link_libdevice(mod, tm) -> None:
    """Link libdevice into `mod`, make every function but the kernels internal and drop those
    not called (GlobalDCE), so the rest of the pipeline (and the `contract` round trip) sees only
    the kernel and what it calls, in the order linking the whole file gave. libdevice is parsed
    once per process; each link takes a clone (Triton links the same file)."""
    keep = {f.name for f in mod.functions if not f.is_declaration}
    mod.link_in(_libdevice(str(tm.target_data)), preserve=True)
    for f in mod.functions:
        if not f.is_declaration and f.name not in keep:
            f.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration and g.name.startswith("__"):
            g.linkage = "internal"
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options()))


def optimize(text: str, arch: str = _ARCH, fp_fusion: bool = True, short_ptr: bool = False) -> str:
    """Parse LLVM IR text, run the new-pass-manager O3 pipeline with the NVPTX target machine
    (so the data layout and TTI are NVPTX's) and the SLP vectorizer on (as Triton), verify, and
    return the optimized IR text.

    With fp_fusion, libdevice's float adds/multiplies become `contract` too: Triton compiles with
    AllowFPOpFusion=Fast, so its libdevice code may form FMAs (and ptxas may fuse its plain
    mul.f32) where ours would pin mul.rn.f32 — tl.randn's log/cos then round differently.
    The linked module is pruned to what the kernel calls first, so that round trip is small."""
    tm = target_machine(arch, short_ptr=short_ptr)
    mod = llvm.parse_assembly(text)
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    mod.verify()
    if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
        link_libdevice(mod, tm)
        if fp_fusion:
            mod = llvm.parse_assembly(_contract(str(mod)))
            mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    # Triton's optimize_module (python/src/llvm.cpp) turns the SLP vectorizer on; llvmlite's O3
    # leaves it off. It keeps fp16 tensors in <2 x half> pairs (one 32-bit register each)
    # through phis and loops: layer norm backward's dx kernel needed 165 registers without it
    # (28 bytes spilled under its 128 cap), 128 with it, as Triton's build.
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    mod.verify()
    return str(mod)


# `or disjoint iN %b, C` / `or disjoint iN %x, %y` (the literal first, so `re` searches for it fast).
_OR = re.compile(r" = or disjoint (i32|i64) (%[\w.]+), (%[\w.]+|\d+)\b")
# 64 addresses from one base (63 constant offsets): a vector add of 64 elements per thread
# and array. No library kernel reaches it (grouped GEMM's largest is 60).
SLSR_HOT_BASE_USES = 63


def unchain_disjoint_ors(text: str) -> str:
    """`or disjoint` -> `add nuw nsw` (the same value: disjoint bits never carry) for a base
    that is itself a disjoint `or` of two values and has at least SLSR_HOT_BASE_USES constant
    `or disjoint` offsets, and for those offsets; other IR unchanged.

    LLVM 22's NVPTX "Straight line strength reduction" spends time growing about with the
    square of such a chain: a vector add at BLOCK 8192 on one warp (255 offsets from one base)
    took 8-9 s in that one pass, 0.2-0.4 s rewritten; BLOCK 2048 0.5-0.8 s (Triton's older LLVM:
    0.07 s). The pass finds nothing to do there (the PTX of those kernels is byte-identical
    either way), but the same rewrite everywhere changes the SASS of many smaller kernels
    (docs/STATUS.md), so it is applied only past the threshold."""
    if text.count(" = or disjoint ") <= SLSR_HOT_BASE_USES:
        return text
    ordefs, counts, sites = set(), {}, []
    for m in _OR.finditer(text):
        name = text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip()
        sites.append((m, name))
        if m.group(3)[0] == "%":
            ordefs.add(name)
        else:
            counts[m.group(2)] = counts.get(m.group(2), 0) + 1
    hot = {b for b, n in counts.items() if n >= SLSR_HOT_BASE_USES and b in ordefs}
    if not hot:
        return text
    out, last = [], 0
    for m, name in sites:
        if name in hot or (m.group(3)[0] != "%" and m.group(2) in hot):
            out.append(text[last:m.start()])
            out.append(f" = add nuw nsw {m.group(1)} {m.group(2)}, {m.group(3)}")
            last = m.end()
    out.append(text[last:])
    return "".join(out)


def emit_ptx(text: str, arch: str = _ARCH, ptx_version: int = PTX_VERSION) -> str:
    """LLVM IR text -> PTX text, `.target` without `, debug`. Long chains of disjoint ors from
    one base are rewritten as adds first (unchain_disjoint_ors: codegen time, not code)."""
    short = re.search(r'^target datalayout = "[^"]*\bp3:32:32', text, re.M) is not None
    tm = target_machine(arch, ptx_version, short)
    mod = llvm.parse_assembly(unchain_disjoint_ors(text))
    mod.verify()
    ptx = tm.emit_assembly(mod)
    return re.sub(r"^(\.target\s+\S+?)\s*,\s*debug\s*$", r"\1", ptx, flags=re.M)
