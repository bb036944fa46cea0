"""Tensor descriptors made in the kernel on sm_90 (CPU). What is checked:

Hand-written TTGIR in the form the ttgir stage emits for `tl.make_tensor_descriptor`
(`ttg.global_scratch_alloc`, `ttng.tensormap_create`, `ttng.tensormap_fenceproxy_acquire`,
`ttng.reinterpret_tensor_descriptor`) feeding one TMA load, read back and stored; the extra
global-scratch kernel parameter, each program's scratch address, the tensormap.replace sequence and
its values, the release/acquire protocol and barriers (LLIR evaluated per thread and program, PTX
through FileCheck and ptxas for sm_90a, Triton 3.6 compiling the same TTGIR as the oracle).
"""

from __future__ import annotations

import re

import pytest
from filecheck_util import filecheck
from llir_eval import Eval, asm_calls
from llvmlite import ir
from ptx_util import assert_ptxas_accepts, ttgir_to_ptx

from ttbuild import tma
from ttbuild.backend import mlir_util as mu
from ttbuild.backend.llir import emit
from ttbuild.errors import CompilationError

BS = "#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>"
BAR = f"!ttg.memdesc<1xi64, {BS}, #ttg.shared_memory, mutable>"
BARS = f"!ttg.memdesc<1x1xi64, {BS}, #ttg.shared_memory, mutable>"
BITS = {"f16": 16, "bf16": 16, "f32": 32, "i8": 8, "f8E4M3FN": 8}
PTX_ELEMTYPE = {"f16": 6, "bf16": 10, "f32": 7, "i8": 0, "f8E4M3FN": 0}  # PTX's tensormap .elemtype codes
SWIZZLE_MODE = {0: 0, 32: 1, 64: 2, 128: 3}


def _blocked(rows, cols, vec, warps):
    tc = max(1, min(32, cols // vec))
    return (f"#ttg.blocked<{{sizePerThread = [1, {vec}], threadsPerWarp = [{32 // tc}, {tc}], "
            f"warpsPerCTA = [{warps}, 1], order = [1, 0]}}>")


def kernel_text(rows=128, cols=64, elem="f16", swizzle=128, *, warps=4, descs=1, scratch="auto", enc=False,
                elem_type=None, box=None, swizzle_mode=None, props=True, offsets=None, tile_offset=1024,
                copy=True) -> str:
    """TTGIR (generic form) of `k(a: *elem, out: *elem, M, K, y, x, n)`: `descs` descriptors of
    `a` viewed as an M x K row-major matrix (stride K), made in the kernel as the ttgir stage does
    (global scratch slot k * 128, box ttbuild.tma.box innermost first, byte strides, PTX elemtype,
    swizzle mode); the last one loads its rows x cols block at (y, x) through TMA into an nvmma
    tile, read back and stored row-major to `out`. `scratch`: the module's
    ttg.global_scratch_memory_size ("auto": descs * 128, None: no attribute). `enc`: the
    descriptor type carries the tile's encoding (Triton's spelling). elem_type / box /
    swizzle_mode / offsets override what the ttgir stage would write; `props`: the create's
    attributes as properties (`<{...}>`, Triton's printer) or as an attribute dictionary (ttbuild's
    Operation.create)."""
    bits = BITS[elem]
    eb = bits // 8
    nv = f"#ttg.nvmma_shared<{{swizzlingByteWidth = {swizzle}, transposed = false, elementBitWidth = {bits}}}>"
    tile = f"!ttg.memdesc<{rows}x{cols}x{elem}, {nv}, #ttg.shared_memory, mutable>"
    desc_t = f"!tt.tensordesc<tensor<{rows}x{cols}x{elem}, {nv}>>" if enc else f"!tt.tensordesc<tensor<{rows}x{cols}x{elem}>>"
    vec = 16 // eb
    bl = _blocked(rows, cols, vec, warps)
    box = box or list(tma.box((rows, cols), bits, swizzle))[::-1]
    mode = SWIZZLE_MODE[swizzle] if swizzle_mode is None else swizzle_mode
    code = PTX_ELEMTYPE[elem] if elem_type is None else elem_type
    offsets = offsets or [128 * k for k in range(descs)]
    attrs = (f"elem_type = {code} : i32, fill_mode = 0 : i32, interleave_layout = 0 : i32, "
             f"operandSegmentSizes = array<i32: 1, 1, 2, 2, 1, 2>, swizzle_mode = {mode} : i32")
    attrs = f"<{{{attrs}}}>" if props else f"{{{attrs}}}"
    t = lambda e: f"tensor<{rows}x{cols}x{e}, #bl>"  # noqa: E731
    body = f'''
    %c0 = "arith.constant"() <{{value = 0 : i32}}> : () -> i32
    %c1 = "arith.constant"() <{{value = 1 : i32}}> : () -> i32
    %cb0 = "arith.constant"() <{{value = {box[0]} : i32}}> : () -> i32
    %cb1 = "arith.constant"() <{{value = {box[1]} : i32}}> : () -> i32
    %ceb = "arith.constant"() <{{value = {eb} : i64}}> : () -> i64
    %k64 = "arith.extsi"(%K) : (i32) -> i64
    %sb = "arith.muli"(%k64, %ceb) <{{overflowFlags = #arith.overflow<none>}}> : (i64, i64) -> i64'''
    for k, off in enumerate(offsets):
        body += f'''
    %tm{k} = "ttg.global_scratch_alloc"() <{{alignment = 128 : i32, nbytes = 128 : i32}}> {{ttg.global_scratch_memory_offset = {off} : i32}} : () -> !tt.ptr<i8>
    "ttng.tensormap_create"(%tm{k}, %a, %cb0, %cb1, %K, %M, %sb, %c1, %c1) {attrs} : (!tt.ptr<i8>, !tt.ptr<{elem}>, i32, i32, i32, i32, i64, i32, i32) -> ()
    "ttng.tensormap_fenceproxy_acquire"(%tm{k}) : (!tt.ptr<i8>) -> ()
    %desc{k} = "ttng.reinterpret_tensor_descriptor"(%tm{k}) : (!tt.ptr<i8>) -> {desc_t}'''
    d = f"%desc{len(offsets) - 1}"
    if copy:
        body += f'''
    %p = "arith.cmpi"(%n, %c0) <{{predicate = 4 : i64}}> : (i32, i32) -> i1
    %bars = "ttg.local_alloc"() {{allocation.offset = 0 : i32}} : () -> {BARS}
    %bar = "ttg.memdesc_index"(%bars, %c0) : ({BARS}, i32) -> {BAR}
    "ttng.init_barrier"(%bar) <{{count = 1 : i32}}> : ({BAR}) -> ()
    %buf = "ttg.local_alloc"() {{allocation.offset = {tile_offset} : i32}} : () -> {tile}
    "ttng.barrier_expect"(%bar, %p) <{{size = {rows * cols * eb} : i32}}> : ({BAR}, i1) -> ()
    "ttng.async_tma_copy_global_to_local"({d}, %y, %x, %bar, %buf, %p) <{{operandSegmentSizes = array<i32: 1, 2, 0, 1, 1, 1>}}> : ({desc_t}, i32, i32, {BAR}, {tile}, i1) -> ()
    "ttng.wait_barrier"(%bar, %c0) <{{operandSegmentSizes = array<i32: 1, 1, 0, 0>}}> : ({BAR}, i32) -> ()
    %v = "ttg.local_load"(%buf) : ({tile}) -> {t(elem)}
    %r = "tt.make_range"() <{{end = {rows} : i32, start = 0 : i32}}> : () -> tensor<{rows}xi32, #s1>
    %c = "tt.make_range"() <{{end = {cols} : i32, start = 0 : i32}}> : () -> tensor<{cols}xi32, #s0>
    %re = "tt.expand_dims"(%r) <{{axis = 1 : i32}}> : (tensor<{rows}xi32, #s1>) -> tensor<{rows}x1xi32, #bl>
    %ce = "tt.expand_dims"(%c) <{{axis = 0 : i32}}> : (tensor<{cols}xi32, #s0>) -> tensor<1x{cols}xi32, #bl>
    %pitch = "arith.constant"() <{{value = dense<{cols}> : tensor<{rows}x1xi32, #bl>}}> : () -> tensor<{rows}x1xi32, #bl>
    %rm = "arith.muli"(%re, %pitch) <{{overflowFlags = #arith.overflow<none>}}> : (tensor<{rows}x1xi32, #bl>, tensor<{rows}x1xi32, #bl>) -> tensor<{rows}x1xi32, #bl>
    %rb = "tt.broadcast"(%rm) : (tensor<{rows}x1xi32, #bl>) -> {t("i32")}
    %cb = "tt.broadcast"(%ce) : (tensor<1x{cols}xi32, #bl>) -> {t("i32")}
    %off = "arith.addi"(%rb, %cb) <{{overflowFlags = #arith.overflow<none>}}> : ({t("i32")}, {t("i32")}) -> {t("i32")}
    %base = "tt.splat"(%out) : (!tt.ptr<{elem}>) -> {t(f"!tt.ptr<{elem}>")}
    %ptrs = "tt.addptr"(%base, %off) : ({t(f"!tt.ptr<{elem}>")}, {t("i32")}) -> {t(f"!tt.ptr<{elem}>")}
    "tt.store"(%ptrs, %v) <{{boundaryCheck = array<i32>, cache = 1 : i32, evict = 1 : i32}}> : ({t(f"!tt.ptr<{elem}>")}, {t(elem)}) -> ()
    "ttng.inval_barrier"(%bar) : ({BAR}) -> ()'''
    body += '''
    "tt.return"() : () -> ()'''
    size = len(offsets) * 128 if scratch == "auto" else scratch
    mod_attrs = ['"ttg.num-ctas" = 1 : i32', f'"ttg.num-warps" = {warps} : i32']
    if size is not None:
        mod_attrs += ["ttg.global_scratch_memory_alignment = 128 : i32", f"ttg.global_scratch_memory_size = {size} : i32"]
    mod_attrs += [f"ttg.shared = {tile_offset + rows * cols * eb} : i32", 'ttg.target = "cuda:90"',
                  '"ttg.threads-per-warp" = 32 : i32']
    return f'''#bl = {bl}
#s0 = #ttg.slice<{{dim = 0, parent = {bl}}}>
#s1 = #ttg.slice<{{dim = 1, parent = {bl}}}>
"builtin.module"() ({{
  "tt.func"() <{{arg_attrs = [{{tt.divisibility = 16 : i32}}, {{tt.divisibility = 16 : i32}}, {{}}, {{}}, {{}}, {{}}, {{}}], function_type = (!tt.ptr<{elem}>, !tt.ptr<{elem}>, i32, i32, i32, i32, i32) -> (), sym_name = "k", sym_visibility = "public"}}> ({{
  ^bb0(%a: !tt.ptr<{elem}>, %out: !tt.ptr<{elem}>, %M: i32, %K: i32, %y: i32, %x: i32, %n: i32):{body}
  }}) : () -> ()
}}) {{{", ".join(mod_attrs)}}} : () -> ()
'''


# ------------------------------------------------------------------ helpers



def lowered_function(text: str, monkeypatch) -> ir.Function:
    """emit.lower(text)'s llvmlite function (the kernel), captured from the first rule call."""
    got = {}
    real = emit.RULES

    class Spy:
        def get(self, name, default=None):
            fn = real.get(name, default)
            if fn is None:
                return None

            def wrapped(ctx, op, *args):
                got["fn"] = ctx.builder.function
                return fn(ctx, op, *args)
            return wrapped
    monkeypatch.setattr(emit, "RULES", Spy())
    emit.lower(text)
    return got["fn"]


def _replaces(fn) -> list:
    """[(field, ordinal or None, value operand or immediate, predicate)] of the
    tensormap.replace calls, in order."""
    out = []
    for c in asm_calls(fn, "tensormap.replace.tile."):
        text = c.callee.asm
        m = re.match(r"@\$0 tensormap\.replace\.tile\.(\w+)\.shared::cta\.b1024\.b(32|64) \[\$1\](?:, (\d+))?, "
                     r"(\$2|\d+);$", text)
        assert m, text
        field, _, ordinal, val = m.groups()
        out.append((field, None if ordinal is None else int(ordinal),
                    c.args[2] if val == "$2" else int(val), c.args[0], c.args[1]))
    return out


# --------------------------------------------------------------------------------- tests

def test_device_descriptorttgir_to_ptx(tmp_path):
    """A 128x64 fp16 descriptor (128-byte swizzle) made in the kernel: one trailing .u64 .ptr
    parameter (the scratch base), this program's slot from ctaid/nctaid, warp 0 zeroes the
    template, thread 0 writes every field (rank 1, box {64, 128}, dims {K, M}, stride K * 2
    bytes, element strides 1, elemtype 6, interleave 0, swizzle 3, fill 0), warp 0 copies it
    to the slot with the release and acquires it, a CTA barrier, and the TMA copy reads the map
    at the slot's generic address; ptxas accepts it."""
    p = ttgir_to_ptx(kernel_text())
    checks = r"""
CHECK: .param .u32 k_param_6,
CHECK-NEXT: .param .u64 .ptr .global .align 1 k_param_7
CHECK-NEXT: )
CHECK-DAG: ld.param.b64 [[A:%rd[0-9]+]], [k_param_0];
CHECK-DAG: ld.param.b32 [[M:%r[0-9]+]], [k_param_2];
CHECK-DAG: ld.param.b32 [[K:%r[0-9]+]], [k_param_3];
CHECK-DAG: ld.param.b64 [[SCRATCH:%rd[0-9]+]], [k_param_7];
CHECK-DAG: mov.u32 [[TID:%r[0-9]+]], %tid.x;
CHECK-DAG: mov.u32 [[X:%r[0-9]+]], %ctaid.x;
CHECK-DAG: mov.u32 [[Y:%r[0-9]+]], %ctaid.y;
CHECK-DAG: mov.u32 [[Z:%r[0-9]+]], %ctaid.z;
CHECK-DAG: mov.u32 [[GX:%r[0-9]+]], %nctaid.x;
CHECK-DAG: mov.u32 [[GY:%r[0-9]+]], %nctaid.y;
CHECK-DAG: {{mul|mad}}.wide.u32 [[ZGY:%rd[0-9]+]], [[Z]], [[GY]]{{(, %rd[0-9]+)?}};
CHECK-DAG: setp.lt.u32 [[WARP0:%p[0-9]+]], [[TID]], 32;
CHECK-DAG: setp.eq.b32 [[LEAD:%p[0-9]+]], [[TID]], 0;
CHECK-DAG: mul.wide.s32 [[STRIDE:%rd[0-9]+]], [[K]], 2;
CHECK-DAG: add.s64 [[SLOT:%rd[0-9]+]], [[SCRATCH]], {{%rd[0-9]+}};
CHECK: @[[WARP0]] st.shared.b32 [{{%r[0-9]+}}], 0;
CHECK: bar.warp.sync -1;
CHECK: @[[LEAD]] tensormap.replace.tile.global_address.shared::cta.b1024.b64 [[[T:%rd[0-9]+]]], [[A]];
CHECK: @[[LEAD]] tensormap.replace.tile.rank.shared::cta.b1024.b32 [[[T]]], 1;
CHECK: mov.b32 [[B0:%r[0-9]+]], 64;
CHECK: @[[LEAD]] tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [[[T]]], 0, [[B0]];
CHECK: mov.b32 [[B1:%r[0-9]+]], 128;
CHECK: @[[LEAD]] tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [[[T]]], 1, [[B1]];
CHECK: @[[LEAD]] tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [[[T]]], 0, [[K]];
CHECK: @[[LEAD]] tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [[[T]]], 1, [[M]];
CHECK: @[[LEAD]] tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [[[T]]], 0, [[STRIDE]];
CHECK: mov.b32 [[ONE:%r[0-9]+]], 1;
CHECK: @[[LEAD]] tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [[[T]]], 0, [[ONE]];
CHECK: @[[LEAD]] tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [[[T]]], 1, [[ONE]];
CHECK: @[[LEAD]] tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [[[T]]], 6;
CHECK: @[[LEAD]] tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [[[T]]], 0;
CHECK: @[[LEAD]] tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [[[T]]], 3;
CHECK: @[[LEAD]] tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [[[T]]], 0;
CHECK: bar.warp.sync -1;
CHECK: @[[WARP0]] tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [[[SLOT]]], [[[T]]], 128;
CHECK: cvta.global.u64 [[MAP:%rd[0-9]+]], [[SLOT]];
CHECK: @[[WARP0]] fence.proxy.tensormap::generic.acquire.gpu [[[MAP]]], 128;
CHECK-NEXT: @[[WARP0]] cp.async.bulk.commit_group;
CHECK-NEXT: @[[WARP0]] cp.async.bulk.wait_group.read 0;
CHECK-NEXT: // end inline asm
CHECK-NEXT: bar.sync 0;
CHECK: fence.proxy.async.shared::cta;
CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[MAP]], {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%r[0-9]+}}];
CHECK: mbarrier.try_wait.parity
CHECK: ld.shared.v4.b32
"""
    filecheck(p, checks, tmp_path)
    assert p.count("tensormap.replace.tile.") == 13 and p.count("bar.warp.sync") == 2
    assert_ptxas_accepts(p, tmp_path)


@pytest.mark.parametrize("props,enc", [(True, False), (False, False), (True, True)])
def test_spellings_lower_alike(props, enc):
    """The create's attributes as properties (Triton's printer) or as an attribute dictionary
    (ttbuild's Operation.create), the descriptor type with Triton's encoding inside or without:
    the same LLIR."""
    assert emit.lower(kernel_text(props=props, enc=enc)) == emit.lower(kernel_text())


@pytest.mark.parametrize("sregs", [
    dict(x=0, y=0, z=0, gx=1, gy=1), dict(x=3, y=0, z=0, gx=7, gy=1), dict(x=2, y=5, z=0, gx=7, gy=9),
    dict(x=6, y=8, z=3, gx=7, gy=9), dict(x=65535, y=65534, z=3, gx=65536, gy=65535),
])
def test_each_program_writes_its_own_slots(sregs, monkeypatch):
    """Two descriptors (slots at 0 and 128 of 256 bytes a program): the maps are written to
    scratch + 256 * (x + gx * (y + gy * z)) + slot, in 64 bits (no wrap for large grids); the
    acquire and the TMA copy use the same address."""
    fn = lowered_function(kernel_text(descs=2), monkeypatch)
    base = 1 << 40
    regs = {"tid.x": 0, "ctaid.x": sregs["x"], "ctaid.y": sregs["y"], "ctaid.z": sregs["z"],
            "nctaid.x": sregs["gx"], "nctaid.y": sregs["gy"], "nctaid.z": 4}
    ev = Eval(regs, {7: base})
    pid = sregs["x"] + sregs["gx"] * (sregs["y"] + sregs["gy"] * sregs["z"])
    cps = asm_calls(fn, "tensormap.cp_fenceproxy")
    acqs = asm_calls(fn, "fence.proxy.tensormap::generic.acquire.gpu")
    copies = asm_calls(fn, "cp.async.bulk.tensor")
    assert len(cps) == len(acqs) == 2 and len(copies) == 1
    slots = [base + 256 * pid + 128 * k for k in range(2)]
    assert [ev(c.args[1]) for c in cps] == slots
    assert [ev(c.args[1]) for c in acqs] == slots
    assert ev(copies[0].args[2]) == slots[1]  # the copy reads the last descriptor's map
    arg = fn.args[-1]
    assert fn.args[-1].type == ir.PointerType(addrspace=1) and arg.name == "arg7" and len(fn.args) == 8


@pytest.mark.parametrize("rows,cols,elem,swizzle", [
    (128, 64, "f16", 128), (64, 128, "f16", 128), (64, 64, "bf16", 64), (64, 64, "f32", 128),
    (128, 128, "f8E4M3FN", 128), (64, 32, "f16", 0),
])
def test_fields_and_who_writes_them(rows, cols, elem, swizzle, monkeypatch):
    """Per thread: warp 0 (tid < 32) zeroes the 128-byte template, one 32-bit word a lane (lane
    l at byte 4l); thread 0 alone writes the fields into it, in Triton's order, with the values
    of the create's operands (box and extents innermost first, the byte stride, the element
    type's PTX code); warp 0 copies and acquires."""
    fn = lowered_function(kernel_text(rows, cols, elem, swizzle), monkeypatch)
    bits = BITS[elem]
    box = list(tma.box((rows, cols), bits, swizzle))[::-1]
    M, K = 1000, 3000
    want = ([("global_address", None, 1 << 33), ("rank", None, 1)]
            + [("box_dim", i, b) for i, b in enumerate(box)] + [("global_dim", 0, K), ("global_dim", 1, M)]
            + [("global_stride", 0, K * bits // 8), ("element_stride", 0, 1), ("element_stride", 1, 1),
               ("elemtype", None, PTX_ELEMTYPE[elem]), ("interleave_layout", None, 0),
               ("swizzle_mode", None, SWIZZLE_MODE[swizzle]), ("fill_mode", None, 0)])
    zero = asm_calls(fn, "st.shared.b32")
    assert len(zero) == 1 and zero[0].callee.asm == "@$0 st.shared.b32 [$1], 0;"
    for tid in (0, 1, 31, 32, 127):
        ev = Eval({"tid.x": tid, "ctaid.x": 0, "ctaid.y": 0, "ctaid.z": 0, "nctaid.x": 1, "nctaid.y": 1},
                  {0: 1 << 33, 2: M, 3: K, 7: 1 << 40})
        reps = _replaces(fn)
        got = [(f, o, v if isinstance(v, int) else ev(v)) for f, o, v, _, _ in reps]
        assert got == want
        assert all(ev(pred) == int(tid == 0) for _, _, _, pred, _ in reps)
        assert {ev(t) for *_, t in reps} == {0}  # the template at the start of shared memory
        assert ev(zero[0].args[0]) == int(tid < 32)
        if tid < 32:
            assert ev(zero[0].args[1]) == 4 * tid
        for c in asm_calls(fn, "tensormap.cp_fenceproxy") + asm_calls(fn, "fence.proxy.tensormap"):
            assert ev(c.args[0]) == int(tid < 32)


def test_barriers_around_the_template(tmp_path):
    """bar.warp.sync after the zeroing and before the warp's copy; a CTA barrier after each
    acquire; a second create writes the template only after that barrier (no extra one), and
    global_smem is at least 128-byte aligned."""
    p = ttgir_to_ptx(kernel_text(descs=2))
    seq = re.findall(r"(bar\.sync\s+0|bar\.warp\.sync\s+-1|st\.shared\.b32|tensormap\.cp_fenceproxy|"
                     r"fence\.proxy\.tensormap|tensormap\.replace\.tile\.global_address)", p)
    seq = [re.sub(r"\s+", " ", s_) for s_ in seq]
    one = ["st.shared.b32", "bar.warp.sync -1", "tensormap.replace.tile.global_address", "bar.warp.sync -1",
           "tensormap.cp_fenceproxy", "fence.proxy.tensormap", "bar.sync 0"]
    assert seq[:14] == one + one
    assert re.search(r"\.extern \.shared \.align (128|256|512|1024) \.b8 global_smem", p)
    assert_ptxas_accepts(p, tmp_path)


def test_a_create_after_a_shared_memory_reader_waits_for_a_barrier(monkeypatch):
    """A create after an op that read shared memory (its template may be that op's scratch)
    starts with a CTA barrier."""
    text = kernel_text(copy=False)
    bl = "#ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>"
    red = f'''
    %rr = "tt.make_range"() <{{end = 256 : i32, start = 0 : i32}}> : () -> tensor<256xi32, {bl}>
    %sum = "tt.reduce"(%rr) <{{axis = 0 : i32}}> ({{
    ^bb1(%l: i32, %rgt: i32):
      %s = "arith.addi"(%l, %rgt) <{{overflowFlags = #arith.overflow<none>}}> : (i32, i32) -> i32
      "tt.reduce.return"(%s) : (i32) -> ()
    }}) : (tensor<256xi32, {bl}>) -> i32
    "tt.store"(%out, %sum) <{{boundaryCheck = array<i32>, cache = 1 : i32, evict = 1 : i32}}> : (!tt.ptr<i32>, i32) -> ()'''
    text = text.replace("!tt.ptr<f16>, i32, i32, i32, i32, i32) -> ()", "!tt.ptr<i32>, i32, i32, i32, i32, i32) -> ()")
    text = text.replace("%out: !tt.ptr<f16>", "%out: !tt.ptr<i32>")
    head, tail = text.split('\n    %tm0 = ', 1)
    text = head + red + '\n    %tm0 = ' + tail
    fn = lowered_function(text, monkeypatch)
    insts = [i for blk in fn.blocks for i in blk.instructions]
    zero = insts.index(asm_calls(fn, "st.shared.b32")[0])
    last_read = max(k for k, i in enumerate(insts[:zero]) if isinstance(i, ir.LoadInstr))
    assert any(isinstance(i, ir.CallInstr) and getattr(i.callee, "name", "") == "llvm.nvvm.barrier0"
               for i in insts[last_read:zero])
    assert len(asm_calls(fn, "tensormap.cp_fenceproxy")) == 1


def test_no_scratch_attribute_no_extra_parameter(tmp_path):
    """Without ttg.global_scratch_memory_size (or with 0) the kernel has exactly its tt.func
    parameters; a global_scratch_alloc there is an error that says what is missing."""
    text = kernel_text(copy=False, scratch=None)
    plain = re.sub(r'\n    %tm0 = .*?reinterpret_tensor_descriptor"\(%tm0\)[^\n]*', "", text, flags=re.S)
    assert "tensormap" not in plain
    for t in (plain, plain.replace('"ttg.num-warps" = 4 : i32', '"ttg.num-warps" = 4 : i32, '
                                   'ttg.global_scratch_memory_size = 0 : i32')):
        ll = emit.lower(t)
        assert re.search(r'define ptx_kernel void @"?k"?\(ptr addrspace\(1\) %"?arg0"?, ptr addrspace\(1\) %"?arg1"?, '
                         r'i32 %"?arg2"?, i32 %"?arg3"?, i32 %"?arg4"?, i32 %"?arg5"?, i32 %"?arg6"?\)', ll), ll[:400]
        assert "nctaid" not in ll
    p = ttgir_to_ptx(plain)
    assert "k_param_6\n)" in p and "k_param_7" not in p
    with pytest.raises(CompilationError, match="without ttg.global_scratch_memory_size"):
        emit.lower(text)


def test_scratch_errors():
    """A slot past the program's scratch, or an alloc without its offset, is refused."""
    with pytest.raises(CompilationError, match="does not fit the 128 bytes"):
        emit.lower(kernel_text(offsets=[128], scratch=128))
    with pytest.raises(CompilationError, match="without ttg.global_scratch_memory_offset"):
        emit.lower(kernel_text().replace(" {ttg.global_scratch_memory_offset = 0 : i32}", ""))


def test_elem_type_must_be_ptx_code():
    """bf16 is PTX's elemtype 10 (the CUDA driver's CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 is 9, which
    PTX reads as f64): a code that does not describe the element type is refused."""
    emit.lower(kernel_text(64, 64, "bf16", 128))
    with pytest.raises(CompilationError, match=r"elem_type = 9 \(f64\).*bf16 is 10 \(bf16\)"):
        emit.lower(kernel_text(64, 64, "bf16", 128, elem_type=9))
    with pytest.raises(CompilationError, match=r"f16 elements with elem_type = 8 \(f32.ftz\)"):
        emit.lower(kernel_text(64, 64, "f16", 128, elem_type=8))


def test_box_and_swizzle_must_match_the_copies():
    """The TMA copy cuts the block into ttbuild.tma.box boxes of its tile's swizzle: a map with
    another box or swizzle mode is refused (the copies would land elsewhere)."""
    with pytest.raises(CompilationError, match=r"has box \[128, 128\]"):
        emit.lower(kernel_text(box=[128, 128]))
    with pytest.raises(CompilationError, match="swizzle_mode 2"):
        emit.lower(kernel_text(swizzle_mode=2))


def test_rank_3_create(tmp_path):
    """A rank-3 map (no copy here: ttbuild copies rank 2): rank 2, three box/dims/element
    strides and two byte strides, innermost first; ptxas accepts it."""
    text = kernel_text(copy=False)
    text = text.replace("array<i32: 1, 1, 2, 2, 1, 2>", "array<i32: 1, 1, 3, 3, 2, 3>")
    text = text.replace('"ttng.tensormap_create"(%tm0, %a, %cb0, %cb1, %K, %M, %sb, %c1, %c1)',
                        '"ttng.tensormap_create"(%tm0, %a, %cb0, %cb1, %c1, %K, %M, %n, %sb, %sb, %c1, %c1, %c1)')
    text = text.replace("(!tt.ptr<i8>, !tt.ptr<f16>, i32, i32, i32, i32, i64, i32, i32) -> ()",
                        "(!tt.ptr<i8>, !tt.ptr<f16>, i32, i32, i32, i32, i32, i32, i64, i64, i32, i32, i32) -> ()")
    text = text.replace("!tt.tensordesc<tensor<128x64xf16>>", "!tt.tensordesc<tensor<1x128x64xf16>>")
    p = ttgir_to_ptx(text)
    assert re.search(r"tensormap\.replace\.tile\.rank\.shared::cta\.b1024\.b32 \[%rd\d+\], 2;", p)
    for field, n in (("box_dim", 3), ("global_dim", 3), ("global_stride", 2), ("element_stride", 3)):
        assert re.findall(rf"tensormap\.replace\.tile\.{field}\.shared::cta\.b1024\.b\d+ \[%rd\d+\], (\d)", p) == \
            [str(i) for i in range(n)], field
    assert_ptxas_accepts(p, tmp_path)


def test_allocation_counts_the_template():
    """ttng.tensormap_create needs 128 bytes of scratch: ttg.shared covers it, and a buffer live
    across a create is placed above it."""
    from ttbuild.backend.analysis.allocation import allocate, module_bytes

    text = kernel_text(copy=False)
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        mod = mu.parse_module(text, ctx, "ttgir")
        assert module_bytes(mod, 4) == 128
    # a barrier ring allocated before the create and used after it
    text = kernel_text().replace(' {allocation.offset = 0 : i32}', '').replace(' {allocation.offset = 1024 : i32}', '')
    bars = re.search(r'\n    %bars = [^\n]*\n    %bar = [^\n]*', text).group(0)
    text = text.replace(bars, "")
    text = text.replace('\n    %tm0 = ', bars + '\n    %tm0 = ', 1)
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        mod = mu.parse_module(text, ctx, "ttgir")
        allocate(mod, 4)
        offs = {str(op.results[0].type)[:24]: int(op.attributes["allocation.offset"].value)
                for op in mod.body.operations[0].regions[0].blocks[0].operations if op.name == "ttg.local_alloc"}
    assert all(o >= 128 for t, o in offs.items() if "1x1xi64" in t), offs


def test_triton_compiles_the_same_ttgir_to_the_same_sequence(tmp_path):
    """Triton 3.6 accepts this TTGIR (generic form, its tensordesc spelling) and writes the map
    with the same instructions, fields, ordinals and immediates in the same order; ttbuild adds
    only the second bar.warp.sync (lane 0's writes ordered before the warp's copy)."""
    from oracle import run_triton

    path = tmp_path / "k.ttgir"
    path.write_text(kernel_text(enc=True))
    script = """
import sys, triton
from triton.backends.compiler import GPUTarget
k = triton.compile(sys.argv[1], target=GPUTarget("cuda", 90, 32))
sys.stdout.write(k.asm["ptx"])
print("\\nSCRATCH", k.metadata.global_scratch_size, k.metadata.global_scratch_align)
"""
    theirs = run_triton(script, str(path))
    assert re.search(r"SCRATCH 128 128", theirs)
    ours = ttgir_to_ptx(kernel_text(enc=True))

    def seq(p):
        out = []
        for line in p.splitlines():
            m = re.search(r"(tensormap\.replace\.tile\.\w+)\.shared::cta\.b1024\.b\d+ \[ ?%rd\d+(?: \+ 0)? ?\](.*);", line)
            if m:
                args = [a.strip() for a in m.group(2).split(",") if a.strip()]
                imm = [str(int(a, 0)) for a in args if not a.startswith("%")]
                out.append((m.group(1), *imm))
            elif re.search(r"tensormap\.cp_fenceproxy\.global\.shared::cta\.tensormap::generic\.release\.gpu\.sync\.aligned", line):
                out.append(("cp_fenceproxy", str(int(line.rsplit(",", 1)[1].strip(" ;"), 0))))
            elif "fence.proxy.tensormap::generic.acquire.gpu" in line:
                out.append(("acquire",))
            elif re.search(r"cp\.async\.bulk\.(commit_group|wait_group\.read 0)", line):
                out.append((line.strip().split(" ", 1)[1].strip(" ;"),))
            elif re.search(r"^\s*bar\.sync\s+0;", line) and out:
                out.append(("bar.sync",))
        return out[:out.index(("bar.sync",)) + 1]  # through the barrier after the acquire

    assert seq(ours) == seq(theirs) and len(seq(ours)) == 18
    params = lambda p: re.findall(r"\.param \.(\w+)(?: \.ptr)?", p[:p.index(")")])  # noqa: E731
    assert params(theirs)[:8] == params(ours)  # Triton adds a second (profiler) scratch pointer
