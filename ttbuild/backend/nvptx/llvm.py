"""LLVM via llvmlite for NVPTX: the target machine, the O3 pipeline, and PTX emission.

Facts (docs/DESIGN.md "Backend facts"): cpu sm_90a, features +ptx90 (LLVM silently falls back
for versions it lacks), `, debug` stripped from `.target` or ptxas builds a debug binary.
"""

from __future__ import annotations

import functools
import re

import llvmlite.binding as llvm

from ttbuild.backend.nvptx import TRIPLE, bf16_sub, mad_wide
from ttbuild.target import DEFAULT_TARGET, PTX_VERSION

_ARCH = DEFAULT_TARGET.arch


# The SLP vectorizer keeps a tree only where its cost is below -SLP_THRESHOLD (LLVM's
# `-slp-threshold`, default 0). Triton's optimize_module runs SLP without a target machine, whose
# default costs (a 32-bit vector register, 128-bit minimum vector width) pair no 16-bit floats in
# straight-line code; the NVPTX costs pair every `a * c - b * s` of two bf16/fp16 elements (a tree
# saving 2-3 instructions), and ptxas then keeps each `neg.bf16x2` as an instruction of its own
# where it folds a scalar `neg.bf16` into the fma: a bf16 rotary-embedding forward (4 warps) took
# 34 registers (12 CTAs per SM) where Triton's PTX takes 32 (16 CTAs). The fp16 partial sums that
# layer norm backward carries through its lock loop save far more and stay paired (no spill).
SLP_THRESHOLD = 4


@functools.cache
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.set_option("", f"-slp-threshold={SLP_THRESHOLD}")  # process-wide, the same for every module


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


def _internalize_and_prune(mod, tm, keep) -> None:
    """Every function defined in `mod` but not in `keep`, and every defined `__*` global, made
    internal; GlobalDCE then drops those nothing calls or reads."""
    for f in mod.functions:
        if not f.is_declaration and f.name not in keep:
            f.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration and g.name.startswith("__"):
            g.linkage = "internal"
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options()))


def link_libdevice(mod, tm) -> None:
    """Link libdevice into `mod`, make every function but the kernels internal and drop those
    not called (GlobalDCE), so the rest of the pipeline (and the `contract` round trip) sees only
    the kernel and what it calls, in the order linking the whole file gave. libdevice is parsed
    once per process; each link takes a clone (Triton links the same file)."""
    keep = {f.name for f in mod.functions if not f.is_declaration}
    mod.link_in(_libdevice(str(tm.target_data)), preserve=True)
    _internalize_and_prune(mod, tm, keep)


@functools.cache
def _libdevice_layout(data_layout: str) -> tuple[dict[str, int], dict[str, int], frozenset[str]]:
    """(position of each function, position of each global variable, the functions defined) of
    libdevice linked whole into an empty module: the order link_libdevice leaves them in. LLVM's
    IRMover appends a function or global where the link first reaches it, so linking a pruned
    libdevice (_libdevice_subset) reaches its declarations in another order; _linked_text puts
    them back in this one. Computed once per process (one whole link)."""
    whole = llvm.parse_assembly(f'target triple = "{TRIPLE}"\ntarget datalayout = "{data_layout}"\n')
    whole.link_in(_libdevice(data_layout), preserve=True)
    funcs = {f.name: i for i, f in enumerate(whole.functions)}
    glbls = {g.name: i for i, g in enumerate(whole.global_variables)}
    defined = frozenset(f.name for f in _libdevice(data_layout).functions if not f.is_declaration)
    return funcs, glbls, defined


@functools.cache
def _libdevice_subset(data_layout: str, names: frozenset[str]):
    """libdevice pruned to the functions `names` and what they call or read (their linkage
    as in libdevice), once per process and set of names: linking it clones a few functions
    instead of the whole file (attention's exp2f/log2f: optimize 245 -> 160 ms for fwd d128,
    404 -> 315 ms for bwd d64; the first kernel of a process pays one more clone and one whole
    link, ~130 ms, for _libdevice_layout and this)."""
    lib = _libdevice(data_layout).clone()
    linkage = {}
    for f in lib.functions:
        if not f.is_declaration and f.name not in names:
            linkage[f.name] = f.linkage
            f.linkage = "internal"
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.run(lib, llvm.create_pass_builder(target_machine(), llvm.create_pipeline_tuning_options()))
    for f in lib.functions:
        if f.name in linkage:
            f.linkage = linkage[f.name]
    return lib


# The name a top-level line of LLVM's module printout defines: `define ... @name(`,
# `declare ... @name(` (the first `@` followed by `(`), `@name = ...` (a global variable).
_FUNC_NAME = re.compile(r'@("(?:[^"\\]|\\.)*"|[-\w$.]+)\(')
_GLOBAL_NAME = re.compile(r'^@("(?:[^"\\]|\\.)*"|[-\w$.]+) = ')


def _top_name(line: str, pattern: re.Pattern) -> str:
    name = pattern.search(line).group(1)
    return name[1:-1] if name.startswith('"') else name


def _linked_text(mod, tm) -> str | None:
    """Link libdevice into `mod` as link_libdevice does and return the module's text, without
    cloning all of libdevice: _libdevice_subset is linked instead, and the functions and globals
    it brought are put in the order the whole link gives (_libdevice_layout), the module's own
    first, in their order. Parsed, the text is link_libdevice's module: printed again, the same
    text (attribute groups are numbered in another order before; named struct types' suffixes
    count the LLVM context's earlier links either way). tests/backend/nvptx/test_backend_nvptx.py
    checks three sets of functions; every single `__nv_*` function, 40 random sets of 2-6 and
    the attention kernels' LLIR were checked so too. None (`mod` untouched) when a name of
    `mod` is also one of libdevice's: link_libdevice then."""
    dl = str(tm.target_data)
    funcs, glbls, defined = _libdevice_layout(dl)
    own_funcs = [f.name for f in mod.functions]
    own_glbls = [g.name for g in mod.global_variables]
    decls = {f.name for f in mod.functions if f.is_declaration}
    if any(n in defined and n not in decls for n in own_funcs) or any(g in glbls for g in own_glbls):
        return None
    keep = {n for n in own_funcs if n not in decls}
    mod.link_in(_libdevice_subset(dl, frozenset(n for n in decls if n in defined)), preserve=True)
    _internalize_and_prune(mod, tm, keep)
    text = str(mod)
    # The printout: [header, globals] [functions: an optional `; Function Attrs` line, then
    # `define ... {` .. `}` or one `declare` line; blank lines between] [attributes, metadata].
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith(("; Function Attrs", "define ", "declare ")))
    # The module's own functions (not the libdevice declarations a definition replaced) stay
    # in front in their order; what the link appended follows in whole-link order.
    stay = {n: i for i, n in enumerate(own_funcs) if n not in defined}
    chunks, i = [], start
    while i < len(lines) and not lines[i].startswith(("attributes ", "!")):
        if not lines[i]:
            i += 1
            continue
        j = i + 1 if lines[i].startswith(";") else i
        if lines[j].startswith("define "):
            k = lines.index("}", j)
        elif lines[j].startswith("declare "):
            k = j
        else:  # not LLVM 22's printout as known: the same functions, in the pruned link's order
            return text
        name = _top_name(lines[j], _FUNC_NAME)
        if name not in stay and name not in funcs:
            return text
        chunks.append(((0, stay[name]) if name in stay else (1, funcs[name]), "\n".join(lines[i:k + 1])))
        i = k + 1
    chunks.sort(key=lambda c: c[0])
    head = lines[:start]
    own_g = {g: n for n, g in enumerate(own_glbls)}
    at = [n for n, ln in enumerate(head) if ln.startswith("@")]

    def gkey(ln):
        g = _top_name(ln, _GLOBAL_NAME)
        return (0, own_g[g]) if g in own_g else (1, glbls[g])

    for n, ln in zip(at, sorted((head[n] for n in at), key=gkey)):
        head[n] = ln
    return "\n".join(head) + "\n" + "\n\n".join(c for _, c in chunks) + "\n\n" + "\n".join(lines[i:])


# libdevice asks `__nvvm_reflect("__CUDA_FTZ")` which arithmetic to use; NVPTX's NVVMReflect pass
# answers from the module flag `nvvm-reflect-ftz`. It runs at the start of LLVM 22's O3 pipeline
# (the target machine registers it) and again in codegen.
_REFLECT = "@__nvvm_reflect("
_REFLECT_HIDDEN = "@ttbuild.nvvm_reflect("


def hide_reflect(text: str) -> str:
    """`text` (LLVM IR) with libdevice's `__nvvm_reflect` renamed, so the O3 pipeline cannot answer
    it and keeps its calls as opaque calls; show_reflect undoes it, and codegen's NVVMReflect
    then folds them (the ptx stage). Triton 3.6 optimizes so: its LLIR still has the calls.

    Why: every fma of libdevice is an `if (reflect) fma.rn.ftz else fma.rn` diamond; a call that
    may touch memory keeps LLVM from speculating a rare path that holds one, so libdevice's rare
    cases stay branches (logf's `x >= inf`: fma(x, inf, inf); tanhf's two ranges). Answered
    first, each is one speculatable fma, SimplifyCFG makes selects of them and a loop of logs is
    one basic block; ptxas 13.0 then issues all of a chunk's loads up front: a KL-divergence row
    loop at 16 warps took 66 registers (1 CTA per SM), Triton's build of the same source 32."""
    return text.replace(_REFLECT, _REFLECT_HIDDEN)


def show_reflect(text: str) -> str:
    """hide_reflect undone."""
    return text.replace(_REFLECT_HIDDEN, _REFLECT)


def optimize(text: str, arch: str = _ARCH, fp_fusion: bool = True, short_ptr: bool = False) -> str:
    """Parse LLVM IR text, run the new-pass-manager O3 pipeline with the NVPTX target machine
    (so the data layout and TTI are NVPTX's) and the SLP vectorizer on (as Triton; SLP_THRESHOLD), verify, and
    return the optimized IR text.

    With fp_fusion, libdevice's float adds/multiplies become `contract` too: Triton compiles with
    AllowFPOpFusion=Fast, so its libdevice code may form FMAs (and ptxas may fuse its plain
    mul.f32) where ours would pin mul.rn.f32 — tl.randn's log/cos then round differently.
    The linked module is pruned to what the kernel calls first, so that round trip is small.
    libdevice's `__nvvm_reflect` calls stay in the result for codegen to answer (hide_reflect)."""
    tm = target_machine(arch, short_ptr=short_ptr)
    mod = llvm.parse_assembly(text)
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    mod.verify()
    reflects = False
    if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
        # The linked module is printed and parsed again (hide_reflect; with fp_fusion, _contract),
        # so a pruned link put in the whole link's order (_linked_text) gives the same module.
        text = _linked_text(mod, tm)
        if text is None:
            link_libdevice(mod, tm)
            text = str(mod)
        reflects = _REFLECT in text
        mod = llvm.parse_assembly(hide_reflect(_contract(text) if fp_fusion else text))
        mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    # Triton's optimize_module (python/src/llvm.cpp) turns the SLP vectorizer on; llvmlite's O3
    # leaves it off. It keeps fp16 tensors in <2 x half> pairs (one 32-bit register each)
    # through phis and loops: layer norm backward's dx kernel needed 165 registers without it
    # (28 bytes spilled under its 128 cap), 128 with it, as Triton's build.
    pto.slp_vectorization = True  # keeping only trees that save more than SLP_THRESHOLD (set in _init)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    mod.verify()
    text = str(mod)
    split = bf16_sub.split_subtractions(text)  # neg.bf16x2 avoided, as Triton's scalar bf16 (bf16_sub)
    if split != text:
        llvm.parse_assembly(split).verify()
        text = split
    return show_reflect(text) if reflects else text


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


# LLVM's NVPTX call lowering numbers call sites with one counter per process (the `// callseq N`
# comments, `prototype_N` of indirect calls): the same module's PTX would depend on what the
# process compiled before it.
_CALL_SITE = re.compile(r"(// callseq |\bprototype_)(\d+)")


def number_call_sites(ptx: str) -> str:
    """Call sites renumbered 0, 1, ... in order of appearance (one number per site, its comments
    and prototype keep it), so a kernel's PTX is the same in every process."""
    ids: dict[str, int] = {}
    return _CALL_SITE.sub(lambda m: m.group(1) + str(ids.setdefault(m.group(2), len(ids))), ptx)


def emit_ptx(text: str, arch: str = _ARCH, ptx_version: int = PTX_VERSION) -> str:
    """LLVM IR text -> PTX text, `.target` without `, debug`, call sites numbered from 0
    (number_call_sites), warp-uniform address products fused into `mad.wide` (mad_wide.fuse).
    Long chains of disjoint ors from one base are rewritten as adds first (unchain_disjoint_ors:
    codegen time, not code)."""
    short = re.search(r'^target datalayout = "[^"]*\bp3:32:32', text, re.M) is not None
    tm = target_machine(arch, ptx_version, short)
    mod = llvm.parse_assembly(unchain_disjoint_ors(text))
    mod.verify()
    ptx = mad_wide.fuse(number_call_sites(tm.emit_assembly(mod)))
    return re.sub(r"^(\.target\s+\S+?)\s*,\s*debug\s*$", r"\1", ptx, flags=re.M)
