"""TTGIR pass: descriptor loads, stores and reductions become TMA copies through shared memory (Triton's TMALowering).

Every `tt.descriptor_load` the pipeliner left becomes a TMA copy into a shared buffer waited on
through an mbarrier and read back into its register layout, every `tt.descriptor_store` /
`tt.descriptor_reduce` a TMA store / reduction of a shared tile, every `tt.make_tensor_descriptor` a
tensormap the program writes into its global scratch, and the module's `ttb.tma` record gets each
TMA parameter's swizzle and box (lib/Dialect/TritonNvidiaGPU/Transforms/TMALowering.cpp).
A load whose value is only staged back into a wgmma operand tile of the copy's own type (attention's
Q) is not read back: the dots read the copy's tile, as in Triton's TTGIR, and the copy is waited for
only before the first op that reads it.

A store in the body of an `scf.for` that runs at more than one stage (its `tt.num_stages`, else the
kernel's) is deferred as Triton's pipelineTMAStores defers it (Pipeliner/TMAStoresPipeline.cpp):
the tile is allocated once before the loop (one per shape and element type), each iteration
waits for the previous TMA store to have read it just before writing it again (`ttg.local_store`),
and one wait follows the loop. The store then drains while the next iteration runs (a
persistent kernel's next tile) instead of being waited for at once.

A descriptor's CUtensorMap has one swizzle for all its loads: the `#ttg.nvmma_shared` encoding
Triton gives its block (NVMMASharedEncodingAttr::get, `nvmma_for_operand`; unswizzled when the
block's rows are under 32 bytes), which is also what a wgmma operand ring of the block gets (the
pipeliner only takes loads whose ring has it).
"""

from __future__ import annotations

from functools import partial

from ttbuild import tma
from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.mma_layout import nvmma_for_operand
from ttbuild.backend.ir.builders import create, tma_copy_attrs, tma_copy_operands, wait_barrier_attrs
from ttbuild.backend.ir.encodings import NvmmaShared
from ttbuild.backend.ir.ops import ARITH, ATTR, SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import ancestor_in, walk
from ttbuild.backend.ir.types import barrier_type, memdesc_type
from ttbuild.backend.ttgir.pipeline.wgmma_waits import erase_fence_after, retarget

ir = mu.ir


def _op(loc, name, results, operands, attrs=None):
    """An op at the current insertion point (partial(_op, loc): the ops of one rewrite)."""
    return create(name, results=results, operands=operands, attrs=attrs or {}, loc=loc)


def _store_wait(op) -> None:
    """`ttng.async_tma_store_wait {pendings = 0}` through `op` (a partial of _op): every TMA store
    this thread issued has read its shared tile."""
    op(TTNG.ASYNC_TMA_STORE_WAIT, [], [], {"pendings": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 0)})


def _fence(op) -> None:
    """`ttng.fence_async_shared` (CTA scope) through `op`: this thread's shared writes are visible
    to the TMA unit."""
    op(TTNG.FENCE_ASYNC_SHARED, [], [], {"bCluster": ir.BoolAttr.get(False)})


def encoding(block, elem: str) -> NvmmaShared:
    """The shared encoding TMA writes `block` in (see the module docstring)."""
    bits = mu.elem_bits(elem)
    return nvmma_for_operand(block, (1, 0), bits) or NvmmaShared(0, False, bits)


def _lower(load) -> None:
    block, elem = mu.tensordesc_block(load.operands[0].type)
    enc = encoding(block, elem)
    i32, i1 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
    loc = load.location

    op = partial(_op, loc)

    with ir.InsertionPoint(load):
        buf = op(TTG.LOCAL_ALLOC, [memdesc_type(block, elem, None, enc.attr())], []).results[0]
        bar = op(TTG.LOCAL_ALLOC, [barrier_type()], []).results[0]
        op(TTNG.INIT_BARRIER, [], [bar], {"count": ir.IntegerAttr.get(i32, 1)})
        true = op(ARITH.CONSTANT, [i1], [], {"value": ir.IntegerAttr.get(i1, 1)}).results[0]
        nbytes = mu.elem_bits(elem) // 8
        for d in block:
            nbytes *= d
        op(TTNG.BARRIER_EXPECT, [], [bar, true], {"size": ir.IntegerAttr.get(i32, nbytes)})
        coords = list(load.operands)[1:]
        op(TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL, [], tma_copy_operands(load.operands[0], coords, buf, bar, true),
           tma_copy_attrs(len(coords)))
        zero = op(ARITH.CONSTANT, [i32], [], {"value": ir.IntegerAttr.get(i32, 0)}).results[0]
        tiles = _restaged(load.results[0], buf.type)
        if not tiles:
            op(TTNG.WAIT_BARRIER, [], [bar, zero], wait_barrier_attrs())
            val = op(TTG.LOCAL_LOAD, [load.results[0].type], [buf]).results[0]
            op(TTNG.INVAL_BARRIER, [], [bar])
            op(TTG.LOCAL_DEALLOC, [], [bar])
            op(TTG.LOCAL_DEALLOC, [], [buf])
    if tiles:
        _read_in_place(tiles, buf, bar, zero, op, load.operation.block)
    else:
        load.results[0].replace_all_uses_with(val)
    load.operation.erase()


def _read_in_place(tiles, buf, bar, zero, op, block) -> None:
    """The dots that read `tiles` (the operand tiles _restaged found) read the copy's tile `buf`
    instead: no round trip through registers. The copy is waited for on `bar` (parity `zero`)
    just before the first op of `block` that reads it (a pipelined loop: after that loop's
    prologue copies), so it lands while theirs are issued and in flight."""
    with ir.InsertionPoint(_first_reader(block, tiles)):
        op(TTNG.WAIT_BARRIER, [], [bar, zero], wait_barrier_attrs())
        op(TTNG.INVAL_BARRIER, [], [bar])
        op(TTG.LOCAL_DEALLOC, [], [bar])
    for tile in tiles:
        retarget(tile.results[0], buf)  # a wgmma wait passing the tile through takes the copy's type
        erase_fence_after(tile)  # no generic-proxy write left to fence
        tile.erase()


def _first_reader(block, tiles):
    """The first op of `block` that reads one of `tiles` (itself or through an op it nests)."""
    pos = {o.operation: k for k, o in enumerate(block.operations)}
    return min((ancestor_in(u.owner, pos) for t in tiles for u in t.results[0].uses), key=pos.__getitem__)


def _restaged(value, tile_type) -> list:
    """The `ttg.local_alloc`s that are `value`'s only readers when each writes it into a tile of
    `tile_type` (the TMA copy's tile, immutable) and nothing but a dot reads that tile, else [].
    Then the dots may read the copy's tile: TMA wrote it in the async proxy that wgmma reads, and
    the mbarrier wait ordered both (a Q tile of attention, loaded once and read by every QK^T).
    Only for a load at the kernel's top level, which runs once: a load in a loop would rewrite the
    tile while another warpgroup's wgmma of the previous iteration may still read it."""
    if value.owner.parent.name not in (TT.FUNC, TTG.WARP_SPECIALIZE):  # the consumers' region: the kernel's body
        return []
    want = str(tile_type).replace(", mutable>", ">")
    users = [u.owner.operation for u in value.uses]
    if not users or any(u.name != TTG.LOCAL_ALLOC or str(u.results[0].type) != want for u in users):
        return []
    readers = [(r.owner.operation, r.operand_number) for u in users for r in u.results[0].uses]
    if any(op.name not in (TTNG.WARP_GROUP_DOT, TTNG.WARP_GROUP_DOT_WAIT)
           or op.name == TTNG.WARP_GROUP_DOT_WAIT and next(iter(op.results[k].uses), None) is not None
           for op, k in readers):
        return []  # only dots, and waits whose passed-through tile nothing reads (its type changes)
    return users


# tensormap.replace's elemtype per descriptor element type (PTX ISA, "tensormap.replace": .u8 0,
# .u16 1, .u32 2, .s32 3, .u64 4, .s64 5, .f16 6, .f32 7, .f64 9, .bf16 10; not the driver API's
# CUtensorMapDataType numbering), as Triton 3.6 picks them (8-bit types as u8, 16-bit integers as
# u16; 32- and 64-bit integers by the signedness the descriptor type carries).
ELEM_TYPES = {"i1": 0, "si8": 0, "ui8": 0, "f8E4M3FN": 0, "f8E5M2": 0, "si16": 1, "ui16": 1, "ui32": 2, "si32": 3,
              "ui64": 4, "si64": 5, "f16": 6, "f32": 7, "f64": 9, "bf16": 10}
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle
MAP_BYTES = 128  # a CUtensorMap


def _through_conversions(v):
    while isinstance(v, ir.OpResult) and v.owner.name == TTG.CONVERT_LAYOUT:
        v = v.owner.operands[0]
    return v


def _column_half(value):
    """(X, k, truncf or None) when `value` is (the truncf of) half k of tutorial 09's subtiled
    epilogue, `split(permute(reshape(X, (M, 2, N / 2)), (0, 2, 1)))`: columns k N/2 .. of X
    [M, N], through any layout conversions; else None."""
    trunc = None
    if isinstance(value, ir.OpResult) and value.owner.name == ARITH.TRUNCF:
        trunc, value = value.owner, value.owner.operands[0]
    if not (isinstance(value, ir.OpResult) and value.owner.name == TT.SPLIT):
        return None
    k = value.result_number
    t = _through_conversions(value.owner.operands[0])
    if not (isinstance(t, ir.OpResult) and t.owner.name == TT.TRANS
            and [int(x) for x in mu.props(t.owner)["order"]] == [0, 2, 1]):
        return None
    r = t.owner.operands[0]
    if not (isinstance(r, ir.OpResult) and r.owner.name == TT.RESHAPE):
        return None
    x = _through_conversions(r.owner.operands[0])
    m, two, half = mu.shape_of(r.type)
    if two != 2 or tuple(mu.shape_of(x.type)) != (m, 2 * half):
        return None
    return x, k, trunc


class _Deferred:
    """The loops whose TMA stores wait at their next write (module docstring): per loop, its
    shared tiles by type, placed before the loop; `close` puts the wait and the deallocs after
    each loop."""

    def __init__(self, num_stages: int):
        self.num_stages = num_stages
        self.loops: dict = {}  # loop Operation -> {memdesc type text: tile}

    def loop_of(self, store):
        """The innermost `scf.for` around `store` (through `scf.if`s), when it runs at more than
        one stage (Triton's getNumStagesOrDefault > 1); else None."""
        p = store.operation.parent
        while p is not None and p.name != TT.FUNC:
            if p.name == SCF.FOR:
                attrs = p.attributes
                stages = mu.int_attr(attrs[ATTR.NUM_STAGES]) if ATTR.NUM_STAGES in attrs else self.num_stages
                return p if stages > 1 else None
            if p.name != SCF.IF:
                return None
            p = p.parent
        return None

    def tile(self, loop, tile_type, loc):
        """The loop's shared tile of `tile_type` (allocated before the loop on first ask)."""
        tiles = self.loops.setdefault(loop, {})
        key = str(tile_type)
        if key not in tiles:
            tiles[key] = create(TTG.LOCAL_ALLOC, [tile_type], [], loc=loc, ip=ir.InsertionPoint(loop)).results[0]
        return tiles[key]

    def written(self, op, loop, tile_type, value, loc):
        """A shared tile of `tile_type` holding `value`, fenced for the async proxy, at op's
        insertion point: the loop's tile, written after the wait (`loop` not None), else a new
        local_alloc of `value`."""
        if loop is not None:
            buf = self.tile(loop, tile_type, loc)
            self.write(op, value, buf)
            return buf
        buf = op(TTG.LOCAL_ALLOC, [tile_type], [value]).results[0]
        _fence(op)
        return buf

    def write(self, op, value, buf) -> None:
        """At op's insertion point: wait for the tile's previous TMA store to have read it, write
        `value` into it, fence it for the async proxy."""
        _store_wait(op)
        op(TTG.LOCAL_STORE, [], [value, buf])
        _fence(op)

    def close(self) -> None:
        for loop, tiles in self.loops.items():
            op = partial(_op, loop.location)
            with ir.InsertionPoint.after(loop):
                _store_wait(op)
                for buf in tiles.values():
                    op(TTG.LOCAL_DEALLOC, [], [buf])


def _store_subtiles(stores, deferred: _Deferred) -> list:
    """Stores of the halves of one accumulator (see _column_half) write one shared tile of the
    whole, from the accumulator's own layout, and TMA-store its column halves (sub-tiles of
    whole swizzle blocks): no register shuffle of reshape / permute / split, one tile written
    (Triton keeps those in registers and stores with stmatrix). Returns the stores left."""
    groups: list = []  # (x, truncf, encoding, [(store, half)]); Values compare by ==, not id
    for st in stores:
        got = _column_half(st.operands[1])
        if got is None:
            continue
        x, k, trunc = got
        block, elem = mu.tensordesc_block(st.operands[0].type)
        m, n = mu.shape_of(x.type)
        enc = encoding((m, n), elem)
        if tuple(block) != (m, n // 2) or not enc.swizzle or (n // 2) % enc.block_elems:
            continue
        if trunc is not None and mu.elem_str(trunc.results[0].type) != elem or trunc is None and mu.elem_str(x.type) != elem:
            continue
        group = next((g for g in groups if g[0] == x), None)
        if group is None:
            group = (x, trunc, enc, [])
            groups.append(group)
        group[3].append((st, k))
    done = set()
    for x, trunc, enc, members in groups:
        first, last = members[0][0], members[-1][0]
        if first.operation.block != last.operation.block:
            continue
        loc = first.location
        m, n = mu.shape_of(x.type)
        elem = mu.tensordesc_block(first.operands[0].type)[1]

        op = partial(_op, loc)

        loop = deferred.loop_of(first)
        mutable = ", mutable" if loop is not None else ""
        with ir.InsertionPoint(first):
            y = x
            if trunc is not None:
                t = ir.RankedTensorType(x.type)
                y = op(ARITH.TRUNCF, [ir.RankedTensorType.get(t.shape, trunc.results[0].type.element_type, t.encoding)],
                       [x], {"fastmath": ir.Attribute.parse("#arith.fastmath<none>")}).results[0]
            whole = ir.Type.parse(f"!ttg.memdesc<{m}x{n}x{elem}, {enc.attr()}, #ttg.shared_memory{mutable}>")
            buf = deferred.written(op, loop, whole, y, loc)
        for st, k in members:
            half = ir.Type.parse(f"!ttg.memdesc<{m}x{n // 2}x{elem}, {enc.attr()}, #ttg.shared_memory{mutable}, {m}x{n}>")
            with ir.InsertionPoint(st):
                view = op(TTG.MEMDESC_SUBSLICE, [half], [buf],
                          {"offsets": ir.Attribute.parse(f"array<i32: 0, {k * (n // 2)}>")}).results[0]
                op(TTNG.ASYNC_TMA_COPY_LOCAL_TO_GLOBAL, [], [st.operands[0], *list(st.operands)[2:], view])
            done.add(id(st))
        if loop is None:
            with ir.InsertionPoint.after(last):
                _store_wait(op)
        for st, _ in members:
            st.operation.erase()
    return [st for st in stores if id(st) not in done]


def _erase_dead(func) -> None:
    """Pure ops whose results lost every use (the register epilogue a fused store left)."""
    changed = True
    while changed:
        changed = False
        for op in reversed(walk(func)):
            if op.name in (TT.SPLIT, TT.TRANS, TT.RESHAPE, TTG.CONVERT_LAYOUT, ARITH.TRUNCF) and all(
                    next(iter(r.uses), None) is None for r in op.results):
                op.operation.erase()
                changed = True


def _lower_store(store, deferred: _Deferred) -> None:
    """`tt.descriptor_store` / `tt.descriptor_reduce`: the block into a shared tile in the
    descriptor's encoding, the async-proxy fence, one TMA store (ttng.async_tma_copy_local_to_global)
    or reduction (ttng.async_tma_reduce, the op's `kind` kept), and its wait (the tile may be
    reused after it; Triton's TMALowering, TMAStoreLowering and TMAReduceLowering). In a
    pipelined loop the wait moves before the tile's next write (_Deferred)."""
    desc, value, coords = store.operands[0], store.operands[1], list(store.operands)[2:]
    block, elem = mu.tensordesc_block(desc.type)
    enc = encoding(block, elem)
    loc = store.location

    op = partial(_op, loc)

    conv = value.owner if isinstance(value, ir.OpResult) and value.owner.name == TTG.CONVERT_LAYOUT else None
    if conv is not None:  # the tile is written from the value's own layout: no register shuffle first
        value = conv.operands[0]
    loop = deferred.loop_of(store)
    with ir.InsertionPoint(store):
        dims = "x".join(str(d) for d in block)
        mutable = ", mutable" if loop is not None else ""
        tile = ir.Type.parse(f"!ttg.memdesc<{dims}x{elem}, {enc.attr()}, #ttg.shared_memory{mutable}>")
        buf = deferred.written(op, loop, tile, value, loc)
        if store.name == TT.DESCRIPTOR_REDUCE:
            op(TTNG.ASYNC_TMA_REDUCE, [], [desc, *coords, buf], {"kind": mu.props(store)["kind"]})
        else:
            op(TTNG.ASYNC_TMA_COPY_LOCAL_TO_GLOBAL, [], [desc, *coords, buf])
        if loop is None:
            _store_wait(op)
    store.operation.erase()
    if conv is not None and next(iter(conv.results[0].uses), None) is None:
        conv.operation.erase()


def _make_descriptor(make, offset: int) -> None:
    """`tt.make_tensor_descriptor` -> a tensormap written by the program into its global scratch
    slot at `offset` (Triton's TMALowering: ttg.global_scratch_alloc, ttng.tensormap_create with
    box, extents and element strides innermost first and byte strides, the acquire fence, and
    ttng.reinterpret_tensor_descriptor as the descriptor)."""
    block, elem = mu.tensordesc_block(make.results[0].type)
    map_elem = mu.tensordesc_block(make.results[0].type, signed=True)[1]
    rank = len(block)
    enc = encoding(block, elem)
    box = tma.box(block, enc.elem_bits, enc.swizzle)
    base, shape, strides = make.operands[0], list(make.operands)[1:1 + rank], list(make.operands)[1 + rank:]
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    loc = make.location
    p = mu.props(make)
    nan = "padding" in p and mu.int_attr(p["padding"]) == 2

    op = partial(_op, loc)

    def const(t, v):
        return op(ARITH.CONSTANT, [t], [], {"value": ir.IntegerAttr.get(t, v)}).results[0]

    with ir.InsertionPoint(make):
        ptr = op(TTG.GLOBAL_SCRATCH_ALLOC, [ir.Type.parse("!tt.ptr<i8>")], [],
                 {"alignment": ir.IntegerAttr.get(i32, MAP_BYTES), "nbytes": ir.IntegerAttr.get(i32, MAP_BYTES),
                  ATTR.GLOBAL_SCRATCH_OFFSET: ir.IntegerAttr.get(i32, offset)}).results[0]
        eb = const(i64, mu.elem_bits(elem) // 8)
        byte_strides = [op(ARITH.MULI, [i64], [s_, eb], {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")}
                           ).results[0] for s_ in reversed(strides[:-1])]
        boxes = [const(i32, b) for b in reversed(box)]
        ones = [const(i32, 1) for _ in range(rank)]
        op(TTNG.TENSORMAP_CREATE, [], [ptr, base, *boxes, *reversed(shape), *byte_strides, *ones],
           {"elem_type": ir.IntegerAttr.get(i32, ELEM_TYPES[map_elem]), "fill_mode": ir.IntegerAttr.get(i32, 1 if nan else 0),
            "interleave_layout": ir.IntegerAttr.get(i32, 0),
            "swizzle_mode": ir.IntegerAttr.get(i32, SWIZZLE_MODES[enc.swizzle]),
            "operandSegmentSizes": ir.Attribute.parse(f"array<i32: 1, 1, {rank}, {rank}, {rank - 1}, {rank}>")})
        op(TTNG.TENSORMAP_FENCEPROXY_ACQUIRE, [], [ptr])
        desc = op(TTNG.REINTERPRET_TENSOR_DESCRIPTOR, [make.results[0].type], [ptr]).results[0]
    make.results[0].replace_all_uses_with(desc)
    make.operation.erase()


def lower_tma(module, num_stages: int = 1) -> int:
    """Lower the remaining `tt.descriptor_load`s of every tt.func and fill the module's
    ttbuild.tma.MODULE_ATTR; returns how many loads were lowered here. `num_stages` (the
    variant's) decides, for a loop without its own `tt.num_stages`, whether its stores are
    deferred (module docstring)."""
    count = 0
    args = []
    for func in module.body.operations:
        if func.operation.name != TT.FUNC:
            continue
        loads = [op for op in walk(func) if op.name == TT.DESCRIPTOR_LOAD]
        for load in loads:
            _lower(load)
        count += len(loads)
        stores = [op for op in walk(func) if op.name == TT.DESCRIPTOR_STORE]
        deferred = _Deferred(num_stages)
        left = _store_subtiles(stores, deferred)
        if len(left) != len(stores):
            _erase_dead(func)
        for store in left + [op for op in walk(func) if op.name == TT.DESCRIPTOR_REDUCE]:
            _lower_store(store, deferred)
        deferred.close()
        makes = []
        for op in walk(func):
            if op.name == TT.MAKE_TENSOR_DESCRIPTOR:
                if next(iter(op.results[0].uses), None) is None:
                    op.operation.erase()  # only stored through (the pointer form): no map to write
                else:
                    makes.append(op)
        for k, make in enumerate(makes):
            _make_descriptor(make, k * MAP_BYTES)
        if makes:  # the per-program scratch the runtime provides (Triton's global_scratch)
            module.operation.attributes[ATTR.GLOBAL_SCRATCH_SIZE] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), len(makes) * MAP_BYTES)
            module.operation.attributes[ATTR.GLOBAL_SCRATCH_ALIGNMENT] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), MAP_BYTES)
        body = func.regions[0].blocks[0]
        args += [a for a in body.arguments if str(a.type).startswith("!tt.tensordesc<")]
    attrs = module.operation.attributes
    if tma.MODULE_ATTR not in attrs:
        return count
    entries = tma.decode_attr(ir.StringAttr(attrs[tma.MODULE_ATTR]).value)
    it = iter(args)
    for e in entries:
        if e is None:
            continue
        block, elem = mu.tensordesc_block(next(it).type)
        bits = mu.elem_bits(elem)
        sw = encoding(block, elem).swizzle
        e["swizzle"], e["box"] = sw, list(tma.box(block, bits, sw))
    attrs[tma.MODULE_ATTR] = ir.StringAttr.get(tma.encode_attr(entries))
    return count
