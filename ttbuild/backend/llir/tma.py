"""LLIR rules for Hopper's TMA loads and their mbarriers, and the transposed memdesc view.

Ops: `ttng.init_barrier`, `ttng.inval_barrier`, `ttng.barrier_expect`,
`ttng.async_tma_copy_global_to_local`, `ttng.wait_barrier`, and `ttg.memdesc_trans` (the transposed
view a descriptor matmul's B operand takes).

As Triton 3.6 emits them on sm_90 (third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/BarrierOpToLLVM.cpp,
LoadStoreOpToLLVM.cpp; reference output in ../shared/TENSORCORE.md, "mbarrier + TMA"), inline asm:
- an mbarrier is an i64 in shared memory (a `!ttg.memdesc<1xi64, ...>`, usually a
  `ttg.memdesc_index` of an `Sx1xi64` ring), addressed by its 32-bit shared address;
- init / inval / expect / copy are done by one thread (tid.x == 0; Triton: thread 0, and an
  elect.sync lane of warp 0 for copies):
  `mbarrier.init.shared::cta.b64 [bar], count` then a CTA barrier, so every thread sees it
  initialised before it waits on it or arms it (PTX ISA 9.7.13.15.9); a CTA barrier, then
  `mbarrier.inval.shared::cta.b64` (its bytes may then be reused); a CTA barrier, then
  `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes` under the op's predicate (every
  thread is past its waits on the barrier's previous phase: a parity wait cannot tell a phase
  from the one two phases later);
- the copy: one `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
  [dst], [tmap, {x, y}], [bar]` per box (PTX ISA 9.7.9.25.5.1), x the coordinate along the
  contiguous (last) dimension, issued by one thread under the op's predicate. The block of the
  `!tt.tensordesc<tensor<RxCxT>>` operand is cut into ttbuild.tma.copies boxes of
  ttbuild.tma.box along C: box k loads columns c1 + k * box_cols.. into dst + k * R * box_cols
  elements, the k-th swizzle block of the `#ttg.nvmma_shared` tile (NvmmaShared: block after
  block along the contiguous dimension). The map operand is the descriptor parameter itself:
  ttbuild's ABI passes a tensordesc as an i64, the generic address of a CUtensorMap in global
  memory (ttbuild.tma), an `l` register here. Before the first copy of a group, a CTA barrier
  (every thread is done with the destination's previous contents: write after read across
  threads, as Triton's bar.sync before each copy) and `fence.proxy.async.shared::cta` (those
  generic-proxy accesses, and the mbarrier init, ordered before the async-proxy write; PTX ISA
  8.6, "Proxies");
- the wait: every thread spins on `mbarrier.try_wait.parity.shared::cta.b64` until the phase
  of the given parity completed; the TMA's writes are then visible to it (complete_tx), so the
  threads read the tile (ttg.local_load, wgmma) without a further barrier.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild import tma
from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes
from ttbuild.backend.ir.encodings import NvmmaShared
from ttbuild.backend.ir.ops import ATTR, TTG, TTNG
from ttbuild.backend.llir.context import I1, I32
from ttbuild.backend.llir.dot import check_nvmma, shared_layout
from ttbuild.backend.llir.smem import MemDesc, parse_memdesc
from ttbuild.errors import CompilationError, NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

COPY = ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[$1], [$2, {$3, $4}], [$5];")
_EXPECT = "mbarrier.arrive.expect_tx.shared::cta.b64"
_FENCE = "fence.proxy.async.shared::cta;"


def _addr(ctx, desc: MemDesc) -> ir.Value:
    """The 32-bit shared address of a view (an `r` register; shared-window addresses fit in 32
    bits, as Triton passes them)."""
    return ctx.builder.ptrtoint(desc.ptr, I32)


def leader(ctx) -> ir.Value:
    """i1: this thread is the one that inits, arms and issues: tid.x == 0 (in a warp-specialized
    partition its first thread: Ctx.sreg counts tid.x from there)."""
    return ctx.thread_is("==", 0, "tma_leader")


def _issued_by_leader(ctx, pred) -> ir.Value:
    """The predicate of a one-thread op: the leader, and the op's own predicate when it has one
    (a constant true one folds away)."""
    lead = leader(ctx)
    if pred is None or (isinstance(pred, ir.Constant) and pred.constant in (1, True)):
        return lead
    return ctx.builder.and_(lead, pred)


def _is_tma_issue(call) -> bool:
    """An asm call of this module that issues work for the async proxy or arms a barrier: no
    thread reads or writes shared memory with it, so it does not spoil a preceding barrier."""
    text = getattr(call.callee, "asm", "")
    return COPY in text or _EXPECT in text or text == _FENCE


def _fenced(insts) -> bool:
    """Whether the proxy fence comes after the last shared-memory access among `insts` (the
    block's instructions in order): TMA issues and arithmetic after it leave it in force."""
    for i in reversed(insts):
        if isinstance(i, ir.CallInstr) and getattr(i.callee, "asm", "") == _FENCE:
            return True
        if isinstance(i, (ir.LoadInstr, ir.StoreInstr)) or (isinstance(i, ir.CallInstr) and not _is_tma_issue(i)):
            return False
    return False


def _i1(ctx, pred) -> ir.Value:
    """An op's predicate operand as the i1 an asm `b` constraint takes."""
    return pred if pred.type == I1 else ctx.builder.trunc(pred, I1)


def _int_prop(op, name: str) -> int:
    attrs = op.operation.attributes
    return mu.int_attr(attrs[name] if name in attrs else mu.props(op)[name])


@rule(TTNG.ARRIVE_BARRIER)
def arrive_barrier(ctx, op, bar: MemDesc, pred=None):
    """`mbarrier.arrive.shared::cta.b64 _, [bar], count` (PTX ISA 9.7.13.15.13; release
    semantics at CTA scope: this thread's earlier accesses, its retired wgmma reads among them,
    happen before the phase completes), under the op's predicate: by thread 0 only (Triton 3.6's
    ArriveBarrierOp), or by every thread with the unit attribute `perThread` (Triton's later
    per-thread arrive; the barrier then counts threads)."""
    count = _int_prop(op, "count")
    text = "mbarrier.arrive.shared::cta.b64 _, [$1]" + (f", {count}" if count > 1 else "") + ";"
    if "perThread" in op.operation.attributes:
        p = ir.Constant(I1, 1) if pred is None else _i1(ctx, pred)
    else:
        p = _issued_by_leader(ctx, pred)
    ctx.asm_effect("@$0 " + text, "b,r", [p, _addr(ctx, bar)])


@rule(TTNG.INIT_BARRIER)
def init_barrier(ctx, op, bar: MemDesc):
    """One thread inits the mbarrier with its arrival count; a CTA barrier after it."""
    count = _int_prop(op, "count")
    ctx.before_smem_write()  # its bytes may have held something others read
    ctx.asm_effect(f"@$0 mbarrier.init.shared::cta.b64 [$1], {count};", "b,r", [leader(ctx), _addr(ctx, bar)])
    ctx.barrier()


@rule(TTNG.INVAL_BARRIER)
def inval_barrier(ctx, op, bar: MemDesc):
    """A CTA barrier (every thread is done waiting on it), then one thread invalidates it."""
    ctx.barrier_unless_fresh()
    ctx.asm_effect("@$0 mbarrier.inval.shared::cta.b64 [$1];", "b,r", [leader(ctx), _addr(ctx, bar)])
    ctx.after_smem_read()  # whoever writes these bytes next waits for a barrier


@rule(TTNG.BARRIER_EXPECT)
def barrier_expect(ctx, op, bar: MemDesc, pred=None):
    """One thread arrives on the barrier and raises its transaction count by the bytes the
    copies of this phase bring (under the op's predicate)."""
    size = _int_prop(op, "size")
    if ATTR.RELEASED not in op.operation.attributes:  # else every thread waited on the slot's empty barrier
        ctx.barrier_unless_fresh(ignore=_is_tma_issue)
    ctx.asm_effect(f"@$0 {_EXPECT} _, [$1], {size};", "b,r", [_issued_by_leader(ctx, pred), _addr(ctx, bar)])


def _copy_operands(op, vals):
    """(desc, coords, barrier, dst, pred, dst's operand index) of a
    ttng.async_tma_copy_global_to_local. Triton 3.6's generic operand order is desc, coord...,
    offsets... (im2col only), barrier, result, pred (operandSegmentSizes = [1, #coord,
    #offsets, 1, 1, 1]); without segment sizes the barrier is told from the destination by
    its type (one i64), so the custom form's dst-first order lowers too."""
    p = mu.props(op)
    if "operandSegmentSizes" in p:
        sizes = list(mu.ir.DenseI32ArrayAttr(p["operandSegmentSizes"]))
    else:
        sizes = [1, len(vals) - 4, 0, 1, 1, 1]
    if len(sizes) != 6 or sum(sizes) != len(vals):
        raise CompilationError(f"ttng.async_tma_copy_global_to_local with operand segments {sizes}", stage="llir")
    if sizes[2]:
        raise NotSupportedYet("ttng.async_tma_copy_global_to_local in im2col mode", None, "llir")
    n = sizes[1]
    bar, dst, at_dst = vals[1 + n], vals[2 + n], 2 + n
    if _is_barrier(dst) and not _is_barrier(bar):
        # the custom form's order (`%desc[...] %dst, %bar, %pred`) without segment sizes
        bar, dst, at_dst = dst, bar, 1 + n
    return vals[0], list(vals[1:1 + n]), bar, dst, vals[3 + n], at_dst


def _is_barrier(desc) -> bool:
    """Whether a lowered memdesc is one mbarrier (1 x i64)."""
    return isinstance(desc, MemDesc) and desc.elem == "i64" and tuple(desc.shape) == (1,)


@rule(TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL)
def async_tma_copy(ctx, op, *vals):
    """The descriptor's block into the nvmma tile, box by box (see the module docstring)."""
    b = ctx.builder
    tmap, coords, bar, dst, pred, at_dst = _copy_operands(op, vals)
    block, elem = mu.tensordesc_block(op.operands[0].type, "llir")
    dst_type = op.operands[at_dst].type
    if len(block) != 2 or len(coords) != 2:
        raise NotSupportedYet(f"TMA copy of a rank-{len(block)} block", None, "llir")
    if not isinstance(tmap.type, ir.IntType) or tmap.type.width != 64:
        raise CompilationError("the tensor descriptor of a TMA copy is not an i64 CUtensorMap address "
                               "(a tensordesc kernel parameter)", stage="llir")
    sw = shared_layout(dst_type)
    bits = mu.elem_bits(elem)
    if not isinstance(sw, NvmmaShared) or sw.elem_bits != bits:
        raise CompilationError(f"TMA copy into {dst_type}: the destination must be #ttg.nvmma_shared "
                               f"with elementBitWidth = {bits}", stage="llir")
    rows, cols = block
    if tuple(dst.shape) != ((cols, rows) if sw.transposed else (rows, cols)):
        raise CompilationError(f"TMA copy of a {rows}x{cols} block into {dst_type}", stage="llir")
    check_nvmma(sw, cols, bits)
    _, box_cols = tma.box(block, bits, sw.swizzle)
    n = tma.copies(block, bits, sw.swizzle)
    eb = elem_bytes(elem)
    if (box_cols * eb) % 16:  # cuTensorMapEncodeTiled: boxDim[0] * element size, a multiple of 16 bytes
        raise NotSupportedYet(f"a TMA box of {box_cols} x {bits}-bit elements along its contiguous dimension "
                              "(not a multiple of 16 bytes)", None, "llir")
    ctx.align_smem(1024)  # the swizzle is applied to absolute shared addresses
    tail = ctx.since_barrier(ignore=_is_tma_issue)
    if tail is None and ATTR.RELEASED not in op.operation.attributes:
        ctx.barrier()
        tail = []
    if not _fenced(tail if tail is not None else ctx.builder.block.instructions):
        ctx.asm_effect(_FENCE, "", [])
    p = _issued_by_leader(ctx, pred)
    base, barrier = _addr(ctx, dst), _addr(ctx, bar)
    y, x0 = coords
    for k in range(n):
        x = b.add(x0, ir.Constant(I32, k * box_cols)) if k else x0
        at = b.add(base, ir.Constant(I32, k * rows * box_cols * eb)) if k else base
        ctx.asm_effect("@$0 " + COPY, "b,r,l,r,r,r", [p, at, tmap, x, y, barrier])


STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$1, {$2, $3}], [$4];"
# cp.reduce.async.bulk.tensor's .redOp per TT_DescriptorReduceKindAttr value (PTX ISA 9.7.9.25.5.2;
# the element type, hence signed or unsigned min / max, is the tensor map's)
REDUCE_OPS = {1: "add", 2: "min", 3: "max", 4: "inc", 5: "dec", 6: "and", 7: "or", 8: "xor"}


@rule(TTNG.ASYNC_TMA_COPY_LOCAL_TO_GLOBAL)
def async_tma_store(ctx, op, tmap, *rest):
    """The nvmma tile to the descriptor's block at the coordinates, box by box, by the leader
    once every thread's writes of the tile are done (the fence before this op made them
    visible to the async proxy; then a CTA barrier), then one bulk async-group (PTX ISA
    cp.async.bulk.tensor, .global.shared::cta.bulk_group; out-of-bounds elements are not
    written)."""
    _bulk_store(ctx, op, tmap, rest, STORE)


@rule(TTNG.ASYNC_TMA_REDUCE)
def async_tma_reduce(ctx, op, tmap, *rest):
    """As a TMA store, each element reduced into memory by the op's `kind` instead of written
    (`cp.reduce.async.bulk.tensor.2d.global.shared::cta.<op>.bulk_group`, PTX ISA 9.7.9.25.5.2:
    atomic per element, out-of-bounds elements skipped)."""
    kind = _int_prop(op, "kind")
    if kind not in REDUCE_OPS:
        raise CompilationError(f"TMA reduction of unknown kind {kind}", stage="llir")
    text = f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{REDUCE_OPS[kind]}.bulk_group [$1, {{$2, $3}}], [$4];"
    _bulk_store(ctx, op, tmap, rest, text)


def _bulk_store(ctx, op, tmap, rest, text: str) -> None:
    """The leader's bulk async copies `text` (operands: map, x, y, shared address) of the
    source tile, box by box, then one commit."""
    b = ctx.builder
    coords, src = list(rest[:-1]), rest[-1]
    block, elem = mu.tensordesc_block(op.operands[0].type, "llir")
    src_type = op.operands[len(op.operands) - 1].type
    if len(block) != 2 or len(coords) != 2:
        raise NotSupportedYet(f"TMA store of a rank-{len(block)} block", None, "llir")
    sw = shared_layout(src_type)
    bits = mu.elem_bits(elem)
    rows, cols = block
    if not isinstance(sw, NvmmaShared) or sw.elem_bits != bits or sw.transposed or tuple(src.shape) != (rows, cols):
        raise CompilationError(f"TMA store of a {rows}x{cols} block from {src_type}: the source must be "
                               f"#ttg.nvmma_shared, not transposed, with elementBitWidth = {bits}", stage="llir")
    check_nvmma(sw, cols, bits)
    _, box_cols = tma.box(block, bits, sw.swizzle)
    eb = elem_bytes(elem)
    ctx.align_smem(1024)
    ctx.barrier()
    p = leader(ctx)
    base = _addr(ctx, src)
    y, x0 = coords
    for k in range(tma.copies(block, bits, sw.swizzle)):
        x = b.add(x0, ir.Constant(I32, k * box_cols)) if k else x0
        at = b.add(base, ir.Constant(I32, k * rows * box_cols * eb)) if k else base
        ctx.asm_effect("@$0 " + text, "b,l,r,r,r", [p, tmap, x, y, at])
    ctx.asm_effect("cp.async.bulk.commit_group;", "", [])


@rule(TTNG.ASYNC_TMA_STORE_WAIT)
def async_tma_store_wait(ctx, op):
    """Until at most `pendings` bulk groups still read their shared tiles
    (`cp.async.bulk.wait_group.read`), then a CTA barrier: the tile's bytes may be written again."""
    ctx.asm_effect(f"cp.async.bulk.wait_group.read {_int_prop(op, 'pendings')};", "", [])
    ctx.barrier()


@rule(TTNG.WAIT_BARRIER)
def wait_barrier(ctx, op, bar: MemDesc, phase, *rest):
    """Every thread spins until the barrier's phase of parity `phase` completed; with a
    predicate operand, only the threads where it holds. Labels sit in a `{ }` scope and carry
    the asm's unique id (`${:uid}`), so copies of this asm (unrolling) never clash."""
    p = mu.props(op)
    sizes = list(mu.ir.DenseI32ArrayAttr(p["operandSegmentSizes"])) if "operandSegmentSizes" in p else [1, 1, 0, 0]
    pred = rest[0] if len(sizes) > 2 and sizes[2] else None
    if pred is not None and isinstance(pred, ir.Constant) and pred.constant in (1, True):
        pred = None
    args = [_addr(ctx, bar), phase]
    if pred is None:
        text = ("{\n\t.reg .pred ttb_ready;\n\tttb_wait_${:uid}:\n"
                "\tmbarrier.try_wait.parity.shared::cta.b64 ttb_ready, [$0], $1;\n"
                "\t@!ttb_ready bra.uni ttb_wait_${:uid};\n}")
        ctx.asm_effect(text, "r,r", args)
        return
    # threads without the predicate start out "ready" and never wait
    text = ("{\n\t.reg .pred ttb_ready;\n\tnot.pred ttb_ready, $2;\n\tttb_wait_${:uid}:\n"
            "\t@!ttb_ready mbarrier.try_wait.parity.shared::cta.b64 ttb_ready, [$0], $1;\n"
            "\t@!ttb_ready bra ttb_wait_${:uid};\n}")
    ctx.asm_effect(text, "r,r,b", args + [_i1(ctx, pred)])


@rule(TTG.MEMDESC_TRANS)
def memdesc_trans(ctx, op, desc: MemDesc):
    """A transposed view of the same bytes: the result type's shape and order (an nvmma tile
    with `transposed` flipped), the same pointer."""
    shape, elem, order = parse_memdesc(op.results[0].type)
    return MemDesc(desc.ptr, shape, elem, order)

