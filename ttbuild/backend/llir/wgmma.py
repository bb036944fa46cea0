"""LLIR rules for Hopper's warpgroup MMA: wgmma.mma_async, its waits and the async-proxy fence.

Ops: `ttng.warp_group_dot` (wgmma.mma_async on shared-memory matrix descriptors),
`ttng.warp_group_dot_wait` (wgmma.wait_group, accumulators tied) and `ttng.fence_async_shared`
(fence.proxy.async).

PTX ISA 9.7.15 (warpgroup-level matrix instructions), as Triton 3.6 emits them
(third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/DotOpToLLVM/WGMMA.cpp; ../shared/TENSORCORE.md
section 3):
- per warp_group_dot: `wgmma.fence`, then for each accumulator tile of the warpgroup (64 rows x
  instrShape n) and each k16 step, `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` with
  both operands as 64-bit matrix descriptors and the tile's accumulators tied in/out, then
  `wgmma.commit_group`;
- the wait is an asm that takes every accumulator as in/out, so neither LLVM nor ptxas reads or
  moves them while the group may still write them;
- fp8 into fp32 with maxNumImpreciseAcc at or below K: every maxNumImpreciseAcc of K sums into
  fresh registers (scale-d false), waited for and added into the accumulator in fp32 (Triton's
  needsPartialAccumulator);
- descriptor (PTX ISA 9.7.15.5.1.2, "Matrix Descriptor Format"): bits 0-13 start address >> 4,
  16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 62-63 swizzle (1 = 128 B,
  2 = 64 B, 3 = 32 B). For an operand whose contiguous dimension is K, the stride offset steps 8
  rows (8 x swizzle bytes) and the leading one is unused (0, as Triton); for one stored M- or
  N-contiguous (`imm-trans` 1, 16-bit types only) the leading offset steps from one
  swizzle-wide block to the next (K x swizzle bytes) and the stride offset 8 rows of K.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes
from ttbuild.backend.ir.encodings import NvidiaMma, NvmmaShared
from ttbuild.backend.ir.ops import TTNG
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.dot import pack_halves, pack_register, shared_layout, unpack_halves
from ttbuild.backend.llir.smem import MemDesc
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

I64 = ir.IntType(64)
_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}
# element -> (wgmma type, k per instruction); PTX ISA 9.7.15.5.2
_PTX_TYPE = {"f16": ("f16", 16), "bf16": ("bf16", 16), "f32": ("tf32", 8), "f8E4M3FN": ("e4m3", 32),
             "f8E5M2": ("e5m2", 32), "i8": ("s8", 32)}


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _asm(ctx, text: str) -> None:
    ctx.builder.asm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", [], side_effect=True)


@rule(TTNG.FENCE_ASYNC_SHARED)
def fence_async_shared(ctx, op):
    """`fence.proxy.async.shared::cta`: shared-memory writes of this thread's generic proxy
    (st.shared) become visible to the async proxy (wgmma, TMA) (PTX ISA 9.7.13.4.4)."""
    _asm(ctx, "fence.proxy.async.shared::cta;")
    ctx.smem_landed()


def descriptor_bits(sw: NvmmaShared, k_major: bool, k_extent: int) -> int:
    """The constant fields of an operand's matrix descriptor (all but the start address)."""
    block = sw.swizzle
    if block not in _SWIZZLE_MODE:
        raise NotSupportedYet(f"wgmma on an nvmma_shared tile with a {block}-byte swizzle", None, "llir")
    lbo = 0 if k_major else k_extent * block
    sbo = 8 * block
    return ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (_SWIZZLE_MODE[block] << 62)


class _Operand:
    """One wgmma operand in shared memory: byte offsets of its (m-or-n, k) sub-tiles and the
    descriptor they make. idx 0 = A [M, K], 1 = B [K, N]."""

    def __init__(self, desc: MemDesc, sw: NvmmaShared, idx: int):
        self.desc, self.sw, self.idx = desc, sw, idx
        self.k_dim = 1 if idx == 0 else 0
        self.mn_dim = 1 - self.k_dim
        self.k_major = sw.order[0] == self.k_dim
        self.eb = elem_bytes(desc.elem)
        self.bits = descriptor_bits(sw, self.k_major, desc.shape[self.k_dim])

    def address(self, b, base_i32, mn0):
        """Shared address (i32) of sub-tile (mn0, 0): NvmmaShared.offset with mn0 a runtime i32
        (a multiple of 8). K-contiguous tiles sit at mn0 rows of a block; M/N-contiguous ones at
        mn0's block and column (a descriptor may start inside a swizzled row, as Triton's second
        warpgroup of a 32-wide wgmma does)."""
        e, eb, shape = self.sw.block_elems, self.eb, self.desc.shape
        if self.k_major:
            off = b.mul(mn0, _c(e * eb))
        else:
            blk = b.lshr(mn0, _c(e.bit_length() - 1))
            off = b.add(b.mul(blk, _c(shape[self.k_dim] * e * eb)), b.mul(b.and_(mn0, _c(e - 1)), _c(eb)))
        return b.add(base_i32, off)

    def k_offset(self, k0: int) -> int:
        """Bytes from sub-tile (mn0, 0) to (mn0, k0), k0 a multiple of one k step: along K the
        swizzle phase of such a row is 0, so k0 moves to its block and column (K-contiguous) or
        by k0 rows (M/N-contiguous), the same for every mn0."""
        e, shape = self.sw.block_elems, self.desc.shape
        const = (k0 // e) * shape[self.mn_dim] * e + k0 % e if self.k_major else k0 * e
        return const * self.eb

    def make(self, b, addr_i32):
        # bfe.u32 (PTX ISA 9.7.1.19) as Triton extracts the field: opaque to LLVM, which would
        # otherwise know the field's high bits are clear and turn step()'s adds into ORs that
        # ptxas rebuilds between wgmma issues (ULOP3 + UMOV) instead of precomputed adds
        bfe = b.asm(ir.FunctionType(I32, [I32]), "bfe.u32 $0, $1, 4, 14;", "=r,r", [addr_i32], side_effect=False)
        return b.or_(b.zext(bfe, I64), ir.Constant(I64, self.bits))

    @staticmethod
    def step(b, desc, byte_off: int):
        """The descriptor of a start `byte_off` bytes further (a multiple of 16): added to the
        start field, which cannot carry out (shared addresses stay below 2**18), as Triton adds."""
        return b.add(desc, ir.Constant(I64, byte_off >> 4)) if byte_off else desc


def _a_words(b, a: TensorVal):
    """A in registers (`#ttg.dot_op<{opIdx = 0, parent = #mma v3, kWidth}>`): per (m rep, k
    step) its four 32-bit registers, the m16k16 (16-bit) or m16k8 (tf32: kWidth 1) fragment of
    mma.sync, which wgmma's RS form reads per warp of the warpgroup (PTX ISA 9.7.15.5.1,
    "Register fragments: A")."""
    regs = a.layout.regs(a.shape)
    return {(mn, k): [pack_register(b, [a.elems[p] for p in reg]) for reg in positions]
            for (_, mn, k), positions in regs.items()}


@rule(TTNG.WARP_GROUP_DOT)
def warp_group_dot(ctx, op, a, bm: MemDesc, c: TensorVal):
    """D = A B + C on wgmma: A in shared memory (a MemDesc: SS form) or in registers (a
    TensorVal in #ttg.dot_op: RS form, attention's P), B in shared memory (see the module
    docstring)."""
    b = ctx.builder
    lc = layout_of(op.results[0])
    rs = isinstance(a, TensorVal)
    ea = mu.elem_str(op.operands[0].type) if rs else a.elem
    eb, ec = bm.elem, mu.elem_str(op.operands[2].type)
    if rs and ea not in ("f16", "bf16", "f32"):
        raise NotSupportedYet(f"ttng.warp_group_dot with {ea} A in registers", None, "llir")
    if not isinstance(lc, NvidiaMma) or ea not in _PTX_TYPE or eb not in _PTX_TYPE or ec not in ("f32", "i32", "f16"):
        raise NotSupportedYet(f"ttng.warp_group_dot for {ea} x {eb} -> {ec}", None, "llir")
    ctx.align_smem(1024)  # nvmma buffers sit at 1024-byte multiples of its start
    # Operand tiles other threads filled (cp.async rings) or wrote (st.shared + proxy fence)
    # must be complete before any warpgroup reads them.
    ctx.barrier_if_landed()
    opa = None if rs else _Operand(a, shared_layout(op.operands[0].type), 0)
    opb = _Operand(bm, shared_layout(op.operands[1].type), 1)
    shape = c.shape
    n_instr = lc.instr_shape[1]
    (ta, k), (tb, _) = _PTX_TYPE[ea], _PTX_TYPE[eb]
    k_steps = a.shape[1] // k
    words = _a_words(b, a) if rs else None
    wm, wn = lc.warps_per_cta
    _, warp = ctx.lane_warp()
    # warps M fastest: this warp's warpgroup starts at row 16 * (warp % wm rounded down to 4)
    wg_row = b.mul(b.and_(warp, _c(wm - 4)), _c(16)) if wm > 4 else _c(0)
    n_col = b.mul(b.and_(b.udiv(warp, _c(wm)), _c(wn - 1)), _c(n_instr)) if wn > 1 else _c(0)
    base_a = None if rs else b.ptrtoint(a.ptr, I32)
    base_b = b.ptrtoint(bm.ptr, I32)
    per_elems = n_instr // 2  # accumulator elements per thread and tile
    grid = lc.rep_grid(shape)
    half = ec == "f16"
    acc_t, per, text, cons, ftype = _instruction(ec, per_elems, (ta, tb, k, n_instr), rs, opa, opb)
    # C a splat zero (attention's QK): the first k step ignores it (scale-d false, Triton's
    # useC), so its registers need no zeros written every iteration
    zero_c = mu.is_zero_splat(op.operands[2])
    if zero_c:
        out = [ir.Constant(acc_t, ir.Undefined)] * (len(c.elems) * per // per_elems)
    elif half:
        out = pack_halves(b, c.elems)
    else:
        out = list(c.elems)
    chunk = _partial_chunk(op, ea, ec, a.shape[1])
    _asm(ctx, "wgmma.fence.sync.aligned;")
    tiles_a, tiles_b = {}, {}  # per m (n) tile: its descriptor at k = 0, built once
    undef = [ir.Constant(acc_t, ir.Undefined)] * per
    mma = lambda args: b.asm(ftype, text, cons, args, side_effect=True)  # noqa: E731
    for i, (rm, rn) in enumerate(grid):
        acc = out[i * per:(i + 1) * per]
        if not rs and rm not in tiles_a:
            tiles_a[rm] = opa.make(b, opa.address(b, base_a, b.add(wg_row, _c(rm * lc.tile(0)))))
        if rn not in tiles_b:
            tiles_b[rn] = opb.make(b, opb.address(b, base_b, b.add(n_col, _c(rn * lc.tile(1)))))
        steps = ((lambda kk, rm=rm, rn=rn: (words[(rm, kk)] if rs else [opa.step(b, tiles_a[rm], opa.k_offset(k * kk))],
                                              opb.step(b, tiles_b[rn], opb.k_offset(k * kk)))), k_steps, k)
        out[i * per:(i + 1) * per] = _k_loop(ctx, mma, acc, steps, chunk, zero_c, undef)
    _asm(ctx, "wgmma.commit_group.sync.aligned;")
    ctx.after_smem_read()  # the next write into these tiles waits for every warpgroup (bar.sync)
    return TensorVal(unpack_halves(b, out) if half else out, lc, shape)


def _instruction(ec: str, per: int, shape, rs: bool, opa, opb):
    """(accumulator type, registers per tile, asm text, constraints, function type) of one
    wgmma of `shape` = (A type, B type, K, N) into `per` accumulator elements of type `ec`: per
    outputs, per tied inputs, A (4 registers in RS form, else a descriptor), B, scale-d."""
    ta, tb, k, n_instr = shape
    integer, half = ec == "i32", ec == "f16"
    acc_t = I32 if integer or half else ir.FloatType()
    # an f16 accumulator: neighbour pairs (the same columns as f32's d[2j], d[2j+1]) per 32-bit
    # register (PTX ISA 9.7.15.5.1, wgmma .f16 D fragments)
    per = per // 2 if half else per
    regs = ", ".join(f"${i}" for i in range(per))
    # imm-scale-a/b (1: no negation) for floating types; imm-trans-a (SS only) and imm-trans-b
    # for 16-bit ones only
    tail = "" if integer else ", 1, 1"
    if ta in ("f16", "bf16"):
        tail += (f", {0 if opa.k_major else 1}" if not rs else "") + f", {0 if opb.k_major else 1}"
    n_a = 4 if rs else 1
    a_text = "{" + ", ".join(f"${2 * per + i}" for i in range(4)) + "}" if rs else f"${2 * per}"
    dtype = "s32" if integer else "f16" if half else "f32"
    text = (f"wgmma.mma_async.sync.aligned.m64n{n_instr}k{k}.{dtype}.{ta}.{tb} "
            f"{{{regs}}}, {a_text}, ${2 * per + n_a}, ${2 * per + n_a + 1}{tail};")
    cons = (",".join(["=r" if integer or half else "=f"] * per) + "," + ",".join(str(i) for i in range(per))
            + (",r,r,r,r" if rs else ",l") + ",l,b")
    ftype = ir.FunctionType(ir.LiteralStructType([acc_t] * per),
                            [acc_t] * per + ([I32] * 4 if rs else [I64]) + [I64, ir.IntType(1)])
    return acc_t, per, text, cons, ftype


def _k_loop(ctx, mma, acc, steps, chunk, zero_c: bool, undef) -> list:
    """One accumulator tile's wgmmas over K: `steps` = (operands(kk) -> (A operands, B
    descriptor), k steps, K per step); `mma(args)` emits one. Returns the accumulator values."""
    b = ctx.builder
    operands, k_steps, k = steps
    per = len(acc)
    one, zero = ir.Constant(ir.IntType(1), 1), ir.Constant(ir.IntType(1), 0)
    part, low, fresh = None, 0, zero_c
    for kk in range(k_steps):
        da, db = operands(kk)
        if chunk is None:
            scale_d = zero if zero_c and kk == 0 else one
            r = mma(acc + da + [db, scale_d])
            acc = [b.extract_value(r, j) for j in range(per)]
            continue
        # fp8 with maxNumImpreciseAcc at or below K (Triton's needsPartialAccumulator): each
        # `chunk` of K accumulates in registers of its own, from zero, and is added into
        # the fp32 accumulator once complete (the adds read it after a wait, PTX ISA 9.7.15.7)
        if part is None and kk:
            _asm(ctx, "wgmma.fence.sync.aligned;")
        r = mma((part or undef) + da + [db, zero if part is None else one])
        part = [b.extract_value(r, j) for j in range(per)]
        low += k
        if low >= chunk or kk == k_steps - 1:
            part = _wait_all(b, part)
            acc = part if fresh else [b.fadd(x, y) for x, y in zip(acc, part)]
            part, low, fresh = None, 0, False
    return acc


def _partial_chunk(op, ea: str, ec: str, k_total: int) -> int | None:
    """The K extent each partial sum covers when an fp8 wgmma into fp32 must not accumulate
    more than maxNumImpreciseAcc products in its reduced precision (Triton's
    WarpGroupDotOp::needsPartialAccumulator: fp8, fp32 D, maxNumImpreciseAcc <= K), else None."""
    p = mu.props(op)
    limit = mu.int_attr(p["maxNumImpreciseAcc"]) if "maxNumImpreciseAcc" in p else 0
    if ea.startswith("f8") and ec == "f32" and 0 < limit <= k_total:
        return limit
    return None


def _tied(b, text: str, regs: list) -> list:
    """`text` as an asm that takes `regs` (i32 or f32) in and out, so neither LLVM nor ptxas reads
    or moves them across it; the values after it."""
    types = [r.type for r in regs]
    cons = ",".join("=r" if t == I32 else "=f" for t in types) + "," + ",".join(str(i) for i in range(len(regs)))
    r = b.asm(ir.FunctionType(ir.LiteralStructType(types), types), text, cons, regs, side_effect=True)
    return [b.extract_value(r, j) for j in range(len(regs))]


def _wait_all(b, regs: list) -> list:
    """Commit the wgmma group and wait for it with `regs` (what it writes) tied through the wait."""
    return _tied(b, "wgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;", regs)


@rule(TTNG.WARP_GROUP_DOT_WAIT)
def warp_group_dot_wait(ctx, op, *vals):
    """`wgmma.wait_group.sync.aligned N` (all but the N most recent groups complete), with
    every register of its accumulator operands (the f32/i32 tensors on #mma: this dot's, and
    an earlier dot's still in flight) tied through it; other operands (memdescs, register A
    operands) pass through unchanged."""
    b = ctx.builder
    pendings = mu.int_attr(op.operation.attributes["pendings"] if "pendings" in op.operation.attributes
                           else mu.props(op)["pendings"])
    tied = [i for i, v in enumerate(vals) if isinstance(v, TensorVal) and isinstance(v.layout, NvidiaMma)]

    def words(v):  # f16 accumulators as the packed pairs wgmma wrote (the repacking folds away)
        if v.elems and v.elems[0].type == llvm_type("f16"):
            return pack_halves(b, v.elems)
        return list(v.elems)
    regs = [words(vals[i]) for i in tied]
    waited = _tied(b, f"// wait for regs\n\twgmma.wait_group.sync.aligned {pendings};", [e for w in regs for e in w])
    out, k = list(vals), 0
    for i, w in zip(tied, regs):
        got = waited[k:k + len(w)]
        k += len(w)
        out[i] = TensorVal(unpack_halves(b, got) if len(w) != len(vals[i].elems) else got,
                           vals[i].layout, vals[i].shape)
    return out[0] if len(out) == 1 else out
