"""LLIR rules for tensor descriptors made in the kernel (`tl.make_tensor_descriptor` on sm_90).

Ops: `ttg.global_scratch_alloc`, `ttng.tensormap_create`, `ttng.tensormap_fenceproxy_acquire`,
`ttng.reinterpret_tensor_descriptor`.

As Triton 3.6 lowers them (third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/TMAToLLVM.cpp,
lib/Conversion/TritonGPUToLLVM/Utility.h getGlobalScratchPtr; reference PTX of tutorial 09's
device-descriptor matmul):
- global scratch: a module with `ttg.global_scratch_memory_size = SIZE` gives every kernel one
  more parameter after the tt.func's (ttbuild.backend.llir.emit), `ptr addrspace(1)`, the base
  of a buffer of which program (x, y, z) owns bytes [SIZE * (x + gx * (y + gy * z)), + SIZE),
  gx, gy the grid (`%nctaid`); `ttg.global_scratch_alloc` is that program's base plus the op's
  `ttg.global_scratch_memory_offset` (the program's base is computed once, in the entry block,
  in 64 bits);
- the create writes a CUtensorMap into such a slot: warp 0 zeroes a 128-byte template at the
  start of the kernel's shared scratch (one st.shared.b32 a lane; `ttng.tensormap_create` needs
  128 bytes of scratch, ttbuild.backend.analysis.allocation), `bar.warp.sync`, thread 0 fills it
  with `tensormap.replace.tile.<field>.shared::cta.b1024` (global_address, rank - 1, box_dim,
  global_dim, global_stride in bytes, element_stride per dimension innermost first, elemtype,
  interleave_layout, swizzle_mode, fill_mode: PTX ISA, tensormap.replace), `bar.warp.sync` again (lane
  0's writes visible to the whole warp; Triton has none here), then warp 0 copies it out with
  `tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned`
  (a collective of the warp, PTX ISA 9.7.13.16: a release of the map to the tensormap proxy);
  before the template is written, a CTA barrier when shared memory was read since the last
  one (its bytes may be another op's scratch);
- the acquire: warp 0 (which holds thread 0, the one that issues TMA copies, llir.tma)
  `fence.proxy.tensormap::generic.acquire.gpu [map], 128` on the map's generic address (PTX
  asks for one; Triton passes the global address, the same number for global memory), then
  `cp.async.bulk.commit_group` / `cp.async.bulk.wait_group.read 0` as Triton 3.6 emits them,
  then a CTA barrier: every thread may use the map after it (CUDA programming guide, "Usage of
  a Modified Tensor Map"), and the template's bytes are free again;
- `ttng.reinterpret_tensor_descriptor`: the map's generic address as the i64 a
  `!tt.tensordesc` value is (ttbuild.backend.llir.context.llvm_type), what
  `ttng.async_tma_copy_global_to_local` takes as its map.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild import tma
from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import ARITH, ATTR, TTG, TTNG
from ttbuild.backend.llir.context import I8, I32, I64
from ttbuild.backend.llir.dot import shared_layout
from ttbuild.backend.llir.tma import leader
from ttbuild.errors import CompilationError, NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

MAP_BYTES = 128  # a CUtensorMap; also its alignment in global and shared memory
OFFSET_ATTR = ATTR.GLOBAL_SCRATCH_OFFSET
REPLACE = "tensormap.replace.tile.{field}.shared::cta.b1024.{bits}"
CP_FENCEPROXY = "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
ACQUIRE = "fence.proxy.tensormap::generic.acquire.gpu"
GENERIC = ir.PointerType()  # `ptr`: addrspace 0, generic addresses

# The PTX `.elemtype` codes of tensormap.replace (PTX ISA, Triton's TMA_ELEMENT_TYPES;
# not the CUDA driver's CUtensorMapDataType, where f64 is 8 and bf16 is 9): per element type of
# the map's global address, the codes that describe it.
ELEM_CODES = {"i8": {0}, "f8E4M3FN": {0}, "f8E5M2": {0}, "i16": {1}, "i32": {2, 3}, "i64": {4, 5},
              "f16": {6}, "f32": {7, 8, 11, 12}, "f64": {9}, "bf16": {10}}
CODE_NAMES = {0: "u8", 1: "u16", 2: "u32", 3: "s32", 4: "u64", 5: "s64", 6: "f16", 7: "f32", 8: "f32.ftz",
              9: "f64", 10: "bf16", 11: "tf32", 12: "tf32.ftz"}
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}  # swizzle_mode -> bytes


def _int(op, name: str) -> int:
    p = mu.props(op)
    if name not in p:
        raise CompilationError(f"{op.operation.name} without {name}", stage="llir")
    return mu.int_attr(p[name])


def _warp0(ctx) -> ir.Value:
    """i1: this thread is in warp 0 (tid.x < 32), the warp that writes and acquires maps."""
    return ctx.thread_is("<", 32, "tmap_warp0")


def program_scratch(ctx) -> ir.Value:
    """`ptr addrspace(1)`: this program's bytes of the global scratch, the kernel's extra
    parameter + global_scratch_size * (ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)),
    in 64 bits (computed once, in the entry block)."""
    if ctx.global_scratch is None or ctx.global_scratch_size <= 0:
        raise CompilationError("ttg.global_scratch_alloc in a module without ttg.global_scratch_memory_size "
                               "(the ttgir stage sets it with the allocation offsets)", stage="llir")

    def make():
        regs = {n: ctx.sreg(n) for n in ("ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x", "nctaid.y")}
        b = ctx.builder
        with b.goto_block(b.function.entry_basic_block):
            w = {n: b.zext(v, I64) for n, v in regs.items()}
            yz = b.add(b.mul(w["ctaid.z"], w["nctaid.y"]), w["ctaid.y"])
            pid = b.add(b.mul(yz, w["nctaid.x"]), w["ctaid.x"], name="scratch_program")
            off = b.mul(pid, ir.Constant(I64, ctx.global_scratch_size))
            return b.gep(ctx.global_scratch, [off], source_etype=I8, name="scratch_base")
    return ctx.memo(("global_scratch_base",), make)


@rule(TTG.GLOBAL_SCRATCH_ALLOC)
def global_scratch_alloc(ctx, op):
    """This program's scratch base + the op's `ttg.global_scratch_memory_offset`."""
    p = mu.props(op)
    if "third_party_allocation" in p:
        raise NotSupportedYet("ttg.global_scratch_alloc with third_party_allocation (profiler scratch)", None, "llir")
    attrs = op.operation.attributes
    if OFFSET_ATTR not in attrs:
        raise CompilationError(f"ttg.global_scratch_alloc without {OFFSET_ATTR} (the ttgir stage places it)",
                               stage="llir")
    off, nbytes = mu.int_attr(attrs[OFFSET_ATTR]), _int(op, "nbytes")
    align = _int(op, "alignment") if "alignment" in p else 1
    base = program_scratch(ctx)
    if off < 0 or off + nbytes > ctx.global_scratch_size or (align > 1 and off % align):
        raise CompilationError(f"ttg.global_scratch_alloc of {nbytes} bytes at offset {off} (alignment {align}) "
                               f"does not fit the {ctx.global_scratch_size} bytes of a program's global scratch",
                               stage="llir")
    return ctx.builder.gep(base, [ir.Constant(I64, off)], source_etype=I8) if off else base


def _segments(op, n: int) -> list[int]:
    """operandSegmentSizes of a ttng.tensormap_create: [1, 1, R, R, R - 1, R], 1 <= R <= 5."""
    p = mu.props(op)
    if "operandSegmentSizes" not in p:
        raise CompilationError("ttng.tensormap_create without operandSegmentSizes", stage="llir")
    sizes = list(mu.ir.DenseI32ArrayAttr(p["operandSegmentSizes"]))
    r = sizes[2] if len(sizes) == 6 else 0
    if sizes != [1, 1, r, r, r - 1, r] or not 1 <= r <= 5 or sum(sizes) != n:
        raise CompilationError(f"ttng.tensormap_create with operand segments {sizes} (expected "
                               "[1, 1, R, R, R - 1, R], R the rank, 1 to 5)", stage="llir")
    return sizes


def _check_elem_type(op, code: int) -> None:
    """The map's elemtype code describes the element type of its global address (a code of the
    CUDA driver's enum instead of PTX's would read the wrong element size)."""
    elem = mu.pointee(mu.elem_str(op.operands[1].type))
    allowed = ELEM_CODES.get(elem)
    if allowed is not None and code not in allowed:
        want = " or ".join(f"{c} ({CODE_NAMES[c]})" for c in sorted(allowed))
        raise CompilationError(f"ttng.tensormap_create of {elem} elements with elem_type = {code} "
                               f"({CODE_NAMES.get(code, 'unknown')}): PTX's tensormap elemtype for {elem} is {want} "
                               "(PTX ISA tensormap.replace, Triton's TMA_ELEMENT_TYPES)", stage="llir")


def _replace(ctx, lead, tmpl, field: str, *, ordinal: int | None = None, value=None, imm: int | None = None):
    """One `tensormap.replace.tile.<field>` on the shared template by the leader thread: a
    register value (`r` for i32, `l` for i64) or an immediate, after the dimension ordinal."""
    if value is not None:
        bits = "b64" if value.type == I64 else "b32"
        if value.type not in (I32, I64):
            raise CompilationError(f"tensormap {field} operand of type {value.type}", stage="llir")
    else:
        bits = "b32"
    text = "@$0 " + REPLACE.format(field=field, bits=bits) + " [$1]"
    if ordinal is not None:
        text += f", {ordinal}"
    args, cons = [lead, tmpl], "b,l"
    if value is not None:
        text += ", $2;"
        args.append(value)
        cons += ",l" if bits == "b64" else ",r"
    else:
        text += f", {imm};"
    ctx.asm_effect(text, cons, args)


def _warp_sync(ctx) -> None:
    """`bar.warp.sync -1`: the lanes of each warp meet, their shared-memory writes ordered
    before the others' later accesses (PTX ISA, bar.warp.sync)."""
    fn = ctx.intrinsic("llvm.nvvm.bar.warp.sync", ir.VoidType(), [I32])
    ctx.builder.call(fn, [ir.Constant(I32, -1)])


@rule(TTNG.TENSORMAP_CREATE)
def tensormap_create(ctx, op, desc_ptr, global_address, *rest):
    """Warp 0 builds the map in a 128-byte shared template and copies it out with a release to
    the tensormap proxy (the module docstring)."""
    b = ctx.builder
    _, _, r, _, _, _ = _segments(op, 2 + len(rest))
    box, dims = rest[:r], rest[r:2 * r]
    strides, elem_strides = rest[2 * r:3 * r - 1], rest[3 * r - 1:]
    elem_type = _int(op, "elem_type")
    fields = {"interleave_layout": _int(op, "interleave_layout"), "swizzle_mode": _int(op, "swizzle_mode"),
              "fill_mode": _int(op, "fill_mode")}
    _check_elem_type(op, elem_type)
    for v in (*box, *dims, *elem_strides):
        if v.type != I32:
            raise CompilationError(f"ttng.tensormap_create: box, global_dim and element_stride operands must be "
                                   f"i32, got {v.type}", stage="llir")
    if any(v.type != I64 for v in strides):
        raise CompilationError("ttng.tensormap_create: global_stride operands must be i64 (bytes)", stage="llir")

    ctx.before_smem_write()  # the template's bytes may be scratch others read since the last barrier
    ctx.align_smem(MAP_BYTES)
    warp0, lead = _warp0(ctx), leader(ctx)
    tmpl32 = b.ptrtoint(ctx.smem(0), I32)
    lane_addr = b.add(tmpl32, b.shl(ctx.sreg("tid.x"), ir.Constant(I32, 2)))
    ctx.asm_effect("@$0 st.shared.b32 [$1], 0;", "b,r", [warp0, lane_addr])
    _warp_sync(ctx)
    tmpl = b.zext(tmpl32, I64)
    _replace(ctx, lead, tmpl, "global_address", value=b.ptrtoint(global_address, I64))
    _replace(ctx, lead, tmpl, "rank", imm=r - 1)
    for i, v in enumerate(box):
        _replace(ctx, lead, tmpl, "box_dim", ordinal=i, value=v)
    for i, v in enumerate(dims):
        _replace(ctx, lead, tmpl, "global_dim", ordinal=i, value=v)
    for i, v in enumerate(strides):
        _replace(ctx, lead, tmpl, "global_stride", ordinal=i, value=v)
    for i, v in enumerate(elem_strides):
        _replace(ctx, lead, tmpl, "element_stride", ordinal=i, value=v)
    _replace(ctx, lead, tmpl, "elemtype", imm=elem_type)
    for name, v in fields.items():
        _replace(ctx, lead, tmpl, name, imm=v)
    _warp_sync(ctx)
    ctx.asm_effect(f"@$0 {CP_FENCEPROXY} [$1], [$2], {MAP_BYTES};", "b,l,l",
         [warp0, b.ptrtoint(desc_ptr, I64), tmpl])
    ctx.after_smem_read()  # whoever writes the template's bytes next waits for a barrier


def _generic(ctx, ptr) -> ir.Value:
    """The generic address (i64) of a global pointer (`cvta.global`)."""
    b = ctx.builder
    return b.ptrtoint(b.addrspacecast(ptr, GENERIC), I64)


@rule(TTNG.TENSORMAP_FENCEPROXY_ACQUIRE)
def tensormap_fenceproxy_acquire(ctx, op, ptr):
    """Warp 0 acquires the map for the tensormap proxy, then a CTA barrier."""
    text = (f"@$0 {ACQUIRE} [$1], {MAP_BYTES};\n\t@$0 cp.async.bulk.commit_group;\n\t"
            "@$0 cp.async.bulk.wait_group.read 0;")
    ctx.asm_effect(text, "b,l", [_warp0(ctx), _generic(ctx, ptr)])
    ctx.barrier()


@rule(TTNG.REINTERPRET_TENSOR_DESCRIPTOR)
def reinterpret_tensor_descriptor(ctx, op, ptr):
    """The map's generic address, the i64 of a tensor descriptor; its TMA copies checked
    against the map's box and swizzle where the create's operands are constants."""
    _check_copies(op)
    return _generic(ctx, ptr)


def _const(v) -> int | None:
    """The value of an `arith.constant` integer, else None."""
    owner = v.owner
    if getattr(owner, "name", None) != ARITH.CONSTANT:  # a block argument's owner is its block
        return None
    try:
        return mu.int_attr(mu.props(owner)["value"])
    except (KeyError, ValueError, TypeError):
        return None


def _create_of(op):
    """The ttng.tensormap_create that writes the map a reinterpret_tensor_descriptor reads, or None."""
    for use in op.operands[0].uses:
        if use.owner.name == TTNG.TENSORMAP_CREATE and use.operand_number == 0:
            return use.owner
    return None


def _check_copies(op) -> None:
    """Each `ttng.async_tma_copy_global_to_local` of this descriptor cuts its block into
    ttbuild.tma.box boxes of its destination's swizzle (llir.tma): the map must have that box
    (innermost first) and swizzle, or the copies would write other bytes than the tile's."""
    create = _create_of(op)
    if create is None:
        return
    block, elem = mu.tensordesc_block(op.results[0].type, "llir")
    r = len(block)
    try:
        sizes = _segments(create, len(create.operands))
    except CompilationError:
        return  # the create's own rule reports it
    if sizes[2] != r:
        raise CompilationError(f"a rank-{sizes[2]} tensormap read as a rank-{r} descriptor", stage="llir")
    box = [_const(v) for v in list(create.operands)[2:2 + r]]
    mode = mu.int_attr(mu.props(create)["swizzle_mode"])
    for use in op.results[0].uses:
        copy = use.owner
        if copy.name != TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL or use.operand_number != 0 or r != 2:
            continue
        p = mu.props(copy)
        n = len(copy.operands)
        sizes = list(mu.ir.DenseI32ArrayAttr(p["operandSegmentSizes"])) if "operandSegmentSizes" in p else None
        at = 2 + sizes[1] if sizes else None
        if at is None or at >= n:
            continue
        try:
            sw = shared_layout(copy.operands[at].type)
        except CompilationError:
            continue  # the copy's own rule reports it
        if not hasattr(sw, "swizzle"):
            continue
        want = tma.box(block, mu.elem_bits(elem), sw.swizzle)[::-1]
        if SWIZZLE_BYTES.get(mode) != sw.swizzle or (None not in box and tuple(box) != tuple(want)):
            raise CompilationError(
                f"the tensormap of a {'x'.join(map(str, block))}x{elem} descriptor has box {box} (innermost first) "
                f"and swizzle_mode {mode}, but its TMA copy into a {sw.swizzle}-byte swizzled tile takes boxes of "
                f"{list(want)} and swizzle_mode {[k for k, v in SWIZZLE_BYTES.items() if v == sw.swizzle]}",
                stage="llir")
