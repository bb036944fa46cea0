"""TMA loads on sm_90 (CPU). What is checked:

Hand-written TTGIR with a `!tt.tensordesc` parameter (ttbuild's ABI: an i64 CUtensorMap address)
through mbarrier init / expect / `ttng.async_tma_copy_global_to_local` / wait into an
`#ttg.nvmma_shared` tile, read back by `ttg.local_load` into a blocked tensor; the LLIR and PTX (one
copy per box, coordinates, offsets, the barrier protocol), ptxas for sm_90a, and every element's
shared address evaluated from the emitted LLVM IR against NvmmaShared.offset.
"""

from __future__ import annotations

import re
from math import prod

import pytest
from filecheck_util import filecheck
from llir_eval import Eval, asm_calls
from llvmlite import ir
from ptx_util import assert_ptxas_accepts, ttgir_to_ptx

from ttbuild import tma
from ttbuild.backend.ir.encodings import NvmmaShared
from ttbuild.backend.llir import emit
from ttbuild.errors import CompilationError, NotSupportedYet
from ttbuild.stages import llir

# Types of unregistered dialects are opaque text: no attribute aliases inside them.
BS = "#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>"
BAR = f"!ttg.memdesc<1xi64, {BS}, #ttg.shared_memory, mutable>"
BARS = "!ttg.memdesc<{n}x1xi64, " + BS.replace("{", "{{").replace("}", "}}") + ", #ttg.shared_memory, mutable>"


def _blocked(shape, order, warps, vec):
    """A blocked layout over `shape` with `vec` elements per thread along order[0]."""
    c = order[0]
    spt = [1, 1]
    spt[c] = vec
    tpw = [1, 1]
    tpw[c] = max(1, min(32, shape[c] // vec))
    tpw[1 - c] = 32 // tpw[c]
    wpc = [1, 1]
    wpc[1 - c] = warps
    return (f"#ttg.blocked<{{sizePerThread = [{spt[0]}, {spt[1]}], threadsPerWarp = [{tpw[0]}, {tpw[1]}], "
            f"warpsPerCTA = [{wpc[0]}, {wpc[1]}], order = [{order[0]}, {order[1]}]}}>")


def kernel_text(rows, cols, swizzle, *, elem="f16", warps=4, vec=None, trans_view=False, pred="arg",
                ring=1, slot=0, load=True, wait_pred=False) -> str:
    """TTGIR (generic form) of a kernel `k(desc: tensordesc<elem[rows, cols]>, out: *elem, y, x,
    n)`: the block at (y, x) through TMA into an nvmma tile (slot `slot` of a `ring`-deep ring,
    viewed transposed when `trans_view`), read back into a blocked tensor and stored row-major
    to `out`. `pred`: "arg" (n > 0), "true" (a constant) for the copy and the expect."""
    bits = {"f16": 16, "bf16": 16, "f32": 32, "i8": 8, "f8E4M3FN": 8}[elem]
    eb = bits // 8
    vec = vec or 16 // eb
    nv = f"#ttg.nvmma_shared<{{swizzlingByteWidth = {swizzle}, transposed = false, elementBitWidth = {bits}}}>"
    nvt = f"#ttg.nvmma_shared<{{swizzlingByteWidth = {swizzle}, transposed = true, elementBitWidth = {bits}}}>"
    shape = (cols, rows) if trans_view else (rows, cols)
    order = (0, 1) if trans_view else (1, 0)
    bl = _blocked(shape, order, warps, vec)
    R, C = shape
    tile = f"!ttg.memdesc<{rows}x{cols}x{elem}, {nv}, #ttg.shared_memory, mutable>"
    ring_t = f"!ttg.memdesc<{ring}x{rows}x{cols}x{elem}, {nv}, #ttg.shared_memory, mutable>"
    view_t = f"!ttg.memdesc<{cols}x{rows}x{elem}, {nvt}, #ttg.shared_memory, mutable>"
    desc_t = f"!tt.tensordesc<tensor<{rows}x{cols}x{elem}>>"
    t = lambda e: f"tensor<{R}x{C}x{e}, #bl>"  # noqa: E731
    pred_v = "%p" if pred == "arg" else "%true"
    wait = (f'"ttng.wait_barrier"(%bar, %c0, %p) <{{operandSegmentSizes = array<i32: 1, 1, 1, 0>}}> : ({BAR}, i32, i1) -> ()'
            if wait_pred else
            f'"ttng.wait_barrier"(%bar, %c0) <{{operandSegmentSizes = array<i32: 1, 1, 0, 0>}}> : ({BAR}, i32) -> ()')
    body = f'''
    %c0 = "arith.constant"() <{{value = 0 : i32}}> : () -> i32
    %cs = "arith.constant"() <{{value = {slot} : i32}}> : () -> i32
    %true = "arith.constant"() <{{value = true}}> : () -> i1
    %p = "arith.cmpi"(%n, %c0) <{{predicate = 4 : i64}}> : (i32, i32) -> i1
    %bars = "ttg.local_alloc"() {{allocation.offset = 0 : i32}} : () -> {BARS.format(n=ring)}
    %bar = "ttg.memdesc_index"(%bars, %cs) : ({BARS.format(n=ring)}, i32) -> {BAR}
    "ttng.init_barrier"(%bar) <{{count = 1 : i32}}> : ({BAR}) -> ()
    %ring = "ttg.local_alloc"() {{allocation.offset = 1024 : i32}} : () -> {ring_t}
    %buf = "ttg.memdesc_index"(%ring, %cs) : ({ring_t}, i32) -> {tile}
    "ttng.barrier_expect"(%bar, {pred_v}) <{{size = {rows * cols * eb} : i32}}> : ({BAR}, i1) -> ()
    "ttng.async_tma_copy_global_to_local"(%desc, %y, %x, %bar, %buf, {pred_v}) <{{operandSegmentSizes = array<i32: 1, 2, 0, 1, 1, 1>}}> : ({desc_t}, i32, i32, {BAR}, {tile}, i1) -> ()
    {wait}'''
    src = "%buf"
    src_t = tile
    if trans_view:
        body += f'''
    %view = "ttg.memdesc_trans"(%buf) <{{order = array<i32: 1, 0>}}> : ({tile}) -> {view_t}'''
        src, src_t = "%view", view_t
    if load:
        body += f'''
    %v = "ttg.local_load"({src}) : ({src_t}) -> {t(elem)}
    %r = "tt.make_range"() <{{end = {R} : i32, start = 0 : i32}}> : () -> tensor<{R}xi32, #s1>
    %c = "tt.make_range"() <{{end = {C} : i32, start = 0 : i32}}> : () -> tensor<{C}xi32, #s0>
    %re = "tt.expand_dims"(%r) <{{axis = 1 : i32}}> : (tensor<{R}xi32, #s1>) -> tensor<{R}x1xi32, #bl>
    %ce = "tt.expand_dims"(%c) <{{axis = 0 : i32}}> : (tensor<{C}xi32, #s0>) -> tensor<1x{C}xi32, #bl>
    %pitch = "arith.constant"() <{{value = dense<{C}> : tensor<{R}x1xi32, #bl>}}> : () -> tensor<{R}x1xi32, #bl>
    %rm = "arith.muli"(%re, %pitch) : (tensor<{R}x1xi32, #bl>, tensor<{R}x1xi32, #bl>) -> tensor<{R}x1xi32, #bl>
    %rb = "tt.broadcast"(%rm) : (tensor<{R}x1xi32, #bl>) -> {t("i32")}
    %cb = "tt.broadcast"(%ce) : (tensor<1x{C}xi32, #bl>) -> {t("i32")}
    %off = "arith.addi"(%rb, %cb) : ({t("i32")}, {t("i32")}) -> {t("i32")}
    %base = "tt.splat"(%out) : (!tt.ptr<{elem}>) -> {t(f"!tt.ptr<{elem}>")}
    %ptrs = "tt.addptr"(%base, %off) : ({t(f"!tt.ptr<{elem}>")}, {t("i32")}) -> {t(f"!tt.ptr<{elem}>")}
    "tt.store"(%ptrs, %v) <{{boundaryCheck = array<i32>, cache = 1 : i32, evict = 1 : i32}}> : ({t(f"!tt.ptr<{elem}>")}, {t(elem)}) -> ()'''
    body += f'''
    "ttng.inval_barrier"(%bar) : ({BAR}) -> ()
    "tt.return"() : () -> ()'''
    smem = 1024 + ring * rows * cols * eb
    return f'''#bl = {bl}
#s0 = #ttg.slice<{{dim = 0, parent = {bl}}}>
#s1 = #ttg.slice<{{dim = 1, parent = {bl}}}>
"builtin.module"() ({{
  "tt.func"() <{{arg_attrs = [{{}}, {{tt.divisibility = 16 : i32}}, {{}}, {{}}, {{}}], function_type = ({desc_t}, !tt.ptr<{elem}>, i32, i32, i32) -> (), sym_name = "k", sym_visibility = "public"}}> ({{
  ^bb0(%desc: {desc_t}, %out: !tt.ptr<{elem}>, %y: i32, %x: i32, %n: i32):{body}
  }}) : () -> ()
}}) {{"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = {warps} : i32, ttg.shared = {smem} : i32, ttg.target = "cuda:90", "ttg.threads-per-warp" = 32 : i32}} : () -> ()
'''


# ------------------------------------------------------------------ evaluating the LLVM IR

def _smem_source(v):
    """(load pointer, element k) of a loaded element: `extractelement (load <n x T>), k` or a
    scalar load (k = 0)."""
    if isinstance(v, ir.ExtractElement):
        vec, k = v.operands
        return vec.operands[0], int(k.constant)
    assert isinstance(v, ir.LoadInstr), v
    return v.operands[0], 0


def lower_capturing(text: str, monkeypatch) -> tuple[str, dict]:
    """emit.lower(text), with the tt.store operands (pointer and value tensors) and the
    function (llvmlite) captured."""
    got: dict = {}
    real = emit.RULES

    class Spy:
        def get(self, name, default=None):
            fn = real.get(name, default)

            def store(ctx, op, ptr, value, *rest):
                got["ptr"], got["value"], got["fn"] = ptr, value, ctx.builder.function
                return fn(ctx, op, ptr, value, *rest)

            def other(ctx, op, *args):
                got["fn"] = ctx.builder.function
                return fn(ctx, op, *args)
            return store if name == "tt.store" else other if fn is not None else None
    monkeypatch.setattr(emit, "RULES", Spy())
    return emit.lower(text), got


def shared_offsets(got, warps: int, elem_bytes_: int, base: int) -> dict:
    """{(row, col) of the stored tensor: byte offset from `base` it was loaded from}, over every
    thread; asserts threads holding one element agree."""
    out: dict = {}
    shape = got["value"].shape
    for tid in range(32 * warps):
        ev = Eval({"tid.x": tid}, {})
        for p, v in zip(got["ptr"].elems, got["value"].elems):
            flat = ev(p) // elem_bytes_
            idx = divmod(flat, shape[1])
            ptr_v, k = _smem_source(v)
            off = ev(ptr_v) + k * elem_bytes_ - base
            assert out.setdefault(idx, off) == off, (idx, tid)
    assert len(out) == prod(shape)
    return out


def _model(sw: NvmmaShared, index, shape) -> int:
    """Element offset of `index` in an nvmma tile: NvmmaShared.offset, row-major along the
    contiguous dimension for swizzle 0 (what an unswizzled TMA box writes)."""
    if sw.swizzle == 0:
        c, r = sw.order
        return index[r] * shape[c] + index[c]
    return sw.offset(index, shape)




# --------------------------------------------------------------------------------- tests

def test_tensordesc_parameter_is_a_u64_and_the_protocol_as_triton(tmp_path):
    """128x64 fp16, 128-byte swizzle: the descriptor parameter is a .u64 (a CUtensorMap
    address) used as the copy's map operand; one thread inits the barrier, a CTA barrier,
    arms it with the tile's 16384 bytes, proxy fence, one box at {x, y} = {param 3, param 2};
    every thread spins on the parity wait, then reads the tile; a barrier, then the inval."""
    p = ttgir_to_ptx(kernel_text(128, 64, 128))
    checks = """
CHECK: .param .u64 k_param_0,
CHECK-DAG: ld.param.b64 [[MAP:%rd[0-9]+]], [k_param_0];
CHECK-DAG: ld.param.b32 [[Y:%r[0-9]+]], [k_param_2];
CHECK-DAG: ld.param.b32 [[X:%r[0-9]+]], [k_param_3];
CHECK-DAG: setp.eq.b32 [[LEAD:%p[0-9]+]], {{%r[0-9]+}}, 0;
CHECK: @[[LEAD]] mbarrier.init.shared::cta.b64 [[[BAR:%r[0-9]+]]], 1;
CHECK-NEXT: // end inline asm
CHECK-NEXT: bar.sync 0;
CHECK: @[[P:%p[0-9]+]] mbarrier.arrive.expect_tx.shared::cta.b64 _, [[[BAR]]], 16384;
CHECK: fence.proxy.async.shared::cta;
CHECK: @[[P]] cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [[[MAP]], {[[X]], [[Y]]}], [[[BAR]]];
CHECK-NOT: cp.async.bulk.tensor
CHECK: ttb_wait_[[ID:[0-9_]+]]:
CHECK-NEXT: mbarrier.try_wait.parity.shared::cta.b64 ttb_ready, [[[BAR]]], {{%r[0-9]+}};
CHECK-NEXT: @!ttb_ready bra.uni ttb_wait_[[ID]];
CHECK: ld.shared.v4.b32
CHECK: bar.sync 0;
CHECK: @[[LEAD]] mbarrier.inval.shared::cta.b64 [[[BAR]]];
"""
    filecheck(p, checks, tmp_path)
    assert_ptxas_accepts(p, tmp_path)


@pytest.mark.parametrize("rows,cols,swizzle,elem", [
    (128, 64, 128, "f16"), (64, 128, 128, "f16"), (64, 128, 64, "f16"), (64, 64, 32, "bf16"),
    (128, 64, 0, "f16"), (64, 256, 0, "f16"), (64, 64, 128, "f32"), (128, 128, 128, "f8E4M3FN"),
    (64, 256, 128, "i8"),
])
def test_one_copy_per_box(rows, cols, swizzle, elem, monkeypatch):
    """ttbuild.tma.copies boxes of ttbuild.tma.box: box k at x = x0 + k * box_cols, y = y0,
    into the tile's k-th swizzle block (dst + k * rows * box_cols * element bytes), on the
    tile's barrier, by thread 0 only and only under the op's predicate."""
    bits = {"f16": 16, "bf16": 16, "f32": 32, "i8": 8, "f8E4M3FN": 8}[elem]
    eb = bits // 8
    text = kernel_text(rows, cols, swizzle, elem=elem, ring=2, slot=1)
    _, got = lower_capturing(text, monkeypatch)
    calls = asm_calls(got["fn"], "cp.async.bulk.tensor.2d")
    n = tma.copies((rows, cols), bits, swizzle)
    _, box_cols = tma.box((rows, cols), bits, swizzle)
    assert len(calls) == n and n * box_cols == cols
    slot = 1024 + rows * cols * eb   # slot 1 of the ring at 1024
    y0, x0 = 40, 1000
    for tid, n_arg in [(0, 1), (0, 0), (5, 1)]:
        ev = Eval({"tid.x": tid}, {2: y0, 3: x0, 4: n_arg})
        for k, c in enumerate(calls):
            pred, dst, tmap, x, y, bar = c.args
            assert ev(pred) == int(tid == 0 and n_arg > 0)
            assert isinstance(tmap, ir.Argument) and tmap.name == "arg0" and tmap.type == ir.IntType(64)
            assert (ev(dst), ev(x), ev(y), ev(bar)) == (slot + k * rows * box_cols * eb, x0 + k * box_cols, y0, 8)
    ttgir_to_ptx(text)


@pytest.mark.parametrize("rows,cols,swizzle,elem,vec,trans", [
    (128, 64, 128, "f16", 8, False), (64, 128, 128, "f16", 8, False), (64, 128, 64, "f16", 4, False),
    (32, 64, 32, "f16", 2, False), (64, 128, 128, "f16", 16, False), (128, 64, 0, "f16", 8, False),
    (64, 64, 128, "f32", 4, False), (64, 128, 128, "i8", 16, False), (64, 128, 128, "f16", 8, True),
    (128, 64, 128, "f16", 4, True), (64, 64, 0, "f16", 8, True),
])
def test_local_load_reads_every_element_through_the_swizzle(rows, cols, swizzle, elem, vec, trans, monkeypatch,
                                                             tmp_path):
    """Every thread's every element of the blocked tensor comes from NvmmaShared.offset (row-major
    for swizzle 0) of the tile; through a transposed view (`ttg.memdesc_trans`: shape [C, R],
    transposed = true) element (i, j) is the tile's (j, i). Evaluated from the emitted LLVM IR
    for all threads; vector loads never cross a 16-byte chunk (each element checked)."""
    bits = {"f16": 16, "f32": 32, "i8": 8}[elem]
    eb = bits // 8
    text = kernel_text(rows, cols, swizzle, elem=elem, vec=vec, trans_view=trans)
    _, got = lower_capturing(text, monkeypatch)
    offs = shared_offsets(got, 4, eb, 1024)
    tile = NvmmaShared(swizzle, False, bits)
    view = NvmmaShared(swizzle, trans, bits)
    shape = (cols, rows) if trans else (rows, cols)
    for idx, off in offs.items():
        assert off == _model(view, idx, shape) * eb, idx
        assert off == _model(tile, idx[::-1] if trans else idx, (rows, cols)) * eb, idx
    widest = max(int(m) for m in re.findall(r"load <(\d+) x", llir.run({"ttgir": text.encode()}, {})["llir"].decode())
                 or ["1"])
    assert widest * 8 <= 128  # 16 bytes at most
    assert_ptxas_accepts(ttgir_to_ptx(text), tmp_path)


def test_local_load_vectorizes_16_bytes(tmp_path):
    """8 fp16 per thread along the contiguous dimension: one 16-byte ld.shared per chunk."""
    p = ttgir_to_ptx(kernel_text(128, 64, 128))
    assert len(re.findall(r"ld\.shared\.v4\.b32", p)) == 8 and "ld.shared.b16" not in p


def test_predicated_wait_and_several_waits_get_their_own_labels(tmp_path):
    """A wait with a predicate operand spins only where it holds; two waits in one function get
    distinct labels; ptxas accepts both."""
    text = kernel_text(64, 64, 128, wait_pred=True)
    wait = re.search(r'\n\s*"ttng.wait_barrier".*', text).group(0)
    text = text.replace(wait, wait + wait)
    p = ttgir_to_ptx(text)
    labels = re.findall(r"^\s*(ttb_wait_\w+):", p, re.M)
    assert len(labels) == 2 and len(set(labels)) == 2
    assert re.search(r"not\.pred ttb_ready, %p\d+;", p)
    assert re.search(r"@!ttb_ready mbarrier\.try_wait\.parity\.shared::cta\.b64 ttb_ready", p)
    assert_ptxas_accepts(p, tmp_path)


def test_constant_true_predicates_fold(tmp_path):
    """`pred = true`: the leader test alone guards the expect and the copy."""
    p = ttgir_to_ptx(kernel_text(128, 64, 128, pred="true"))
    lead = re.search(r"setp\.eq\.b32\s+(%p\d+), %r\d+, 0;", p).group(1)
    assert re.search(rf"@{lead} mbarrier\.arrive\.expect_tx", p)
    assert re.search(rf"@{lead} cp\.async\.bulk\.tensor", p)


def test_copy_errors():
    """A destination that is not the descriptor's block, and an nvmma tile narrower than its
    swizzle, are refused with clear errors."""
    text = kernel_text(128, 64, 128, load=False)
    bad = text.replace("x64xf16, #ttg.nvmma", "x32xf16, #ttg.nvmma").replace("128x64xf16>>", "128x64xf16>>")
    with pytest.raises(CompilationError, match="TMA copy of a 128x64 block"):
        emit.lower(bad)
    with pytest.raises(NotSupportedYet, match="32 elements of 16 bits wide with a 128-byte swizzle"):
        emit.lower(kernel_text(128, 32, 128))


def test_barrier_ring_and_nvmma_ring_allocation():
    """allocation.allocate places an Sx1xi64 barrier ring (8 bytes a barrier) and an nvmma ring
    at a 1024-byte multiple; neither overlaps the other."""
    from ttbuild.backend import mlir_util as mu
    from ttbuild.backend.analysis.allocation import allocate, buffer_bytes

    text = kernel_text(128, 64, 128, ring=3).replace(" {allocation.offset = 0 : i32}", "").replace(
        " {allocation.offset = 1024 : i32}", "")
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        mod = mu.parse_module(text, ctx, "ttgir")
        total = allocate(mod, 4)
        allocs = [op for op in mod.body.operations[0].regions[0].blocks[0].operations if op.name == "ttg.local_alloc"]
        placed = sorted((int(op.attributes["allocation.offset"].value), buffer_bytes(op), str(op.results[0].type))
                        for op in allocs)
    assert [(n, "xi64" in t) for _, n, t in placed] in ([(24, True), (49152, False)], [(49152, False), (24, True)])
    (o0, n0, _), (o1, n1, _) = placed
    assert o0 + n0 <= o1 and total >= o1 + n1
    assert all(o % 1024 == 0 for o, _, t in placed if "nvmma" in t)
    assert all(o % 8 == 0 for o, _, _ in placed)


def matmul_text(bm=128, bn=128, bk=64, warps=4) -> str:
    """One k step of the descriptor matmul Triton 3.6 compiles (/tmp/ref/tma in the brief): A
    [bm, bk] and B [bn, bk] (K contiguous) through TMA into 128-byte-swizzled tiles on one
    barrier, B viewed as [bk, bn] (`ttg.memdesc_trans`, transposed = true), one wgmma, the f32
    accumulator stored in its #mma layout."""
    nv = "#ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>"
    nvt = "#ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = true, elementBitWidth = 16}>"
    mma = (f"#ttg.nvidia_mma<{{versionMajor = 3, versionMinor = 0, warpsPerCTA = [{warps}, 1], "
           f"instrShape = [16, {bn}, 16]}}>")
    ta = f"!ttg.memdesc<{bm}x{bk}xf16, {nv}, #ttg.shared_memory, mutable>"
    tb = f"!ttg.memdesc<{bn}x{bk}xf16, {nv}, #ttg.shared_memory, mutable>"
    tbt = f"!ttg.memdesc<{bk}x{bn}xf16, {nvt}, #ttg.shared_memory, mutable>"
    da, db = f"!tt.tensordesc<tensor<{bm}x{bk}xf16>>", f"!tt.tensordesc<tensor<{bn}x{bk}xf16>>"
    acc = f"tensor<{bm}x{bn}xf32, #mma>"
    seg = "<{operandSegmentSizes = array<i32: 1, 2, 0, 1, 1, 1>}>"
    i32 = lambda s: f"tensor<{s}xi32, #mma>"  # noqa: E731
    bars = BARS.format(n=1)
    return f'''#mma = {mma}
#r = #ttg.slice<{{dim = 1, parent = {mma}}}>
#c = #ttg.slice<{{dim = 0, parent = {mma}}}>
"builtin.module"() ({{
  "tt.func"() <{{arg_attrs = [{{}}, {{}}, {{tt.divisibility = 16 : i32}}, {{}}, {{}}], function_type = ({da}, {db}, !tt.ptr<f32>, i32, i32) -> (), sym_name = "mm", sym_visibility = "public"}}> ({{
  ^bb0(%a_desc: {da}, %b_desc: {db}, %out: !tt.ptr<f32>, %m: i32, %n: i32):
    %c0 = "arith.constant"() <{{value = 0 : i32}}> : () -> i32
    %true = "arith.constant"() <{{value = true}}> : () -> i1
    %bars = "ttg.local_alloc"() {{allocation.offset = {bm * bk * 2 + bn * bk * 2} : i32}} : () -> {bars}
    %bar = "ttg.memdesc_index"(%bars, %c0) : ({bars}, i32) -> {BAR}
    "ttng.init_barrier"(%bar) <{{count = 1 : i32}}> : ({BAR}) -> ()
    %a = "ttg.local_alloc"() {{allocation.offset = 0 : i32}} : () -> {ta}
    %b = "ttg.local_alloc"() {{allocation.offset = {bm * bk * 2} : i32}} : () -> {tb}
    "ttng.barrier_expect"(%bar, %true) <{{size = {(bm + bn) * bk * 2} : i32}}> : ({BAR}, i1) -> ()
    "ttng.async_tma_copy_global_to_local"(%a_desc, %m, %c0, %bar, %a, %true) {seg} : ({da}, i32, i32, {BAR}, {ta}, i1) -> ()
    "ttng.async_tma_copy_global_to_local"(%b_desc, %n, %c0, %bar, %b, %true) {seg} : ({db}, i32, i32, {BAR}, {tb}, i1) -> ()
    "ttng.wait_barrier"(%bar, %c0) <{{operandSegmentSizes = array<i32: 1, 1, 0, 0>}}> : ({BAR}, i32) -> ()
    %bt = "ttg.memdesc_trans"(%b) <{{order = array<i32: 1, 0>}}> : ({tb}) -> {tbt}
    %zero = "arith.constant"() <{{value = dense<0.000000e+00> : {acc}}}> : () -> {acc}
    %d = "ttng.warp_group_dot"(%a, %bt, %zero) {{inputPrecision = 0 : i32, isAsync = true, maxNumImpreciseAcc = 0 : i32}} : ({ta}, {tbt}, {acc}) -> {acc}
    %w = "ttng.warp_group_dot_wait"(%d) {{pendings = 0 : i32}} : ({acc}) -> {acc}
    "ttng.inval_barrier"(%bar) : ({BAR}) -> ()
    %ri = "tt.make_range"() <{{end = {bm} : i32, start = 0 : i32}}> : () -> tensor<{bm}xi32, #r>
    %ci = "tt.make_range"() <{{end = {bn} : i32, start = 0 : i32}}> : () -> tensor<{bn}xi32, #c>
    %re = "tt.expand_dims"(%ri) <{{axis = 1 : i32}}> : (tensor<{bm}xi32, #r>) -> {i32(f"{bm}x1")}
    %ce = "tt.expand_dims"(%ci) <{{axis = 0 : i32}}> : (tensor<{bn}xi32, #c>) -> {i32(f"1x{bn}")}
    %pitch = "arith.constant"() <{{value = dense<{bn}> : {i32(f"{bm}x1")}}}> : () -> {i32(f"{bm}x1")}
    %rm = "arith.muli"(%re, %pitch) : ({i32(f"{bm}x1")}, {i32(f"{bm}x1")}) -> {i32(f"{bm}x1")}
    %rb = "tt.broadcast"(%rm) : ({i32(f"{bm}x1")}) -> {i32(f"{bm}x{bn}")}
    %cb = "tt.broadcast"(%ce) : ({i32(f"1x{bn}")}) -> {i32(f"{bm}x{bn}")}
    %off = "arith.addi"(%rb, %cb) : ({i32(f"{bm}x{bn}")}, {i32(f"{bm}x{bn}")}) -> {i32(f"{bm}x{bn}")}
    %base = "tt.splat"(%out) : (!tt.ptr<f32>) -> tensor<{bm}x{bn}x!tt.ptr<f32>, #mma>
    %ptrs = "tt.addptr"(%base, %off) : (tensor<{bm}x{bn}x!tt.ptr<f32>, #mma>, {i32(f"{bm}x{bn}")}) -> tensor<{bm}x{bn}x!tt.ptr<f32>, #mma>
    "tt.store"(%ptrs, %w) <{{boundaryCheck = array<i32>, cache = 1 : i32, evict = 1 : i32}}> : (tensor<{bm}x{bn}x!tt.ptr<f32>, #mma>, {acc}) -> ()
    "tt.return"() : () -> ()
  }}) : () -> ()
}}) {{"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = {warps} : i32, ttg.shared = {bm * bk * 2 + bn * bk * 2 + 16} : i32, ttg.target = "cuda:90", "ttg.threads-per-warp" = 32 : i32}} : () -> ()
'''


def test_descriptor_matmul_step_through_tma_and_wgmma(tmp_path):
    """A and B through TMA on one barrier (32768 bytes), B's transposed view straight into wgmma:
    both descriptors K-major with a 128-byte swizzle (Triton 3.6's constant 0x4000004000000000
    for both, imm-trans-b 0, as in its descriptor matmul), no CTA barrier between the wait and
    the wgmma (the mbarrier made the tiles visible), ptxas accepts it."""
    p = ttgir_to_ptx(matmul_text())
    assert p.count("cp.async.bulk.tensor.2d") == 2
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], 32768;", p)
    consts = {int(x) & (2 ** 64 - 1) for x in re.findall(r"or\.b64\s+%rd\d+, %rd\d+, (-?\d{12,});", p)}
    assert 0x4000004000000000 in consts and all(c >> 14 == 0x4000004000000000 >> 14 for c in consts)  # + k steps
    assert re.search(r"wgmma\.mma_async[^;]*\}, %rd\d+, %rd\d+, %p\d+, 1, 1, 0, 0;", p)
    between = p[p.index("mbarrier.try_wait"):p.index("wgmma.fence")]
    assert "bar.sync" not in between
    assert re.search(r"\.extern \.shared \.align 1024 \.b8 global_smem", p)
    assert_ptxas_accepts(p, tmp_path)


def dot_load_text(rows, cols, op_idx: int, trans_view: bool) -> str:
    """kernel_text's TMA tile (128-byte swizzle, fp16) read into `#ttg.dot_op` of an mma.sync
    layout (ldmatrix), through the transposed view when `trans_view`."""
    text = kernel_text(rows, cols, 128, load=False, trans_view=trans_view)
    shape = (cols, rows) if trans_view else (rows, cols)
    mma = "#ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 8]}>"
    res = f"tensor<{shape[0]}x{shape[1]}xf16, #ttg.dot_op<{{opIdx = {op_idx}, parent = {mma}, kWidth = 2}}>>"
    nv = f"#ttg.nvmma_shared<{{swizzlingByteWidth = 128, transposed = {str(trans_view).lower()}, elementBitWidth = 16}}>"
    src = "%view" if trans_view else "%buf"
    src_t = f"!ttg.memdesc<{shape[0]}x{shape[1]}xf16, {nv}, #ttg.shared_memory, mutable>"
    load = f'\n    %v = "ttg.local_load"({src}) : ({src_t}) -> {res}'
    return text.replace('\n    "ttng.inval_barrier"', load + '\n    "ttng.inval_barrier"')


@pytest.mark.parametrize("rows,cols,op_idx,trans", [(128, 64, 0, False), (64, 128, 0, False),
                                                   (128, 64, 1, True), (64, 128, 1, True)])
def test_ldmatrix_from_an_nvmma_tile(rows, cols, op_idx, trans, monkeypatch, tmp_path):
    """`ttg.local_load` of a TMA tile into `#ttg.dot_op` (llir.dot.local_load_dot): ldmatrix
    rows addressed base + immediate for shifts the swizzle leaves alone; evaluated for every
    thread, the same addresses as computing each row through NvmmaShared.offset (no shift
    treated as swizzle-invariant), also when the contiguous extent spans two swizzle blocks."""
    from ttbuild.backend.llir import dot

    text = dot_load_text(rows, cols, op_idx, trans)

    def addresses():
        _, got = lower_capturing(text, monkeypatch)
        calls = [i for blk in got["fn"].blocks for i in blk.instructions
                 if isinstance(i, ir.CallInstr) and getattr(i.callee, "name", "").startswith("llvm.nvvm.ldmatrix")]
        assert calls
        return [[Eval({"tid.x": tid}, {})(c.args[0]) for c in calls] for tid in range(128)]

    fast = addresses()
    monkeypatch.setattr(dot, "swizzle_periods", lambda sw, desc: dict.fromkeys(range(len(desc.shape)), 1 << 30))
    assert addresses() == fast
    assert_ptxas_accepts(ttgir_to_ptx(text), tmp_path)


def test_copy_operands_in_the_custom_forms_order_without_segment_sizes(monkeypatch):
    """`desc, coords, dst, bar, pred` without operandSegmentSizes (the custom form's order, as
    built by ttbuild's ttgir stage with Operation.create) lowers like Triton's generic order
    `desc, coords, bar, dst, pred`: the barrier is the 1 x i64 operand."""
    text = kernel_text(64, 128, 128, ring=2, slot=1)
    generic = re.search(r'"ttng.async_tma_copy_global_to_local"\(%desc, %y, %x, %bar, %buf, %p\) <\{[^}]*\}> : '
                        r'\((.*), (!ttg.memdesc<1xi64.*?>), (!ttg.memdesc<64x128.*?>), i1\) -> \(\)', text)
    assert generic
    desc_t, bar_t, tile_t = generic.groups()
    custom = (f'"ttng.async_tma_copy_global_to_local"(%desc, %y, %x, %buf, %bar, %p) : '
              f'({desc_t}, {tile_t}, {bar_t}, i1) -> ()')
    results = []
    for t in (text, text.replace(generic.group(0), custom)):
        _, got = lower_capturing(t, monkeypatch)
        ev = Eval({"tid.x": 0}, {2: 3, 3: 64, 4: 1})
        results.append([[ev(a) for a in c.args if not isinstance(a, ir.Argument)]
                        for c in asm_calls(got["fn"], "cp.async.bulk.tensor")])
    assert results[0] == results[1] and len(results[0]) == 2
    assert [r[1] for r in results[0]] == [1024 + 64 * 128 * 2, 1024 + 64 * 128 * 2 + 64 * 64 * 2]


def test_a_box_row_under_16_bytes_is_refused():
    """cuTensorMapEncodeTiled needs boxDim[0] * element size to be a multiple of 16 bytes."""
    with pytest.raises(NotSupportedYet, match="not a multiple of 16 bytes"):
        emit.lower(kernel_text(64, 4, 0, vec=4))
