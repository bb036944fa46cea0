"""TTGIR pass: every `tt.dot` that a tensor core can compute gets a `#ttg.nvidia_mma` result (Triton's AccelerateMatmul).

v3 (wgmma, `ttng.warp_group_dot` on `#ttg.nvmma_shared` tiles) where sm_90 allows it, else v2 with
`#ttg.dot_op` operands staged through `#ttg.swizzled_shared` memory.

wgmma (`wgmma_supported`, Triton's MMAv3 branch): warpsPerCTA from warpsPerTileV3, instrShape
[16, n, 16] from mmaVersionToInstrShape; each operand `ttg.local_alloc`ed into the
`#ttg.nvmma_shared` swizzle NVMMASharedEncodingAttr::get picks, read by the dot as a memdesc;
`ttng.fence_async_shared` before `ttng.warp_group_dot {isAsync}` and `ttng.warp_group_dot_wait
{pendings = 0}` after it (the pipeliner drops the fence and keeps one group in flight where its
rings allow). The accumulator is carried as below. What follows is the mma.sync branch.

Runs after layout assignment (ttbuild.backend.ttgir.coalesce), which left every tensor `#ttg.blocked`.
Per dot, as Triton 3.6 spells it (lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp):
- result `#ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA, instrShape = [16, 8]}>`
  with warpsPerCTA from `warps_per_tile` (Triton's warpsPerTileV2; chained dots, as in
  attention, put all warps along M; rank 3 puts them on the batch dimension);
- each operand: `ttg.local_alloc` of the blocked value (right after its definition, so a
  loop-invariant operand is staged once, before the loop) into `#ttg.swizzled_shared` (mma_layout.for_operand: Triton's vec /
  perPhase / maxPhase, so ldmatrix rows fall in distinct banks), then `ttg.local_load` into
  `#ttg.dot_op<{opIdx, parent = #mma, kWidth = 32 / element bits}>` just before the dot;
- the accumulator: when it is a loop-carried value used only by the dot and the dot's result
  only yielded (the matmul loop), the loop carries it in `#mma` (its init is converted before
  the loop, or rebuilt in #mma when it is a splat constant) and it is converted back to its
  blocked layout after the loop; otherwise `ttg.convert_layout` to `#mma` before the dot and back
  after it.
Dots that mma.sync cannot compute (fp64, `input_precision = "ieee"` fp32, K below one mma.sync
k-step) take the FMA path of the LLIR on the blocked result layout Triton gives every dot
(layout.fma_dot_blocked), their accumulator carried in it as above, A and B converted to
`#ttg.dot_op<{opIdx, parent = #blocked}>` right before the dot (analysis.fma_staging).
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.layout import fma_dot_blocked
from ttbuild.backend.analysis.mma_layout import for_operand, nvmma_for_operand
from ttbuild.backend.ir.builders import convert_layout, create, local_alloc, local_load
from ttbuild.backend.ir.encodings import DotOperand, FmaOperand, NvidiaMma, parse_encoding
from ttbuild.backend.ir.ops import ARITH, SCF, TT, TTNG
from ttbuild.backend.ir.optraits import DOT_OPS, walk
from ttbuild.backend.ir.types import MemDescType, tensor_in

ir = mu.ir

# (A element, C element, input precision or None for any) -> True: mma.sync covers it (PTX ISA 9.7.14.5.14).
_MMA_TYPES = {("f16", "f32"), ("f16", "f16"), ("bf16", "f32"), ("f32", "f32"), ("i8", "i32"),
              ("f8E4M3FN", "f32"), ("f8E5M2", "f32"), ("f8E4M3FN", "f16"), ("f8E5M2", "f16")}
TF32, TF32X3, IEEE = 0, 1, 2


def input_precision(op) -> int:
    """A tt.dot's `inputPrecision` (tf32 when absent, Triton's default)."""
    p = mu.props(op)
    return mu.int_attr(p["inputPrecision"]) if "inputPrecision" in p else TF32


def mma_supported(op, cc: int = 90) -> bool:
    """Whether mma.sync computes this tt.dot: element types in _MMA_TYPES (fp8 from sm_89,
    fp32 only as tf32), M >= 16, N >= 8 and K a multiple of one mma.sync k-step."""
    a, c = op.operands[0], op.operands[2]
    ea, ec = mu.elem_str(a.type), mu.elem_str(c.type)
    if (ea, ec) not in _MMA_TYPES:
        return False
    if ea == "f32" and input_precision(op) == IEEE:
        return False
    if ea.startswith("f8") and cc < 89:
        return False
    shape_a = mu.shape_of(a.type)
    shape_c = mu.shape_of(c.type)
    k_width = max(1, 32 // mu.elem_bits(ea))
    return shape_c[-2] >= 16 and shape_c[-1] >= 8 and shape_a[-1] % (8 * k_width) == 0


def _chained_dots(op) -> list:
    """The other dots (`tt.dot`, or ones already turned into `ttng.warp_group_dot`) reachable from
    `op` through uses (forward) within the function, then those a definition of an operand comes
    from (backward): the chained dots of Triton's warpsPerTileV2 / V3, nearest first."""
    seen, stack, found = set(), [op], []
    while stack:
        cur = stack.pop()
        key = cur.operation if hasattr(cur, "operation") else cur
        if key in seen:
            continue
        seen.add(key)
        if cur.operation.name in DOT_OPS and cur.operation != op.operation:
            found.append(cur)
        for r in cur.results:
            for use in r.uses:
                stack.append(use.owner)
    for v in op.operands:
        found.extend(d for d in _dots_defining(v) if d.operation not in seen)
    return found


def _slice_has_other_dot(op) -> bool:
    """Whether another dot is chained to `op` (_chained_dots)."""
    return bool(_chained_dots(op))


def _dots_defining(v) -> list:
    """The dots a value's definitions reach back to (ops defining v, their operands' definitions, ...)."""
    seen, stack, found = set(), [v], []
    while stack:
        x = stack.pop()
        if not isinstance(x, ir.OpResult):
            continue
        op = x.owner
        if op.operation in seen:
            continue
        seen.add(op.operation)
        if op.name in DOT_OPS:
            found.append(op)
        stack.extend(op.operands)
    return found


def _from_dot(v) -> bool:
    """Whether a dot's result reaches v through the ops that define it: attention's P, which
    stays in registers as wgmma's A operand (Triton's AccelerateMatmul takes A from registers
    unless it comes from a load)."""
    return bool(_dots_defining(v))


def warps_per_tile(op, shape, num_warps: int, decided: list | None = None) -> tuple[int, ...]:
    """Triton's warpsPerTileV2: rank 3 -> [numWarps, 1, 1]; a dot chained with another that
    already has its mma layout (`decided`: [(dot operation, warpsPerCTA)]) -> that layout's warps (Triton
    rewrites the last dot first, so attention's two dots share P.V's warps); a dot chained with
    another -> all warps along the larger of M, N; otherwise double M or N alternately, the one
    with more 16x8 tiles left per warp, until the warps are used up."""
    if len(shape) == 3:
        return (num_warps, 1, 1)
    chained = _chained_dots(op)
    for other in chained:
        for done, warps in decided or ():
            if done == other.operation and len(warps) == len(shape):
                return warps
    if chained:
        return (num_warps, 1) if shape[0] >= shape[1] else (1, num_warps)
    ret = [1, 1]
    while ret[0] * ret[1] < num_warps:
        if shape[0] // 16 // ret[0] >= shape[1] // (8 * ret[1]):
            if ret[0] < shape[0] // 16:
                ret[0] *= 2
            else:
                ret[1] *= 2
        else:
            ret[1] *= 2
    return tuple(ret)


def _memdesc_type(shape, elem: str, shared) -> ir.Type:
    return MemDescType(tuple(shape), elem, shared.attr()).ir()


def _convert(v, layout, before=None, after=None, loc=None):
    ip = ir.InsertionPoint(before) if before is not None else ir.InsertionPoint.after(after)
    with ip:
        return convert_layout(v, tensor_in(v, layout), loc)


def _alloc_after_definition(dot, idx: int, shared):
    """`ttg.local_alloc` of operand idx of `dot` into `shared`, right after the operand's
    definition, also when that is outside the dot's loop (attention's Q): the tile is then
    written once, not every iteration (Triton hoists it the same way)."""
    v = dot.operands[idx]
    owner = v.owner if isinstance(v, ir.OpResult) else None
    ip = ir.InsertionPoint.after(owner) if owner is not None else ir.InsertionPoint(dot)
    with ip:
        return local_alloc(_memdesc_type(mu.shape_of(v.type), mu.elem_str(v.type), shared), v, dot.location).owner


def _stage_operand(dot, idx: int, mma: NvidiaMma) -> None:
    """Operand idx (0 = A, 1 = B) of `dot`: local_alloc into swizzled shared memory after its
    definition, local_load into the dot_op layout before the dot."""
    v = dot.operands[idx]
    elem = mu.elem_str(v.type)
    src = parse_encoding(mu.encoding_str(v.type))
    k_width = max(1, 32 // mu.elem_bits(elem))
    alloc = _alloc_after_definition(dot, idx, for_operand(idx, mu.shape_of(v.type), src.order,
                                                          mu.elem_bits(elem), k_width))
    with ir.InsertionPoint(dot):
        dot.operands[idx] = local_load(tensor_in(v, DotOperand(idx, mma, k_width)), alloc.results[0], loc=dot.location)


# Elementwise ops an accumulator may pass through between the loop's iter_arg and the dot
# (attention's `acc = acc * alpha[:, None]`): they run on #mma too.
ACC_ELEMENTWISE = (ARITH.MULF, ARITH.ADDF, ARITH.SUBF, ARITH.DIVF, ARITH.MULI, ARITH.ADDI,
                   ARITH.SUBI)


def _loop_carried(dot):
    """(scf.for op, iter index, chain) when the dot's accumulator is a loop-carried value, reached
    through `chain` [(elementwise op, operand index on the path)] of single-use elementwise ops
    in the dot's block (empty when the dot takes the iter_arg itself), that nothing else uses,
    and the dot's result only feeds that value's scf.yield; else None."""
    c, d = dot.operands[2], dot.results[0]
    chain, v = [], c
    while not isinstance(v, ir.BlockArgument):
        op = v.owner
        if (op.name not in ACC_ELEMENTWISE or len(list(v.uses)) != 1
                or op.operation.block != dot.operation.block):
            return None
        cand = [k for k, x in enumerate(op.operands) if x.type == v.type and (
            isinstance(x, ir.BlockArgument) or x.owner.name in ACC_ELEMENTWISE)]
        if len(cand) != 1:
            return None
        chain.append((op, cand[0]))
        v = op.operands[cand[0]]
    blk = v.owner
    loop = blk.owner
    if loop.name != SCF.FOR or v.arg_number == 0 or blk != dot.operation.block:
        return None
    i = v.arg_number - 1
    if len(list(v.uses)) != 1 or len(list(d.uses)) != 1:
        return None
    y = list(d.uses)[0].owner
    if y.name != SCF.YIELD or y.operands[i] != d or y.operation.block != blk:
        return None
    return loop, i, chain


def _splat_copy(x, layout, before):
    """A copy of splat constant x in `layout`, placed before `before`; None if x is not one."""
    owner = x.owner if isinstance(x, ir.OpResult) else None
    if not (owner is not None and owner.name == ARITH.CONSTANT
            and isinstance(owner.attributes["value"], ir.DenseElementsAttr) and owner.attributes["value"].is_splat):
        return None
    t = tensor_in(x, layout)
    with ir.InsertionPoint(before):
        return create(ARITH.CONSTANT, results=[t], attrs={
            "value": ir.DenseElementsAttr.get_splat(t, owner.attributes["value"].get_splat_value())},
            loc=owner.location).results[0]


def _to_mma(x, mma: NvidiaMma, before):
    """x (blocked) as #mma for an elementwise op on the accumulator: a splat constant is rebuilt,
    a single-use tt.broadcast converts its (small) operand and broadcasts in #mma, anything else
    converts where it is used."""
    owner = x.owner if isinstance(x, ir.OpResult) else None
    if owner is not None and len(list(x.uses)) == 1:
        if owner.name == TT.BROADCAST:
            owner.operands[0] = _to_mma(owner.operands[0], mma, owner)
            x.set_type(tensor_in(x, mma))
            return x
        if (owner.name == ARITH.CONSTANT and isinstance(owner.attributes["value"], ir.DenseElementsAttr)
                and owner.attributes["value"].is_splat):
            old = owner.attributes["value"]
            x.set_type(tensor_in(x, mma))
            owner.attributes["value"] = ir.DenseElementsAttr.get_splat(x.type, old.get_splat_value())
            return x
    return _splat_copy(x, mma, before) or _convert(x, mma, before=before, loc=before.location)


def _accumulator(dot, mma: NvidiaMma) -> None:
    c, d = dot.operands[2], dot.results[0]
    blocked = parse_encoding(mu.encoding_str(d.type))
    carried = _loop_carried(dot)
    if carried is None:
        dot.operands[2] = _splat_copy(c, mma, dot) or _convert(c, mma, before=dot, loc=dot.location)
        d.set_type(tensor_in(d, mma))
        back = _convert(d, blocked, after=dot, loc=dot.location)
        d.replace_all_uses_except(back, back.owner.operation)
        _sink_past_casts(back.owner)
        return
    loop, i, chain = carried
    init = loop.operands[3 + i]
    res = loop.results[i]
    init_op = init.owner if isinstance(init, ir.OpResult) else None
    splat = (init_op is not None and init_op.name == ARITH.CONSTANT
             and isinstance(init_op.attributes["value"], ir.DenseElementsAttr)
             and init_op.attributes["value"].is_splat)
    if splat:  # a splat constant is rebuilt in #mma (a copy when others use it too)
        old = init_op.attributes["value"]
        with ir.InsertionPoint(loop):
            cst = create(ARITH.CONSTANT, results=[tensor_in(init, mma)], attrs={
                "value": ir.DenseElementsAttr.get_splat(tensor_in(init, mma), old.get_splat_value())},
                loc=init_op.location)
        loop.operands[3 + i] = cst.results[0]
        if not list(init.uses):
            init_op.operation.erase()
    else:
        loop.operands[3 + i] = _convert(init, mma, before=loop, loc=dot.location)
    arg = chain[-1][0].operands[chain[-1][1]] if chain else c
    arg.set_type(tensor_in(arg, mma))
    for op, k in reversed(chain):
        for j in range(len(op.operands)):
            if j != k:
                op.operands[j] = _to_mma(op.operands[j], mma, op)
        op.results[0].set_type(tensor_in(op.results[0], mma))
    d.set_type(tensor_in(d, mma))
    res.set_type(tensor_in(res, mma))
    back = _convert(res, blocked, after=loop, loc=dot.location)
    res.replace_all_uses_except(back, back.owner.operation)
    _sink_past_casts(back.owner)


# Element-type casts a conversion moves past (Triton's RemoveLayoutConversions does the same for
# any elementwise op): the matmul epilogue's `acc.to(tl.float16)` then converts half the bytes.
CASTS = (ARITH.TRUNCF, ARITH.EXTF, TT.FP_TO_FP, ARITH.FPTOSI, ARITH.FPTOUI, ARITH.SITOFP,
         ARITH.TRUNCI, ARITH.EXTSI, ARITH.EXTUI)


def _sink_past_casts(conv) -> None:
    """convert(x) -> cast  ==>  cast(x) -> convert, while the conversion's only user is a cast."""
    while True:
        uses = list(conv.results[0].uses)
        if len(uses) != 1 or uses[0].owner.name not in CASTS or len(uses[0].owner.operands) != 1:
            return
        cast = uses[0].owner
        x = conv.operands[0]
        layout = parse_encoding(mu.encoding_str(x.type))
        r = cast.results[0]
        want = parse_encoding(mu.encoding_str(r.type))
        cast.operands[0] = x
        r.set_type(tensor_in(r, layout))
        new = _convert(r, want, after=cast, loc=cast.location)
        r.replace_all_uses_except(new, new.owner.operation)
        conv.operation.erase()
        conv = new.owner


def _fma(dot, num_warps: int) -> None:
    """A dot no mma shape covers computes on Triton's dot result layout (layout.fma_dot_blocked:
    square blocks of up to 4x4 outputs per thread), its accumulator carried in it like an mma
    one (_accumulator); the operands convert to `#ttg.dot_op<{opIdx, parent = #blocked}>`
    (Triton's FMA path: each thread holds whole K rows of A and K columns of B for the outputs
    it owns). With the layer's own layout (one output per thread along M in 16 rows, say) a
    thread would hold 4x more of A: ptxas spills it (issue 30, docs/STATUS.md)."""
    d = dot.results[0]
    blocked = fma_dot_blocked(mu.shape_of(d.type), num_warps)
    if parse_encoding(mu.encoding_str(d.type)) != blocked:
        _accumulator(dot, blocked)
    c = dot.operands[2]
    if parse_encoding(mu.encoding_str(c.type)) != blocked:
        dot.operands[2] = _convert(c, blocked, before=dot, loc=dot.location)
    # A and B convert last, right before the dot: the dot then loads them (analysis.fma_staging)
    for idx in (0, 1):
        dot.operands[idx] = _convert(dot.operands[idx], FmaOperand(idx, blocked), before=dot, loc=dot.location)


# (A element, C element) that wgmma computes (PTX ISA 9.7.15.5.2, wgmma.mma_async types; Triton's
# supportMMA(op, 3)); fp32 inputs as tf32 only.
_WGMMA_TYPES = {("f16", "f32"), ("bf16", "f32"), ("f32", "f32"), ("f8E4M3FN", "f32"), ("f8E5M2", "f32"),
                ("i8", "i32"), ("f16", "f16")}


def _operand_order(v) -> tuple[int, ...]:
    return parse_encoding(mu.encoding_str(v.type)).order


def wgmma_supported(op, cc: int, num_warps: int) -> bool:
    """Whether this tt.dot runs on wgmma (Triton's supportMMA(op, 3) and the MMAv3 branch of
    AccelerateMatmul): sm_90, num_warps a multiple of 4, rank 2, M a multiple of 64, N of 8,
    K of one wgmma k step (256 / element bits), fp16/bf16/tf32/fp8 -> fp32, fp16 -> fp16 or
    int8 -> int32 (fp8 with a maxNumImpreciseAcc at or below K too: the LLIR adds partial sums
    into fp32, ttbuild.backend.llir.wgmma); 8- and 32-bit operands are stored K-contiguous
    (_shared_order), each shared operand tile's contiguous extent at least 32 bytes (an nvmma_shared swizzle); a dot
    chained to another (attention) needs M to be a multiple of 16 x num_warps (all warps along
    M) and, when A comes from a dot (P), 16-bit or tf32 A (it stays in registers: RS wgmma)."""
    if cc != 90 or num_warps % 4:
        return False
    a, bm, c = op.operands[0], op.operands[1], op.operands[2]
    ea, eb, ec = mu.elem_str(a.type), mu.elem_str(bm.type), mu.elem_str(c.type)
    if (ea, ec) not in _WGMMA_TYPES or (eb, ec) not in _WGMMA_TYPES or (ea == "i8") != (eb == "i8"):
        return False
    if (ea == "f32") != (eb == "f32") or (ea == "f32" and input_precision(op) != TF32):
        return False  # tf32x3 and ieee are mma.sync's (split in LLIR) and the FMA path's
    bits = mu.elem_bits(ea)
    shape_c, shape_a = mu.shape_of(c.type), mu.shape_of(a.type)
    if len(shape_c) != 2 or shape_c[0] % 64 or shape_c[1] % 8 or shape_a[1] % (256 // bits):
        return False
    chained = _slice_has_other_dot(op)
    if chained and (shape_c[0] % (16 * num_warps) or (bits == 8 and _from_dot(a))):
        return False  # all warps along M must tile it; A from registers is built for 16 and 32 bits
    # Along a contiguous M or N, one wgmma's sub-tile (64 rows of A, instrShape n columns of B)
    # must not straddle two swizzle blocks: it spans whole blocks or lies inside one.
    for idx, v, k_dim, step in ((0, a, 1, 64), (1, bm, 0, instr_n_v3(shape_c, num_warps, ea))):
        if v is a and _from_dot(a):
            continue  # A from registers
        order = _shared_order(v, idx)
        sw = nvmma_for_operand(mu.shape_of(v.type), order, mu.elem_bits(mu.elem_str(v.type)))
        if sw is None or (order[0] != k_dim and step % sw.block_elems and sw.block_elems % step):
            return False
    return True


# wgmma's N per input type (PTX ISA 9.7.15.5.2: multiples of 8 up to 256; for int8 multiples of
# 16 from 32 up to 224, and 8, 16, 24), largest first as Triton tries them.
_VALID_N = tuple(range(256, 7, -8))
_VALID_N_I8 = tuple(range(224, 31, -16)) + (24, 16, 8)


def instr_n_v3(shape, num_warps: int, elem: str = "f16") -> int:
    """wgmma's N for a [M, N] result (Triton's mmaVersionToInstrShape, version 3): the largest
    valid N that divides N and is at most N / (warps left after M takes M / 16 of them)."""
    m_warps = max(shape[0] // 16, 1)
    n_warps = max(num_warps // m_warps, 1)
    max_n = max(shape[1] // n_warps, 8)
    valid = _VALID_N_I8 if elem == "i8" else _VALID_N
    return next(n for n in valid if shape[1] % n == 0 and n <= max_n)


def warps_per_tile_v3(shape, num_warps: int) -> tuple[int, int]:
    """Triton's warpsPerTileV3: from [4, 1], double M while a warpgroup's 64 rows x the M warps
    do not cover M, else N, until the warps are used up."""
    ret = [4, 1]
    while ret[0] * ret[1] < num_warps:
        if shape[0] > 16 * ret[0]:
            ret[0] *= 2
        else:
            ret[1] *= 2
    return tuple(ret)


def _shared_order(v, idx: int) -> tuple[int, ...]:
    """The order (fastest first) operand idx (0 = A, 1 = B) of a wgmma is stored in: its
    registers' order for 16-bit elements (wgmma reads either majorness), else K-contiguous (A
    (1, 0), B (0, 1)), written transposed when the registers run along M or N (Triton's
    getSharedMemoryMMAOperand: no transpose allowed but for fp16 / bf16)."""
    if mu.elem_bits(mu.elem_str(v.type)) == 16:
        return _operand_order(v)
    return (1, 0) if idx == 0 else (0, 1)


def _stage_operand_v3(dot, idx: int):
    """Operand idx of `dot`: `ttg.local_alloc` into `#ttg.nvmma_shared` (in _shared_order)
    right after its definition (so a loop-invariant operand is written once, before the loop),
    then `ttng.fence_async_shared`: the tile, written by st.shared (the generic proxy), is read
    by wgmma through the async proxy (PTX ISA 9.7.13.4.4; Triton's FenceInsertion puts one
    there, the pipeliner drops it with the alloc). Returns the memdesc."""
    v = dot.operands[idx]
    alloc = _alloc_after_definition(dot, idx, nvmma_for_operand(mu.shape_of(v.type), _shared_order(v, idx),
                                                                mu.elem_bits(mu.elem_str(v.type))))
    with ir.InsertionPoint.after(alloc):
        create(TTNG.FENCE_ASYNC_SHARED, results=[], operands=[],
                            attrs={"bCluster": ir.BoolAttr.get(False)}, loc=dot.location)
    return alloc.results[0]


def _to_warp_group_dot(dot, a, bm) -> None:
    """tt.dot (already on #mma v3) -> `ttng.warp_group_dot {isAsync}` on A (a memdesc, or
    registers in `#ttg.dot_op`) and B (a memdesc), then `ttng.warp_group_dot_wait {pendings =
    0}` (the pipeliner lets one group stay in flight where its ring keeps the operands alive)."""
    d = dot.results[0]
    p = mu.props(dot)
    i32 = ir.IntegerType.get_signless(32)
    attrs = {"inputPrecision": p["inputPrecision"] if "inputPrecision" in p else ir.IntegerAttr.get(i32, 0),
             "isAsync": ir.BoolAttr.get(True)}
    if "maxNumImpreciseAcc" in p:
        attrs["maxNumImpreciseAcc"] = p["maxNumImpreciseAcc"]
    if mu.elem_str(dot.operands[0].type).startswith("f8") and (
            "maxNumImpreciseAcc" not in p or mu.int_attr(p["maxNumImpreciseAcc"]) == 0):
        # unset (0 in our TTIR): Triton's default on sm_90, 2**30 (compiler.py
        # max_num_imprecise_acc_default; its verifier wants >= 32 for an fp8 wgmma into f32)
        attrs["maxNumImpreciseAcc"] = ir.IntegerAttr.get(i32, 2 ** 30)
    with ir.InsertionPoint(dot):
        wg = create(TTNG.WARP_GROUP_DOT, results=[d.type], operands=[a, bm, dot.operands[2]],
                                 attrs=attrs, loc=dot.location)
        wait = create(TTNG.WARP_GROUP_DOT_WAIT, results=[d.type, a.type, bm.type],
                                   operands=[wg.results[0], a, bm],
                                   attrs={"pendings": ir.IntegerAttr.get(i32, 0)}, loc=dot.location)
    d.replace_all_uses_with(wait.results[0])
    dot.operation.erase()


def _accelerate_v3(dot, num_warps: int, warps) -> None:
    """`dot` on wgmma with warpsPerCTA `warps` (chained dots, as attention's, put every warp
    along M, as warpsPerTileV3 does: _plan)."""
    shape = mu.shape_of(dot.results[0].type)
    elem = mu.elem_str(dot.operands[0].type)
    bits = mu.elem_bits(elem)
    mma = NvidiaMma(warps, (16, instr_n_v3(shape, num_warps, elem), 256 // bits), (3, 0))
    if _from_dot(dot.operands[0]):  # RS wgmma: A as mma.sync's m16k16 (tf32: m16k8) fragments
        a = _convert(dot.operands[0], DotOperand(0, mma, 32 // bits), before=dot, loc=dot.location)
    else:
        a = _stage_operand_v3(dot, 0)
    bm = _stage_operand_v3(dot, 1)
    _accumulator(dot, mma)
    _to_warp_group_dot(dot, a, bm)


def _plan(dots, num_warps: int, cc: int, wgmma: bool) -> list:
    """Per dot of `dots`: ("v3", warps) / ("v2", warps) / ("fma", None), decided from the last
    dot to the first as Triton's greedy AccelerateMatmul rewrites them (a chained mma.sync dot
    takes the warps of one decided before it: warps_per_tile)."""
    plan, decided = [None] * len(dots), []
    for i in reversed(range(len(dots))):
        dot = dots[i]
        shape = mu.shape_of(dot.results[0].type)
        if wgmma and wgmma_supported(dot, cc, num_warps):
            warps = (num_warps, 1) if _slice_has_other_dot(dot) else warps_per_tile_v3(shape, num_warps)
            plan[i] = ("v3", warps)
        elif mma_supported(dot, cc):
            warps = tuple(warps_per_tile(dot, shape, num_warps, decided))
            plan[i] = ("v2", warps)
        else:
            plan[i] = ("fma", None)
            continue
        decided.append((dot.operation, warps))
    return plan


def accelerate(module, num_warps: int, cc: int = 90, wgmma: bool = True) -> int:
    """Rewrite every mma-able tt.dot of the module (see the module docstring); returns how many.
    wgmma=False keeps every dot on mma.sync (the `disable_mma_v3` option)."""
    dots = [op.opview for func in module.body.operations for op in walk(func) if op.name == TT.DOT]
    plan = _plan(dots, num_warps, cc, wgmma)
    n = 0
    for dot, (kind, warps) in zip(dots, plan):
        if kind == "v3":
            _accelerate_v3(dot, num_warps, warps)
            n += 1
            continue
        if kind == "fma":
            _fma(dot, num_warps)
            continue
        shape = mu.shape_of(dot.results[0].type)
        instr = (16, 8) if len(shape) == 2 else (1, 16, 8)
        mma = NvidiaMma(tuple(warps), instr)
        _stage_operand(dot, 0, mma)
        _stage_operand(dot, 1, mma)
        _accumulator(dot, mma)
        n += 1
    return n
