"""The LLVM-side rewrites before NVPTX codegen (ttbuild.backend.nvptx.llvm): what they change and what they leave alone."""

from __future__ import annotations

import re

import pytest
from llvmlite import binding as llvm

from ttbuild.backend.nvptx import mad_wide
from ttbuild.backend.nvptx.llvm import (
    _ARCH,
    PTX_VERSION,
    SLSR_HOT_BASE_USES,
    emit_ptx,
    target_machine,
    unchain_disjoint_ors,
)


def _chain(offsets: int) -> str:
    """A kernel-like function: base = a | b (disjoint), then `offsets` constant disjoint ors of it,
    each stored through (the vector add at BLOCK 8192 on one warp has 255)."""
    body = ["  %base = or disjoint i32 %a, %b"]
    for i in range(1, offsets + 1):
        body.append(f"  %o{i} = or disjoint i32 %base, {4 * i}")
        body.append(f"  %p{i} = getelementptr float, ptr addrspace(1) %ptr, i32 %o{i}")
        body.append(f"  store float 1.0, ptr addrspace(1) %p{i}")
    return ("target triple = \"nvptx64-nvidia-cuda\"\n"
            "define void @k(ptr addrspace(1) %ptr, i32 %a, i32 %b) {\n" + "\n".join(body) + "\n  ret void\n}\n")


def test_long_disjoint_or_chains_become_adds_short_ones_stay():
    """Past SLSR_HOT_BASE_USES constant offsets from one disjoint-or base, the base and its offsets
    are rewritten as `add nuw nsw` (the same values: disjoint bits never carry), which spares
    LLVM's straight-line strength reduction its quadratic time; below it nothing changes."""
    long = _chain(SLSR_HOT_BASE_USES + 1)
    out = unchain_disjoint_ors(long)
    assert "or disjoint" not in out and out.count(" = add nuw nsw i32 ") == SLSR_HOT_BASE_USES + 2
    short = _chain(SLSR_HOT_BASE_USES - 1)
    assert unchain_disjoint_ors(short) == short
    # the same code up to the kind of the base's instruction (add.s32 for or.b32): LLVM given
    # the chain as is emits as many instructions (the library's vector adds: byte-identical PTX;
    # emit_ptx's mad.wide fusion applied to both)
    tm = target_machine(_ARCH, PTX_VERSION, False)

    def body(ptx):
        return [ln.split()[0] for ln in ptx.splitlines() if ln.startswith("\t") and not ln.startswith("\t//")]
    ours, plain = body(emit_ptx(long)), body(mad_wide.fuse(tm.emit_assembly(llvm.parse_assembly(long))))
    assert len(ours) == len(plain) and sum(a != b for a, b in zip(ours, plain)) <= 1, (ours, plain)


_LIBDEVICE_KERNEL = """target triple = "nvptx64-nvidia-cuda"
declare float @__nv_exp2f(float)
declare float @__nv_log2f(float)
define void @k(ptr addrspace(1) %p, float %x) {
  %a = call float @__nv_exp2f(float %x)
  %b = call float @__nv_log2f(float %a)
  %c = fmul float %a, %b
  store float %c, ptr addrspace(1) %p
  ret void
}
"""


def test_libdevice_is_read_once_per_process_and_linked_only_as_needed(monkeypatch):
    """optimize() reads libdevice once (a cached module, cloned per link): a second compile
    reads no file and gives the same IR; what the kernel does not call is gone before O3
    (so the `contract` round trip is small), and libdevice's float math is `contract`."""
    import ttbuild.toolchain
    from ttbuild.backend.nvptx import llvm as nvllvm

    first = nvllvm.optimize(_LIBDEVICE_KERNEL)
    reads = []
    real = ttbuild.toolchain.libdevice_path
    monkeypatch.setattr(ttbuild.toolchain, "libdevice_path", lambda: reads.append(1) or real())
    assert nvllvm.optimize(_LIBDEVICE_KERNEL) == first
    assert nvllvm.optimize(_LIBDEVICE_KERNEL, fp_fusion=False) != first
    assert reads == []
    assert "@__nv_" not in first  # inlined, the rest of libdevice dropped (`__nvvm_reflect` stays)

    tm = target_machine()
    mod = llvm.parse_assembly(_LIBDEVICE_KERNEL)
    mod.data_layout = str(tm.target_data)
    nvllvm.link_libdevice(mod, tm)
    defined = {f.name for f in mod.functions if not f.is_declaration}
    assert {"k", "__nv_exp2f", "__nv_log2f"} <= defined
    assert not any(n.startswith("__nv_") and n not in ("__nv_exp2f", "__nv_log2f") for n in defined)


# A loop of libdevice logs, the flag NVVMReflect reads (`nvvm-reflect-ftz`) set to FTZ.
_LOG_LOOP = """target triple = "nvptx64-nvidia-cuda"
declare float @__nv_logf(float)
define ptx_kernel void @k(ptr addrspace(1) %p, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %loop ]
  %q = getelementptr float, ptr addrspace(1) %p, i32 %i
  %x = load float, ptr addrspace(1) %q
  %l = call float @__nv_logf(float %x)
  store float %l, ptr addrspace(1) %q
  %i1 = add i32 %i, 1
  %c = icmp slt i32 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}
!llvm.module.flags = !{!0}
!0 = !{i32 4, !"nvvm-reflect-ftz", i32 FTZ}
"""


@pytest.mark.parametrize("ftz", [0, 1])
def test_libdevice_reflect_is_answered_in_codegen_so_rare_paths_stay_branches(ftz):
    """optimize() leaves libdevice's `__nvvm_reflect` calls unanswered, as Triton 3.6's LLIR does;
    codegen answers them from the module flag (no call left, only the flag's fma). An fma under
    every reflect keeps LLVM from speculating logf's `x >= inf` case (fma(x, inf, inf)): it stays
    a branch in the loop (answered before O3 it was a select, one conditional branch in all)."""
    from ttbuild.backend.nvptx import llvm as nvllvm

    llir = nvllvm.optimize(_LOG_LOOP.replace("FTZ", str(ftz)))
    assert "@__nvvm_reflect(" in llir and "ttbuild" not in llir
    ptx = emit_ptx(llir)
    assert "reflect" not in ptx and "call" not in ptx
    assert set(re.findall(r"fma\.rn(?:\.ftz)?\.f32", ptx)) == {"fma.rn.ftz.f32" if ftz else "fma.rn.f32"}
    assert len(re.findall(r"@%p\d+ bra", ptx)) == 2  # the loop's back edge and logf's rare case


def _calls(names_types: list[tuple[str, str]], intrinsics: tuple[str, ...] = ()) -> str:
    """A kernel calling each libdevice function (name, float type) of one argument, and
    declaring (and calling) `intrinsics` (float -> float) of its own."""
    body, decls = [], []
    for i, (name, ty) in enumerate(names_types):
        body.append(f"  %r{i} = call {ty} @{name}({ty} undef)")
        decls.append(f"declare {ty} @{name}({ty})")
    for i, name in enumerate(intrinsics):
        body.append(f"  %x{i} = call float @{name}(float undef)")
        decls.append(f"declare float @{name}(float)")
    return ('target triple = "nvptx64-nvidia-cuda"\n@global_smem = external addrspace(3) global [0 x i8]\n'
            "define ptx_kernel void @k(ptr addrspace(1) %p) {\n" + "\n".join(body) + "\n  ret void\n}\n"
            + "\n".join(decls) + "\n")


def test_pruned_libdevice_link_gives_the_whole_links_module():
    """_linked_text (libdevice pruned to what the kernel calls, then put in the whole link's
    order) is the module link_libdevice gives, for float and double math, libdevice globals
    (the trig tables) and intrinsics the kernel declares too: printed after a parse, the same
    text but for attribute groups' numbers and named struct types' suffixes (unique per LLVM
    context, so they count earlier links)."""
    import re

    from ttbuild.backend.nvptx import llvm as nvllvm

    def canonical(text):
        return re.sub(r"(%struct\.\w+)[.\d]*", r"\1", str(llvm.parse_assembly(text)))

    cases = [_calls([("__nv_exp2f", "float"), ("__nv_log2f", "float")],
                    ("llvm.nvvm.ex2.approx.ftz.f32", "llvm.nvvm.fabs.f32")),
             _calls([("__nv_sinf", "float"), ("__nv_cosf", "float"), ("__nv_logf", "float")]),
             _calls([("__nv_sin", "double"), ("__nv_erfcinv", "double"), ("__nv_tanhf", "float")])]
    for short in (False, True):
        tm = target_machine(_ARCH, PTX_VERSION, short)
        for kernel in cases:
            whole, pruned = (llvm.parse_assembly(kernel) for _ in range(2))
            whole.data_layout = pruned.data_layout = str(tm.target_data)
            nvllvm.link_libdevice(whole, tm)
            text = nvllvm._linked_text(pruned, tm)
            assert text is not None and canonical(text) == canonical(str(whole))
            called = set(re.findall(r"call \w+ @(__nv_\w+)\(", kernel))
            assert set(re.findall(r"^define [^@]*@(__nv_\w+)\(", text, re.M)) == called


def test_ptx_of_a_kernel_with_calls_is_the_same_in_every_process_position(tmp_path):
    """LLVM numbers call sites per process; emit_ptx renumbers them per module, so compiling a
    kernel with calls (vprintf, fp64 cos's slow path) after another gives the same PTX."""
    import re

    from ttbuild.compiler import compile

    src = tmp_path / "calls.py"
    src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                   "def k(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
                   "    x = tl.load(x_ptr + offs)\n    tl.device_print('x', x)\n"
                   "    tl.store(x_ptr + offs, tl.cos(x.to(tl.float64)).to(tl.float32))\n")
    first, again = (compile(str(src), kernel="k", signature="*fp32:16", constexprs={"BLOCK": 128},
                            until="ptx")["ptx"].decode() for _ in range(2))
    assert first == again
    sites = re.findall(r"// callseq (\d+)", first)
    assert sites and sites[0] == "0" and sorted(set(sites), key=int) == [str(i) for i in range(len(set(sites)))]
