"""LLIR rules for tensor cores: register tiles to shared memory, ldmatrix into `#ttg.dot_op`, and `tt.dot` as mma.sync.

Ops: `ttg.local_alloc` of a register tensor into `#ttg.swizzled_shared` memory, `ttg.local_load`
into `#ttg.dot_op` (ldmatrix), and `tt.dot` on `#ttg.nvidia_mma` as mma.sync.

Shared tiles: element `index` lives at `SwizzledShared.offset(index, shape)` (groups of `vec`
elements along the fastest dimension XORed with (row / perPhase) % maxPhase), the layout
Triton's ldmatrix lowering reads without bank conflicts.
- local_alloc(src): bar.sync (earlier readers of the buffer, e.g. the previous loop iteration,
  are done), every thread stores its elements (vectors of up to `vec` elements, 16 bytes),
  bar.sync (the tile is complete before any warp reads it).
- local_load -> dot_op: `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` (PTX ISA 9.7.14.5.15)
  for 16-bit operands whose tile covers whole 8x8 matrices; `.trans` when the operand is stored
  with M (A) or N (B) fastest. Otherwise one ld.shared per register (kWidth elements along K
  when K is the fastest dimension, else one element at a time).
- tt.dot: `mma.sync.aligned.m16n8k{8,16,32}.row.col` (PTX ISA 9.7.14.5.14) per (m tile, n tile,
  k step), k steps outermost, operand registers packed from the dot_op fragments
  (ttbuild.backend.ir.distributed documents the lane -> element maps), accumulators tied in/out.
"""

from __future__ import annotations

from dataclasses import replace
from math import gcd

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes
from ttbuild.backend.ir.encodings import DotOperand, NvidiaMma, NvmmaShared, SwizzledShared
from ttbuild.backend.ir.ops import ARITH, TT, TTG
from ttbuild.backend.ir.types import MemDescType
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.fma import fma_dot
from ttbuild.backend.llir.mma_index import warp_origin
from ttbuild.backend.llir.smem import MemDesc
from ttbuild.errors import CompilationError, NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule



def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _log2(n: int) -> int:
    return n.bit_length() - 1


def shared_layout(memdesc_type) -> SwizzledShared | NvmmaShared:
    """The `#ttg.swizzled_shared` or `#ttg.nvmma_shared` encoding of a memdesc type."""
    try:
        return MemDescType.parse(memdesc_type).layout()
    except ValueError:
        raise CompilationError(f"unsupported shared encoding in {memdesc_type}", stage="llir") from None


def full_order(desc: MemDesc) -> tuple[int, ...]:
    """The view's dimension order fastest-first: its encoding's order, then any leading
    dimensions (whole tiles, slowest)."""
    lead = len(desc.shape) - len(desc.order)
    order = tuple(o + lead for o in desc.order) if lead > 0 and max(desc.order) < len(desc.order) else desc.order
    return tuple(order) + tuple(d for d in reversed(range(len(desc.shape))) if d not in order)


def unswizzled(sw):
    """An nvmma tile with `swizzlingByteWidth = 0` as what it is, a row-major tile with its
    contiguous dimension fastest (the layout an unswizzled TMA box is written in; Triton's
    nvmmaSharedToLinearLayout, swizzle 0): the SwizzledShared without swizzle. Other
    encodings are returned as they are."""
    if isinstance(sw, NvmmaShared) and sw.swizzle == 0:
        return SwizzledShared(1, 1, 1, sw.order)
    return sw


def check_nvmma(sw, contiguous: int, bits: int) -> None:
    """A swizzled nvmma tile must span at least one swizzle width along its contiguous
    dimension: narrower rows are neither NvmmaShared's layout nor one wgmma or TMA writes
    (Triton's getTMABlockShape rejects them). Raises NotSupportedYet."""
    if isinstance(sw, NvmmaShared) and sw.swizzle and contiguous * bits < 8 * sw.swizzle:
        raise NotSupportedYet(f"an nvmma_shared tile {contiguous} elements of {bits} bits wide with a "
                              f"{sw.swizzle}-byte swizzle", None, "llir")


def _nvmma_offset(b, sw: NvmmaShared, desc: MemDesc, index) -> ir.Value:
    """LLIR of NvmmaShared.offset (rank 2): its block's offset plus the swizzled offset within
    the block (sw.in_block())."""
    c, r = sw.order
    e = sw.block_elems
    if desc.shape[c] <= e:
        return swizzled_offset(b, sw.in_block(), desc, index)
    inner, block_shape = list(index), list(desc.shape)
    inner[c], block_shape[c] = b.and_(index[c], _c(e - 1)), e
    off = swizzled_offset(b, sw.in_block(), replace(desc, shape=tuple(block_shape)), inner)
    return b.add(off, b.mul(b.lshr(index[c], _c(_log2(e))), _c(desc.shape[r] * e)))


def swizzled_offset(b, sw: SwizzledShared | NvmmaShared, desc: MemDesc, index) -> ir.Value:
    """LLIR of SwizzledShared.offset / NvmmaShared.offset: the element offset (i32) of `index`
    (one i32 per dimension)."""
    sw = unswizzled(sw)
    if isinstance(sw, NvmmaShared):
        return _nvmma_offset(b, sw, desc, index)
    order = full_order(desc)
    o0 = order[0]
    col = index[o0]
    if len(order) > 1 and sw.max_phase > 1:
        row = index[order[1]]
        ph = b.lshr(row, _c(_log2(sw.per_phase))) if sw.per_phase > 1 else row
        ph = b.and_(ph, _c(sw.max_phase - 1))
        col = b.xor(col, b.shl(ph, _c(_log2(sw.vec))) if sw.vec > 1 else ph)
    off, stride = col, desc.shape[o0]
    for d in order[1:]:
        off = b.add(off, b.mul(index[d], _c(stride)))
        stride *= desc.shape[d]
    return off


def swizzle_periods(sw: SwizzledShared, desc: MemDesc) -> dict[int, int]:
    """Per dimension, the shifts (multiples of this many elements) that leave an element's XOR
    swizzle unchanged and so move its offset by shift * stride: vec * maxPhase along the fastest
    dimension, perPhase * maxPhase along the next, 1 along the others (whole tiles)."""
    order = full_order(desc)
    sw = unswizzled(sw)
    if isinstance(sw, NvmmaShared):  # a whole block along the contiguous dimension, 8 rows
        return {sw.order[0]: sw.block_elems, sw.order[1]: 8}
    out = {d: 1 for d in order}
    if sw.max_phase > 1:
        out[order[0]] = sw.vec * sw.max_phase
        if len(order) > 1:
            out[order[1]] = sw.per_phase * sw.max_phase
    return out


def element_strides(desc: MemDesc, sw=None) -> dict[int, int]:
    """Per dimension, the element stride of the view's slots (fastest dimension 1); for an
    nvmma tile, per element of a shift by whole periods (swizzle_periods): a block along the
    contiguous dimension moves by rows x block, so a shift of `block` elements by that much."""
    if isinstance(unswizzled(sw), NvmmaShared):
        c, r = sw.order
        return {c: desc.shape[r], r: sw.block_elems}
    strides, stride = {}, 1
    for d in full_order(desc):
        strides[d] = stride
        stride *= desc.shape[d]
    return strides


def tile_addresses(ctx, desc: MemDesc, sw: SwizzledShared, layout, shape, js) -> list:
    """Shared pointers (i8 addrspace(3)*) of this thread's elements `js` (positions in
    `layout.local_offsets(shape)`) in the swizzled view: elements whose offsets from the thread
    base differ by swizzle-invariant shifts (swizzle_periods) share one address register and
    differ by an immediate, as Triton addresses its repetitions. Layouts that wrap (tile larger
    than the shape) or slices take the per-element path."""
    rank = len(shape)
    if not hasattr(layout, "local_offsets") or not hasattr(layout, "tile") or getattr(layout, "dim", None) is not None \
            or any(layout.tile(d) > shape[d] for d in range(rank)):
        idx = ctx.indices(layout, shape)
        return [_addr(ctx, desc, sw, idx[j]) for j in js]
    b = ctx.builder
    offs = layout.local_offsets(shape)
    base = ctx.thread_base(layout)
    periods, strides = swizzle_periods(sw, desc), element_strides(desc, sw)
    eb = elem_bytes(desc.elem)
    classes: dict = {}
    out = []
    for j in js:
        off = offs[j]
        res = tuple(off[d] % periods[d] for d in range(rank))
        const = sum((off[d] - res[d]) * strides[d] for d in range(rank))
        if res not in classes:
            index = [b.add(base[d], _c(res[d])) if res[d] else base[d] for d in range(rank)]
            classes[res] = _addr(ctx, desc, sw, index)
        p = classes[res]
        out.append(b.gep(p, [_c(const * eb)]) if const else p)
    return out


def _addr(ctx, desc: MemDesc, sw, index, ptype=None):
    b = ctx.builder
    p = b.gep(desc.ptr, [b.mul(swizzled_offset(b, sw, desc, index), _c(elem_bytes(desc.elem)))])
    return b.bitcast(p, ir.PointerType(ptype, addrspace=3)) if ptype is not None else p


def _vector_store(b, ptr_i8, vals, eb):
    ety = vals[0].type
    if len(vals) == 1:
        b.store(vals[0], b.bitcast(ptr_i8, ir.PointerType(ety, addrspace=3)), align=eb)
        return
    vt = ir.VectorType(ety, len(vals))
    v = ir.Constant(vt, None)
    for i, e in enumerate(vals):
        v = b.insert_element(v, e, _c(i))
    b.store(v, b.bitcast(ptr_i8, ir.PointerType(vt, addrspace=3)), align=eb * len(vals))


def local_alloc_from(ctx, op, src: TensorVal, desc: MemDesc) -> MemDesc:
    """`ttg.local_alloc %t`: the register tensor into its fresh swizzled tile `desc` (see module
    doc); the barriers are shared with neighbouring allocs of registers."""
    prev, nxt = _neighbour_allocs(op)
    return write_tile(ctx, desc, shared_layout(op.results[0].type), src, before=prev is None, after=nxt is None)


def write_tile(ctx, desc: MemDesc, sw, src: TensorVal, before: bool = True, after: bool = True) -> MemDesc:
    """Every thread stores its elements of `src` into the tile `desc` of shared layout `sw`
    (vectors of up to 16 bytes along the fastest dimension, no wider than a swizzle group),
    with a bar.sync before (`before`: earlier readers are done) and after (`after`: the tile is
    complete before any warp reads it)."""
    b = ctx.builder
    shape = desc.shape
    eb = elem_bytes(desc.elem)
    lay = src.layout
    o0 = lay.order[0]
    chunk = 1
    if o0 == full_order(desc)[0]:
        run = min(lay.size_per_thread[o0], shape[o0])
        chunk = gcd(gcd(run, max(1, 16 // eb)), sw.vec if sw.max_phase > 1 else run)
    vals = src.elems
    if vals and isinstance(vals[0].type, ir.IntType) and vals[0].type.width == 1:
        vals = [b.zext(v, ir.IntType(8)) for v in vals]
    starts = range(0, len(vals), chunk)
    if before:
        ctx.barrier()
    for j, addr in zip(starts, tile_addresses(ctx, desc, sw, lay, shape, starts)):
        _vector_store(b, addr, vals[j:j + chunk], eb)
    if after:
        ctx.barrier()
    return desc


# Ops that touch no shared memory: two local_allocs separated only by these share their
# barriers (one before the first's stores, one after the last's).
_NO_SMEM = (TT.LOAD, TT.ADDPTR, TT.SPLAT, TT.BROADCAST, TT.MAKE_RANGE, TT.EXPAND_DIMS,
            TT.GET_PROGRAM_ID, TT.BITCAST, TT.FP_TO_FP, ARITH.CONSTANT)


def _neighbour_allocs(op):
    """(previous, next) local_alloc-with-source in op's block reachable across _NO_SMEM /
    arith ops only, else None for that side."""
    ops = [o.operation for o in op.operation.block.operations]
    i = next(k for k, o in enumerate(ops) if o == op.operation)

    def scan(rng):
        """The first local_alloc with a source in `rng`, crossing only ops that touch no shared memory; None past any
        other op."""
        for k in rng:
            o = ops[k]
            if o.name == TTG.LOCAL_ALLOC and len(o.operands):
                return o
            if not (o.name in _NO_SMEM or o.name.startswith("arith.")):
                return None
        return None
    return scan(range(i - 1, -1, -1)), scan(range(i + 1, len(ops)))


def _ldmatrix(ctx, addr_i8, trans: bool, n: int):
    b = ctx.builder
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{n}{'.trans' if trans else ''}.b16"
    ret = ir.LiteralStructType([I32] * n) if n > 1 else I32
    fn = ctx.intrinsic(name, ret, [addr_i8.type])
    r = b.call(fn, [addr_i8])
    return [b.extract_value(r, i) for i in range(n)] if n > 1 else [r]


def _can_ldmatrix(layout: DotOperand, shape, desc: MemDesc, sw: SwizzledShared) -> bool:
    """ldmatrix moves 8 rows of 16 bytes per matrix: 16-bit operands either way (`.trans` for
    M/N-fast tiles); 8- and 32-bit ones only K-fast (a 16-byte row then holds kWidth-element
    groups exactly as the fragment wants; transposing would split them)."""
    eb = elem_bytes(desc.elem)
    order = full_order(desc)
    k_fast = order[0] == layout.k_dim
    if eb not in (1, 2, 4) or layout.k_width * eb != 4 or (eb != 2 and not k_fast):
        return False
    if (shape[order[0]] * eb) % 16 or (sw.max_phase > 1 and (sw.vec * eb) % 16):
        return False
    r = layout.rank
    mn = r - 2 if layout.op_idx == 0 else r - 1
    return (all(layout.tile(d) <= shape[d] for d in range(r)) and shape[layout.k_dim] % (32 // eb) == 0
            and shape[mn] >= 8)


class _Ldmatrix:
    """ldmatrix loads of one dot operand, issued per k step on demand (`words`), so tt.dot can
    interleave them with its mma.sync and keep one k step of fragments live instead of the
    whole tile's. A: one x4 per (m tile, k step) = a0..a3; B: one x4 per two n tiles and a k
    step (b0, b1 of each; x2 when the warp has a single n tile). Lane L gives the row address
    of matrix L >> 3, row L & 7 (PTX ldmatrix); matrices ordered as the registers they fill."""

    def __init__(self, ctx, layout: DotOperand, shape, desc: MemDesc, sw):
        self.ctx, self.layout, self.shape, self.desc, self.sw = ctx, layout, shape, desc, sw
        rank = layout.rank
        self.md, self.kd = (rank - 2, rank - 1) if layout.op_idx == 0 else (rank - 1, rank - 2)
        self.reps_b = layout.reps(shape, 0) if rank == 3 else 1
        self.reps_mn = layout.reps(shape, self.md)
        self.kb = 16 // elem_bytes(desc.elem)   # elements of one 16-byte matrix row along K
        self.reps_k = shape[self.kd] // (2 * self.kb)
        self.step = 1 if layout.op_idx == 0 else min(2, self.reps_mn)
        self.trans = full_order(desc)[0] != layout.k_dim
        self.periods, self.strides = swizzle_periods(sw, desc), element_strides(desc, sw)
        self.cache: dict = {}

    def words(self, rb: int, mn: int, rk: int) -> list:
        """The i32 registers (4 for A, 2 for B) of fragment (batch rep, m-or-n rep, k step)."""
        key = (rb, mn, rk)
        if key not in self.cache:
            self._issue(rb, mn - mn % self.step, rk)
        return self.cache[key]

    def _issue(self, rb, rmn, rk):
        """ldmatrix of fragment (rb, rmn, rk). Its row addresses are those of a base fragment
        plus a constant when the shift between them leaves the XOR swizzle unchanged (a row
        shift by a multiple of perPhase * maxPhase, a column shift by a multiple of
        vec * maxPhase): one address register per residue class, the rest `[reg + imm]`, as
        Triton's ldmatrix lowering addresses its repetitions."""
        layout = self.layout
        shifts = {self.md: rmn * layout.tile(self.md), self.kd: rk * 2 * self.kb}
        residue, const = {}, 0
        for d, shift in shifts.items():
            residue[d] = shift % self.periods[d]
            const += (shift - residue[d]) * self.strides[d]
        key = ("base", rb, residue[self.md], residue[self.kd])
        if key not in self.cache:
            self.cache[key] = self._row_address(rb, residue[self.md], residue[self.kd])
        b = self.ctx.builder
        addr = self.cache[key]
        if const:
            addr = b.gep(addr, [_c(const * elem_bytes(self.desc.elem))])
        n = 4 if (layout.op_idx == 0 or self.step == 2) else 2
        words = _ldmatrix(self.ctx, addr, self.trans, n)
        if layout.op_idx == 0:
            self.cache[(rb, rmn, rk)] = words
        else:
            for j in range(n // 2):
                self.cache[(rb, rmn + j, rk)] = words[2 * j:2 * j + 2]

    def _row_address(self, rb, shift_mn: int, shift_k: int):
        """This lane's ldmatrix row address (i8 addrspace(3)*) for the fragment whose m-or-n
        origin is shifted by `shift_mn` elements and whose k origin by `shift_k`."""
        ctx, layout, shape = self.ctx, self.layout, self.shape
        b = ctx.builder
        lane, _ = ctx.lane_warp()
        r8 = b.and_(lane, _c(7))
        mi = b.lshr(lane, _c(3))
        lo, hi = b.and_(mi, _c(1)), b.lshr(mi, _c(1))   # matrix index bits
        lo8 = b.shl(lo, _c(3))
        lok, hik = b.mul(lo, _c(self.kb)), b.mul(hi, _c(self.kb))
        rank, md, kd = layout.rank, self.md, self.kd
        origin = warp_origin(ctx, layout)
        tile_mn = layout.tile(md)
        index = [None] * rank
        if rank == 3:
            bidx = b.add(origin[0], _c(rb * layout.tile(0)))
            index[0] = b.and_(bidx, _c(shape[0] - 1)) if layout.tile(0) > shape[0] else bidx
        mn0 = b.add(origin[md], _c(shift_mn))
        if layout.op_idx == 0:
            # matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
            m_off, k_off = lo8, hik
        else:
            # matrices: (k 0-7, n tile j), (k 8-15, j), (k 0-7, j+1), (k 8-15, j+1)
            m_off, k_off = (b.mul(hi, _c(tile_mn)) if self.step == 2 else _c(0)), lok
        mn = b.add(mn0, m_off)
        k = b.add(_c(shift_k), k_off)
        if self.trans:
            k = b.add(k, r8)
        else:
            mn = b.add(mn, r8)
        index[md], index[kd] = mn, k
        return _addr(ctx, self.desc, self.sw, index)

    def all_elements(self) -> list:
        """Every fragment, unpacked into this thread's elements in local_offsets order."""
        b = self.ctx.builder
        regs = self.layout.regs(self.shape)
        out = [None] * self.layout.elems_per_thread(self.shape)
        ety = llvm_type(self.desc.elem)
        for (rb, mn, rk), positions in sorted(regs.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
            for word, pos in zip(self.words(rb, mn, rk), positions):
                if len(pos) == 1:
                    out[pos[0]] = b.bitcast(word, ety) if ety != I32 else word
                    continue
                vec = b.bitcast(word, ir.VectorType(ety, len(pos)))
                for e, p in enumerate(pos):
                    out[p] = b.extract_element(vec, _c(e))
        return out


class LazyOperand(TensorVal):
    """A dot operand whose ldmatrix loads tt.dot issues itself, k step by k step (`frags`)."""

    def __init__(self, frags: _Ldmatrix, layout, shape):
        super().__init__([], layout, shape)
        self.frags = frags


# Ops that may sit between a dot operand's local_load and its tt.dot without changing what
# loading at the dot reads: they write no shared memory.
_NO_SMEM_WRITE = (TTG.LOCAL_LOAD, TTG.MEMDESC_INDEX, TTG.MEMDESC_SUBSLICE, TTG.MEMDESC_TRANS)


def _feeds_next_dot(op) -> bool:
    """Whether the result's only user is a tt.dot that follows with nothing in between that
    writes shared memory (other local_loads, ring-slot views, scalar arithmetic), so loading at
    the dot reads the same bytes."""
    res = op.results[0]
    uses = list(res.uses)
    if len(uses) != 1 or uses[0].owner.name != TT.DOT:
        return False
    dot = uses[0].owner.operation
    seen = False
    for o in op.operation.block.operations:
        o = o.operation
        if o == op.operation:
            seen = True
        elif seen:
            if o == dot:
                return True
            if not (o.name in _NO_SMEM_WRITE or o.name.startswith("arith.")):
                return False
    return False


def local_load_dot(ctx, op, desc: MemDesc, token=None) -> TensorVal:
    """`ttg.local_load` of a swizzled tile into a `#ttg.dot_op` layout (see module doc)."""
    b = ctx.builder
    res = op.results[0]
    layout = layout_of(res)
    shape = tuple(mu.shape_of(res.type))
    sw = shared_layout(op.operands[0].type)
    if isinstance(sw, NvmmaShared):
        check_nvmma(sw, desc.shape[sw.order[0]], mu.elem_bits(desc.elem))
    src_op = op.operands[0].owner if isinstance(op.operands[0], mu.ir.OpResult) else None
    if not (src_op is not None and src_op.name == TTG.LOCAL_ALLOC and len(src_op.operands)):
        ctx.barrier_unless_fresh()  # a buffer other threads filled (cp.async): everyone has waited first
    ety = llvm_type(desc.elem)
    eb = elem_bytes(desc.elem)
    if _can_ldmatrix(layout, shape, desc, sw):
        frags = _Ldmatrix(ctx, layout, shape, desc, sw)
        if _feeds_next_dot(op):
            ctx.after_smem_read()
            return LazyOperand(frags, layout, shape)
        out = frags.all_elements()
    else:
        idx = ctx.indices(layout, shape)
        kw = layout.k_width if full_order(desc)[0] == layout.k_dim else 1
        out = []
        for j in range(0, len(idx), kw):
            if kw == 1:
                out.append(b.load(_addr(ctx, desc, sw, idx[j], ety), align=eb))
                continue
            vt = ir.VectorType(ety, kw)
            v = b.load(_addr(ctx, desc, sw, idx[j], vt), align=eb * kw)
            out += [b.extract_element(v, _c(e)) for e in range(kw)]
    ctx.after_smem_read()
    return TensorVal(out, layout, shape)


# (A element, B element, C element) -> (shape, PTX type suffix "d.a.b.c")
_MMA = {
    ("f16", "f16", "f32"): ("m16n8k16", "f32.f16.f16.f32"),
    ("bf16", "bf16", "f32"): ("m16n8k16", "f32.bf16.bf16.f32"),
    ("f16", "f16", "f16"): ("m16n8k16", "f16.f16.f16.f16"),
    ("f32", "f32", "f32"): ("m16n8k8", "f32.tf32.tf32.f32"),
    ("i8", "i8", "i32"): ("m16n8k32", "s32.s8.s8.s32"),
}
for _a in ("f8E4M3FN", "f8E5M2"):
    for _b in ("f8E4M3FN", "f8E5M2"):
        _n = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
        _MMA[(_a, _b, "f32")] = ("m16n8k32", f"f32.{_n[_a]}.{_n[_b]}.f32")
        _MMA[(_a, _b, "f16")] = ("m16n8k32", f"f16.{_n[_a]}.{_n[_b]}.f16")


def pack_register(b, elems):
    """kWidth elements of one register -> i32 (a dot operand register of mma.sync or wgmma)."""
    if len(elems) == 1:
        e = elems[0]
        return e if e.type == I32 else b.bitcast(e, I32)
    vt = ir.VectorType(elems[0].type, len(elems))
    v = ir.Constant(vt, None)
    for i, e in enumerate(elems):
        v = b.insert_element(v, e, _c(i))
    return b.bitcast(v, I32)


def pack_halves(b, elems) -> list:
    """16-bit elements as 32-bit registers of neighbour pairs (an fp16 accumulator of mma.sync
    or wgmma: c0 c1, c2 c3 of each 16x8 tile)."""
    return [pack_register(b, elems[j:j + 2]) for j in range(0, len(elems), 2)]


def unpack_halves(b, words) -> list:
    """pack_halves undone: each register's two fp16 elements, low half first."""
    pairs = [b.bitcast(w, ir.VectorType(llvm_type("f16"), 2)) for w in words]
    return [b.extract_element(p, _c(e)) for p in pairs for e in (0, 1)]


def _precision(op) -> int:
    p = mu.props(op)
    return mu.int_attr(p["inputPrecision"]) if "inputPrecision" in p else 0


def _tf32(b, x):
    """f32 bits -> the nearest tf32 (cvt.rna.tf32.f32, PTX ISA 9.7.9.21), as f32 bits."""
    return b.asm(ir.FunctionType(I32, [I32]), "cvt.rna.tf32.f32 $0, $1;", "=r,r", [x], side_effect=False)


def _split3(b, get):
    """Per fragment: (big, small) registers with big = tf32(x), small = tf32(x - big)."""
    cache = {}
    f32 = ir.FloatType()

    def split(key):
        """The (big, small) tf32 registers of fragment `key`, made once."""
        if key not in cache:
            big, small = [], []
            for w in get(key):
                hi = _tf32(b, w)
                lo = b.fsub(b.bitcast(w, f32), b.bitcast(hi, f32))
                big.append(hi)
                small.append(_tf32(b, b.bitcast(lo, I32)))
            cache[key] = (big, small)
        return cache[key]
    return split


@rule(TT.DOT)
def dot(ctx, op, a: TensorVal, bm: TensorVal, c: TensorVal):
    """D = A B + C with mma.sync over the fragments (see module doc)."""
    b = ctx.builder
    la, lb, lc = a.layout, bm.layout, c.layout
    if not (isinstance(lc, NvidiaMma) and isinstance(la, DotOperand) and isinstance(lb, DotOperand)):
        return fma_dot(ctx, op, a, bm, c)
    ea, eb_, ec = (mu.elem_str(v.type) for v in op.operands)
    if (ea, eb_, ec) not in _MMA:
        raise NotSupportedYet(f"tt.dot on tensor cores for {ea} x {eb_} -> {ec}", None, "llir")
    mshape, types = _MMA[(ea, eb_, ec)]
    half_acc = ec == "f16"
    text_c = "f" if ec == "f32" else "r"
    shape = c.shape
    rank = lc.rank
    ra, rb_ = la.regs(a.shape), lb.regs(bm.shape)
    reps_b = lc.reps(shape, 0) if rank == 3 else 1
    reps_m, reps_n = lc.reps(shape, rank - 2), lc.reps(shape, rank - 1)
    reps_k = a.shape[-1] // la.k_instr
    grid = lc.rep_grid(shape)
    at = {rep: i for i, rep in enumerate(grid)}
    acc = {}
    for rep, i in at.items():
        vals = c.elems[4 * i:4 * i + 4]
        acc[rep] = pack_halves(b, vals) if half_acc else list(vals)
    nacc = 2 if half_acc else 4
    outs = ",".join([f"={text_c}"] * nacc)
    cons = outs + "," + ",".join(["r"] * 6) + "," + ",".join(str(i) for i in range(nacc))
    d_regs = ", ".join(f"${i}" for i in range(nacc))
    a_regs = ", ".join(f"${nacc + i}" for i in range(4))
    b_regs = ", ".join(f"${nacc + 4 + i}" for i in range(2))
    c_regs = ", ".join(f"${nacc + 6 + i}" for i in range(nacc))
    text = f"mma.sync.aligned.{mshape}.row.col.{types} {{{d_regs}}}, {{{a_regs}}}, {{{b_regs}}}, {{{c_regs}}};"
    acc_t = acc[grid[0]][0].type
    ftype = ir.FunctionType(ir.LiteralStructType([acc_t] * nacc), [I32] * 6 + [acc_t] * nacc)
    def packed(x, regs):
        """`key -> registers` of operand `x` for mma.sync: a lazy operand's own fragment words, else its elements
        packed per register of `regs[key]` (cached per key)."""
        if isinstance(x, LazyOperand):
            return lambda key: x.frags.words(*key)
        cache = {}

        def get(key):
            """The packed registers of fragment `key`, made once."""
            if key not in cache:
                cache[key] = [pack_register(b, [x.elems[p] for p in reg]) for reg in regs[key]]
            return cache[key]
        return get

    pa, pb = packed(a, ra), packed(bm, rb_)
    x3 = ea == "f32" and _precision(op) == 1
    if x3:  # tf32x3: a b ~ a_big b_big + a_big b_small + a_small b_big (Triton's F32DotTC split)
        pa, pb = _split3(b, pa), _split3(b, pb)
    for rk in range(reps_k):
        for rbat in range(reps_b):
            for rm in range(reps_m):
                for rn in range(reps_n):
                    rep = (rbat, rm, rn) if rank == 3 else (rm, rn)
                    if x3:
                        (ab, as_), (bb, bs) = pa((rbat, rm, rk)), pb((rbat, rn, rk))
                        terms = [(as_, bb), (ab, bs), (ab, bb)]
                    else:
                        terms = [(pa((rbat, rm, rk)), pb((rbat, rn, rk)))]
                    for ta, tb in terms:
                        r = b.asm(ftype, text, cons, ta + tb + acc[rep], side_effect=False)
                        acc[rep] = [b.extract_value(r, i) for i in range(nacc)]
    out = [None] * len(c.elems)
    for rep, i in at.items():
        out[4 * i:4 * i + 4] = unpack_halves(b, acc[rep]) if half_acc else acc[rep]
    return TensorVal(out, lc, shape)
