"""LLIR rules for the pipeliner's ops: shared-memory buffers and cp.async.

Buffers: `ttg.local_alloc`, `ttg.memdesc_index`, `ttg.local_load`, `ttg.local_dealloc`; cp.async:
`ttg.async_copy_global_to_local`, `ttg.async_commit_group`, `ttg.async_wait`.

A buffer lives in the kernel's dynamic shared memory at the `allocation.offset` the ttgir stage
wrote (ttbuild.backend.analysis.allocation.allocate); slots are row-major with the shared encoding's `order`
fastest-first (`#ttg.swizzled_shared` with vec = perPhase = maxPhase = 1: no swizzle), except
the slots of a dot-operand ring, laid out by their XOR swizzle (llir.dot.swizzled_offset), and
`#ttg.nvmma_shared` tiles (TMA destinations, wgmma operands), always read and written through
their swizzle (NvmmaShared; row-major for swizzle 0). A memdesc
lowers to a Python `MemDesc` (a shared pointer plus its shape), never to an SSA value that
crosses a loop: the pipeliner carries slot indices, and tokens lower to a dummy i32.

Copies follow PTX ISA 9.7.9.25.3.1 (cp.async): per thread and per contiguous chunk of its
blocked layout, `cp.async.cg.shared.global` for 16 bytes (L2 only, as Triton) and `.ca` for 4
or 8, with src-size 0 when the chunk's mask bit is false, so the slot is zero-filled (Triton's
lowering relies on the same). Chunks narrower than 4 bytes cannot be cp.async'd; the pipeliner
never creates them, but should axis info differ here they fall back to a synchronous predicated
load and a shared store (correct, only not asynchronous).
"""

from __future__ import annotations

from math import gcd, prod

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, feeds_dot
from ttbuild.backend.analysis.axis import vector_elems
from ttbuild.backend.ir.encodings import NvmmaShared
from ttbuild.backend.ir.ops import TTG
from ttbuild.backend.llir import dot  # tensor-core operand tiles: register-sourced allocs, dot_op loads, the swizzle
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.memory import load_words  # the predicated scalar load
from ttbuild.backend.llir.smem import MemDesc, parse_memdesc
from ttbuild.errors import CompilationError, NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

def _strides(shape, order) -> list[int]:
    """Row-major strides (elements) of a tile whose dimensions order[0], order[1], ... are
    fastest to slowest."""
    st, acc = [0] * len(shape), 1
    for d in order:
        st[d] = acc
        acc *= shape[d]
    return st


def _elem_addr(ctx, desc: MemDesc, index):
    """Shared pointer of the element at `index` (one i32 per dimension) of a tile view."""
    b = ctx.builder
    st = _strides(desc.shape, desc.order)
    off = None
    for v, s in zip(index, st):
        t = b.mul(v, ir.Constant(I32, s)) if s != 1 else v
        off = t if off is None else b.add(off, t)
    nbytes = b.mul(off, ir.Constant(I32, elem_bytes(desc.elem)))
    return b.gep(desc.ptr, [nbytes])


def _shared_i32(ctx, p):
    """A shared pointer as the 32-bit address cp.async takes in an `r` register (shared-window
    addresses fit in 32 bits; Triton passes them the same way)."""
    return ctx.builder.ptrtoint(p, I32)


def _vec(layout, shape, cap_elems: int) -> int:
    o0 = layout.order[0]
    v = min(layout.size_per_thread[o0], shape[o0], cap_elems)
    return 1 << (v.bit_length() - 1)


def _asm(ctx, text: str, cons: str, args, ret=None):
    ftype = ir.FunctionType(ret or ir.VoidType(), [a.type for a in args])
    return ctx.builder.asm(ftype, text, cons, args, side_effect=True)


def _shares_elements(ctx, layout, shape) -> bool:
    return ctx.owned(layout, shape) is not None


@rule(TTG.LOCAL_ALLOC)
def local_alloc(ctx, op, src=None):
    """A buffer at its `allocation.offset`; with a register operand (accelerate_matmul's dot
    operand tiles) the tile is stored through its XOR swizzle (llir.dot.local_alloc_from)."""
    attrs = op.operation.attributes  # discardable attributes (mu.props reads properties)
    if "allocation.offset" not in attrs:
        raise CompilationError("ttg.local_alloc without allocation.offset (run analysis.allocation.allocate)", stage="llir")
    shape, elem, order = parse_memdesc(op.results[0].type)
    desc = MemDesc(ctx.smem(mu.int_attr(attrs["allocation.offset"])), shape, elem, order)
    return desc if src is None else dot.local_alloc_from(ctx, op, src, desc)


@rule(TTG.LOCAL_STORE)
def local_store(ctx, op, src, desc: MemDesc):
    """`ttg.local_store %t, %buf`: the register tensor into an allocated tile (llir.dot.write_tile,
    with both barriers: the buffer is reused across loop iterations, tma_lowering's deferred stores)."""
    dot.write_tile(ctx, desc, dot.shared_layout(op.operands[1].type), src)
    return None


@rule(TTG.MEMDESC_INDEX)
def memdesc_index(ctx, op, desc: MemDesc, idx):
    """Slot `idx` of the leading dimension: the pointer moves by idx * slot bytes."""
    b = ctx.builder
    slot = prod(desc.shape[1:]) * elem_bytes(desc.elem)
    return MemDesc(b.gep(desc.ptr, [b.mul(idx, ir.Constant(I32, slot))]), desc.shape[1:], desc.elem, desc.order)


@rule(TTG.MEMDESC_SUBSLICE)
def memdesc_subslice(ctx, op, desc: MemDesc):
    """The sub-tile at the static `offsets` of an `#ttg.nvmma_shared` tile that is itself one:
    whole swizzle blocks along the contiguous dimension, every row (the pointer moves by
    NvmmaShared.offset of its first element). Other sub-tiles are not lowered."""
    offsets = tuple(int(x) for x in mu.props(op)["offsets"])
    shape = parse_memdesc(op.results[0].type)[0]
    sw = dot.shared_layout(op.operands[0].type)
    c, r = getattr(sw, "order", (None, None))
    if not (isinstance(sw, NvmmaShared) and sw.swizzle and len(shape) == 2 and offsets[r] == 0
            and shape[r] == desc.shape[r] and offsets[c] % sw.block_elems == 0 and shape[c] % sw.block_elems == 0):
        raise NotSupportedYet(f"ttg.memdesc_subslice {list(offsets)} of {op.operands[0].type}", None, "llir")
    at = sw.offset(offsets, desc.shape) * elem_bytes(desc.elem)
    return MemDesc(ctx.builder.gep(desc.ptr, [ir.Constant(I32, at)]), tuple(shape), desc.elem, desc.order)


@rule(TTG.LOCAL_DEALLOC)
def local_dealloc(ctx, op, desc):
    """`ttg.local_dealloc`: nothing to emit, buffer offsets are static (analysis.allocation)."""
    return None  # offsets are static: nothing to free


@rule(TTG.ASYNC_COMMIT_GROUP)
def async_commit_group(ctx, op, *tokens):
    _asm(ctx, "cp.async.commit_group;", "~{memory}", [])
    return ir.Constant(I32, 0)


@rule(TTG.ASYNC_WAIT)
def async_wait(ctx, op, *tokens):
    """`cp.async.wait_group N`: all but the N most recent groups of this thread are complete and
    their writes visible to this thread (PTX ISA 9.7.9.25.3.3)."""
    attrs = op.operation.attributes
    num = mu.int_attr(attrs["num"] if "num" in attrs else mu.props(op)["num"])
    _asm(ctx, f"cp.async.wait_group {num};", "~{memory}", [])
    ctx.smem_landed()
    if num == 0:
        # Dot-operand rings may share bytes with scratch used after the loop: the next scratch
        # write must wait until every thread's copies have landed (a bar.sync after this wait).
        ctx.after_smem_read()
    return ir.Constant(I32, 0)


_NVMMA = "#ttg.nvmma_shared<"


def _dot_ring(view) -> bool:
    """Whether the slot `view` (a ttg.memdesc_index of a ring) belongs to a ring whose slots a dot
    reads (allocation.feeds_dot): threads then read elements other threads copied."""
    if not isinstance(view, mu.ir.OpResult) or view.owner.name != TTG.MEMDESC_INDEX:
        return False
    ring = view.owner.operands[0]
    return isinstance(ring, mu.ir.OpResult) and feeds_dot(ring.owner)


def _swizzle(view):
    """The `#ttg.swizzled_shared` encoding of a dot-operand ring's slot (its reader's layout),
    or the `#ttg.nvmma_shared` one of any slot (ttg.local_load reads those through their
    swizzle too), else None (row-major slots, read back by the threads that copied them)."""
    if _NVMMA not in str(view.type) and not _dot_ring(view):
        return None
    return dot.shared_layout(view.type)  # the one home of the swizzle


def _slot_addr(ctx, desc: MemDesc, sw, index):
    """Shared pointer of the element at `index` of a slot: row-major, or through the XOR
    swizzle the slot's reader (ldmatrix) uses."""
    if sw is None:
        return _elem_addr(ctx, desc, index)
    b = ctx.builder
    return b.gep(desc.ptr, [b.mul(dot.swizzled_offset(b, sw, desc, index), ir.Constant(I32, elem_bytes(desc.elem)))])


@rule(TTG.ASYNC_COPY_GLOBAL_TO_LOCAL)
def async_copy(ctx, op, ptr: TensorVal, desc: MemDesc, mask=None, other=None):
    """Each thread copies its own elements of the tile, chunk by chunk, into the slot at the
    same places `ttg.local_load` reads them back from (so, without shared elements, no thread
    ever touches another's bytes). Into a swizzled slot (a tensor-core operand ring) the chunks
    go where the swizzle puts them (at most `vec` elements, which stay contiguous), and since
    ldmatrix reads other threads' elements, the slot's last reads must be over first
    (bar.sync when shared memory was read since the last one)."""
    b = ctx.builder
    layout, shape = ptr.layout, ptr.shape
    elem = desc.elem
    eb = elem_bytes(elem)
    o0 = layout.order[0]
    sw = _swizzle(op.operands[1])
    cap = vector_elems(op.operands[0], ctx.axis, o0)
    if mask is not None:
        cap = gcd(cap, ctx.axis.info(op.operands[2]).constancy[o0])
    if sw is not None:
        cap = gcd(cap, sw.vec) if o0 == desc.order[0] else 1
    vec = _vec(layout, shape, min(cap, 16 // eb))
    if _shares_elements(ctx, layout, shape):
        # Threads holding the same element write the same bytes; another thread may still be
        # reading this slot's previous contents (write-after-read across threads).
        ctx.barrier()
    elif sw is not None:
        ctx.before_smem_write()
    n = len(ptr.elems)
    nbytes = vec * eb
    if nbytes < 4:
        _sync_copy(ctx, ptr, desc, mask, ctx.indices(layout, shape), elem, sw)
        return ir.Constant(I32, 0)
    kind = "cg" if nbytes == 16 else "ca"
    text = f"cp.async.{kind}.shared.global [ $0 + 0 ], [ $1 + 0 ], {nbytes}, $2;"
    starts = range(0, n, vec)
    if sw is not None:
        dsts = dot.tile_addresses(ctx, desc, sw, layout, shape, starts)
    else:
        idx = ctx.indices(layout, shape)
        dsts = [_slot_addr(ctx, desc, sw, idx[j]) for j in starts]
    for j, dst_p in zip(starts, dsts):
        dst = _shared_i32(ctx, dst_p)
        size = ir.Constant(I32, nbytes)
        if mask is not None:
            size = b.select(mask.elems[j], size, ir.Constant(I32, 0))
        _asm(ctx, text, "r,l,r,~{memory}", [dst, ptr.elems[j], size])
    return ir.Constant(I32, 0)


def _sync_copy(ctx, ptr, desc, mask, idx, elem, sw=None):
    b = ctx.builder
    ety = llvm_type(elem)
    bits = mu.elem_bits(elem)
    for j, p in enumerate(ptr.elems):
        pred = None if mask is None else mask.elems[j]
        v = load_words(ctx, p, pred, ety, bits, 1, None, [j])[0]
        b.store(v, b.bitcast(_slot_addr(ctx, desc, sw, idx[j]), ir.PointerType(ety, addrspace=3)))


@rule(TTG.LOCAL_LOAD)
def local_load(ctx, op, desc: MemDesc, token=None):
    """Into `#ttg.dot_op`: ldmatrix fragments (llir.dot.local_load_dot). Otherwise the thread's elements of the result layout from the view, `vec` at a time (vector
    ld.shared up to 16 bytes). cp.async.wait_group has made this thread's own copies visible
    to it (PTX ISA 9.7.9.25.3.3), so when no element is shared between threads (each thread
    reads back exactly what it wrote, same mapping as the copy) no bar.sync is needed; Triton's
    generic membar analysis puts one in regardless. With shared elements a thread may read
    bytes another thread's copy wrote: then all threads must have waited first (bar.sync)."""
    if mu.encoding_str(op.results[0].type).startswith("#ttg.dot_op<"):
        return dot.local_load_dot(ctx, op, desc, token)
    if _NVMMA in str(op.operands[0].type):
        return _local_load_nvmma(ctx, op, desc)
    b = ctx.builder
    res = op.results[0]
    layout = layout_of(res)
    shape = tuple(mu.shape_of(res.type))
    ety = llvm_type(desc.elem)
    eb = elem_bytes(desc.elem)
    vec = _vec(layout, shape, 16 // eb)
    if _shares_elements(ctx, layout, shape):
        ctx.barrier()
    idx = ctx.indices(layout, shape)
    out = []
    for j in range(0, len(idx), vec):
        p = _elem_addr(ctx, desc, idx[j])
        if vec == 1:
            v = b.load(b.bitcast(p, ir.PointerType(ety, addrspace=3)), align=eb)
            out.append(v)
            continue
        vt = ir.VectorType(ety, vec)
        v = b.load(b.bitcast(p, ir.PointerType(vt, addrspace=3)), align=vec * eb)
        out += [b.extract_element(v, ir.Constant(I32, k)) for k in range(vec)]
    return TensorVal(out, layout, shape)


def _local_load_nvmma(ctx, op, desc: MemDesc) -> TensorVal:
    """`ttg.local_load` of an nvmma tile (a TMA destination) into a blocked layout: each
    element from where the swizzle put it (llir.dot.tile_addresses, NvmmaShared.offset; row-major
    for swizzle 0), as vectors of up to 16 bytes that stay within one 16-byte chunk, which the
    swizzle moves whole. The tile was written by other agents (TMA, other threads): reading it
    counts as a shared read, so the next write into it waits for a barrier."""
    b = ctx.builder
    res = op.results[0]
    layout = layout_of(res)
    shape = tuple(mu.shape_of(res.type))
    sw = dot.shared_layout(op.operands[0].type)
    bits = mu.elem_bits(desc.elem)
    if len(shape) != 2:
        raise CompilationError(f"ttg.local_load of a rank-{len(shape)} nvmma_shared view", stage="llir")
    dot.check_nvmma(sw, shape[sw.order[0]], bits)
    ety = llvm_type(desc.elem)
    eb = elem_bytes(desc.elem)
    o0 = getattr(layout, "order", (None,))[0]
    # a chunk of 16 bytes (an unswizzled tile: a row) holds neighbours along the contiguous dimension
    vec = _vec(layout, shape, 16 // eb) if o0 == sw.order[0] else 1
    if _shares_elements(ctx, layout, shape):
        ctx.barrier()
    n = len(layout.local_offsets(shape)) if hasattr(layout, "local_offsets") else len(ctx.indices(layout, shape))
    starts = range(0, n, vec)
    out = []
    for p in dot.tile_addresses(ctx, desc, sw, layout, shape, starts):
        if vec == 1:
            out.append(b.load(b.bitcast(p, ir.PointerType(ety, addrspace=3)), align=eb))
            continue
        vt = ir.VectorType(ety, vec)
        v = b.load(b.bitcast(p, ir.PointerType(vt, addrspace=3)), align=vec * eb)
        out += [b.extract_element(v, ir.Constant(I32, k)) for k in range(vec)]
    ctx.after_smem_read()
    return TensorVal(out, layout, shape)
