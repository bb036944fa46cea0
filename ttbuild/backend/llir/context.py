"""What every LLIR rule sees: the frozen codegen context, tensor values, and type/index helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import AxisAnalysis
from ttbuild.backend.ir.encodings import Blocked, Slice, parse_encoding
from ttbuild.errors import CompilationError


class BFloatType(ir.types._BaseFloatType):
    """LLVM's `bfloat` (llvmlite has none): constants print as 0xR + the top 16 bits of the f32,
    rounded to nearest even (LLVM LangRef, "Simple Constants")."""
    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        """The LLVM IR spelling of a bf16 constant, `0xRXXXX`, rounded to nearest even from f32."""
        import struct
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return f"0xR{bits & 0xFFFF:04X}"


BFloatType._create_instance()

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64, BF16 = ir.HalfType(), ir.FloatType(), ir.DoubleType(), BFloatType()
GPTR = ir.PointerType(addrspace=1)


def duplicated_dims(layout, shape) -> tuple[Blocked, tuple[int, ...], list[int]]:
    """(blocked parent, its shape, the dimensions whose layout tile exceeds that shape): a slice
    layout's elements are its parent's over the shape with 1s inserted; along the returned
    dimensions several threads (or one thread's wrapped registers) hold the same element."""
    par, pshape = layout, tuple(shape)
    while isinstance(par, Slice):
        pshape = par.parent_shape(pshape)
        par = par.parent
    return par, pshape, [d for d in range(par.rank) if par.tile(d) > pshape[d]]


@dataclass
class TensorVal:
    """A distributed tensor: this thread's elements (llvmlite values), in layout.local_offsets order."""
    elems: list
    layout: Blocked
    shape: tuple[int, ...]


def llvm_type(elem: str) -> ir.Type:
    """MLIR element spelling -> llvmlite type (pointers: `ptr addrspace(1)`; a tensor
    descriptor `!tt.tensordesc<...>`: i64, the generic address of its 128-byte CUtensorMap in
    global memory, ttbuild.tma)."""
    simple = {"f16": F16, "f32": F32, "f64": F64, "bf16": BF16}
    if elem in simple:
        return simple[elem]
    if elem.startswith("!tt.tensordesc<"):
        return I64
    if mu.pointee(elem) is not None:
        return GPTR
    if elem.startswith("i") and elem[1:].isdigit():
        return ir.IntType(int(elem[1:]))
    if elem in ("f8E4M3FN", "f8E5M2"):
        return I8  # fp8 lives in bytes; only tt.fp_to_fp looks inside (Triton does no fp8 arithmetic)
    from ttbuild.errors import NotSupportedYet
    raise NotSupportedYet(f"element type {elem}", None, "llir")


def layout_of(value) -> "Blocked | Slice":
    enc = mu.encoding_str(value.type)
    if enc is None:
        raise CompilationError(f"tensor without an encoding in TTGIR: {value.type}", stage="llir")
    try:
        return parse_encoding(enc)
    except ValueError:
        from ttbuild.errors import NotSupportedYet
        raise NotSupportedYet(f"encoding {enc}", None, "llir") from None


@dataclass(frozen=True)
class Partition:
    """The warps a region of a `ttg.warp_specialize` op runs on: threads first_thread ..
    first_thread + threads - 1, which meet on named barrier `barrier_id`. The region is lowered
    as a CTA of its own: its thread ids count from first_thread (Ctx.sreg)."""
    first_thread: int
    threads: int
    barrier_id: int


@dataclass(frozen=True)
class Ctx:
    """Frozen per-function codegen context: the builder, target facts and the axis analysis."""
    builder: ir.IRBuilder
    module: ir.Module
    num_warps: int
    axis: AxisAnalysis
    fp_fusion: bool
    env: dict = field(default_factory=dict, compare=False)      # MLIR value -> llvmlite value / TensorVal
    run_block: object = None   # run_block(block, args) -> terminator operands, lowered (emit.py)
    # Tensor-core kernels compute element indices where they are used (see indices): their
    # per-thread tiles are large, so hoisting every index to the entry block costs registers.
    local_indices: bool = False
    # The kernel's global scratch (TTGIR module attribute `ttg.global_scratch_memory_size` > 0):
    # its extra trailing `ptr addrspace(1)` parameter and the bytes each program owns there
    # (ttbuild.backend.llir.tensormap); None and 0 without one.
    global_scratch: object = None
    global_scratch_size: int = 0
    _cache: dict = field(default_factory=dict, compare=False)

    def memo(self, key, make):
        """The value `make()` gave for `key` the first time this function asked (rules keep
        per-function values here: string constants, stack buffers), without recomputing it."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def smem(self, offset=0) -> ir.Value:
        """`i8 addrspace(3)*` into the kernel's dynamic shared memory (`global_smem`, as Triton;
        its size is the TTGIR `ttg.shared`, passed at launch) at byte `offset`."""
        g = self.module.globals.get("global_smem")
        if g is None:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0), "global_smem", addrspace=3)
            g.linkage = "external"
            g.align = 16
        off = offset if isinstance(offset, ir.Value) else ir.Constant(I32, offset)
        return self.builder.gep(g, [ir.Constant(I32, 0), off])

    def align_smem(self, align: int) -> None:
        """Raise `global_smem`'s alignment to `align` bytes (swizzled wgmma/TMA tiles are placed
        at offsets aligned so, and the hardware swizzles absolute shared addresses)."""
        g = self.module.globals.get("global_smem")
        if g is None:
            self.smem()
            g = self.module.globals["global_smem"]
        g.align = max(g.align or 1, align)

    def barrier(self) -> None:
        """`bar.sync 0`: all warps of the CTA meet (PTX ISA 9.7.13.1); inside a partition of a
        `ttg.warp_specialize` op only its own warps, on its named barrier (`bar.sync id, threads`).
        Through the convergent intrinsics (as Triton), so LLVM never duplicates them into
        divergent branches."""
        part = self._cache.get("partition")
        if part is None:
            call = self.builder.call(self.intrinsic("llvm.nvvm.barrier0", ir.VoidType(), []), [])
        else:
            fn = self.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.count", ir.VoidType(), [I32, I32])
            call = self.builder.call(fn, [ir.Constant(I32, part.barrier_id), ir.Constant(I32, part.threads)])
        self._cache["last_barrier"] = call
        self._cache["smem_read"] = False
        self._cache["smem_landed"] = False

    def first_thread(self) -> int:
        """The first thread of the partition being lowered (0 outside `ttg.warp_specialize`):
        per-thread values (tid.x, lane and warp, layout indices) are cached per partition."""
        part = self._cache.get("partition")
        return 0 if part is None else part.first_thread

    def enter_partition(self, part) -> None:
        """Lower what follows as partition `part` (a `Partition`; None: the whole CTA again).
        Nothing about barriers carries over: the next shared-memory write starts with one."""
        self._cache["partition"] = part
        self._cache["last_barrier"] = None
        self._cache["smem_read"] = True
        self._cache["smem_landed"] = True

    def barrier_unless_fresh(self, ignore=None) -> None:
        """A barrier, unless the current block's last memory instruction is already one: two
        back-to-back `bar.sync` order nothing more than one (e.g. the A and B ring slots a dot
        reads after one async_wait). `ignore(call)`: calls that do not count as memory
        instructions here (e.g. TMA issues, which read no shared memory that others write)."""
        if self.since_barrier(ignore) is None:
            self.barrier()

    def since_barrier(self, ignore=None) -> list | None:
        """The instructions of the current block after its last barrier, if none of them is a
        load, a store or a call (but those `ignore(call)` accepts); else None."""
        last = self._cache.get("last_barrier")
        block = self.builder.block
        if last is None or last.parent is not block or last not in block.instructions:
            return None
        insts = block.instructions
        tail = insts[insts.index(last) + 1:]
        for i in tail:
            if isinstance(i, (ir.LoadInstr, ir.StoreInstr)) or (
                    isinstance(i, ir.CallInstr) and not (ignore is not None and ignore(i))):
                return None
        return tail

    def before_smem_write(self) -> None:
        """A barrier only if shared memory was read since the last one (write-after-read)."""
        if self._cache.get("smem_read", False):
            self.barrier()

    def after_smem_read(self) -> None:
        """This thread read shared memory other threads may overwrite next: the next writer needs a barrier."""
        self._cache["smem_read"] = True

    def smem_landed(self) -> None:
        """Shared-memory data other threads will read became visible to this thread only (a
        cp.async wait, st.shared behind a proxy fence): the next such reader needs a barrier."""
        self._cache["smem_landed"] = True

    def barrier_if_landed(self) -> None:
        """A barrier, if data landed (smem_landed) since the last one: a wgmma reading tiles
        that cp.async or other threads filled (two wgmma after one wait share one barrier)."""
        if self._cache.get("smem_landed", True):
            self.barrier()

    def lane_warp(self):
        """(lane, warp) of this thread: tid.x % 32 and tid.x / 32, computed once in the entry block."""
        tid = self.sreg("tid.x")
        b = self.builder
        key = ("lanewarp", self.first_thread())
        if key not in self._cache:
            with b.goto_block(b.function.entry_basic_block):
                lane = b.and_(tid, ir.Constant(I32, 31), name="lane")
                warp = b.lshr(tid, ir.Constant(I32, 5), name="warp")
            self._cache[key] = (lane, warp)
        return self._cache[key]

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """The module's declaration of function `name` (ret(args)), added on first use."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def asm_effect(self, text: str, cons: str, args) -> None:
        """A void inline asm with side effects that also clobbers memory: LLVM moves no memory
        access across it (barriers, fences, async copies and the tiles they guard)."""
        ftype = ir.FunctionType(ir.VoidType(), [a.type for a in args])
        self.builder.asm(ftype, text, cons + (",~{memory}" if cons else "~{memory}"), args, side_effect=True)

    def thread_is(self, pred: str, bound: int, name: str) -> ir.Value:
        """i1: tid.x `pred` `bound` (unsigned compare: "==", "<", ...), computed once per
        function in the entry block (the threads that issue one-thread or one-warp operations)."""
        def make():
            tid = self.sreg("tid.x")
            b = self.builder
            with b.goto_block(b.function.entry_basic_block):
                return b.icmp_unsigned(pred, tid, ir.Constant(I32, bound), name=name)
        return self.memo(("thread_is", pred, bound, self.first_thread()), make)

    def sreg(self, name: str) -> ir.Value:
        """A PTX special register (`tid.x`, `ctaid.y`, ...) read once per function, in the entry
        block. Inside a `ttg.warp_specialize` partition `tid.x` counts from the partition's first
        thread, so its layouts, leaders and barriers are those of a CTA of its own warps."""
        first = self.first_thread() if name == "tid.x" else 0
        key = ("sreg", name, first)
        if key not in self._cache:
            b = self.builder
            fn = self.intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
            with b.goto_entry_block():
                entry = b.function.entry_basic_block
                if entry.instructions:
                    b.position_before(entry.instructions[0])
                raw = b.call(fn, [], name=name.replace(".", "_"))
                self._cache[key] = b.sub(raw, ir.Constant(I32, first), name="part_tid") if first else raw
        return self._cache[key]

    def indices(self, layout, shape) -> list[tuple[ir.Value, ...]]:
        """Per element of this thread, its index along each dimension (i32), per Triton's
        blocked layout: base = (warp coord * threadsPerWarp + lane coord) * sizePerThread;
        a slice layout takes its parent's indices over the shape with 1 inserted at `dim`.
        Emitted in the entry block (cached), so every region may use them; in functions with
        tensor cores (`local_indices`, set by emit.lower_function) only the per-thread bases are,
        and each element's index is added where it is used (hundreds of entry-block values
        would stay live across the whole kernel and crowd out the mma accumulators)."""
        if self.local_indices:
            return self._local_indices(layout, tuple(shape))
        key = ("idx", layout, tuple(shape), self.first_thread())
        if key in self._cache:
            return self._cache[key]
        if isinstance(layout, Slice):
            d = layout.dim
            out = [t[:d] + t[d + 1:] for t in self.indices(layout.parent, layout.parent_shape(shape))]
            self._cache[key] = out
            return out
        with self.builder.goto_block(self.builder.function.entry_basic_block):
            if hasattr(layout, "thread_base"):  # tensor-core layouts (ttbuild.backend.ir.distributed)
                from ttbuild.backend.llir import mma_index
                out = mma_index.indices(self, layout, shape)
            else:
                out = self._blocked_indices(layout, shape)
        self._cache[key] = out
        return out

    def thread_base(self, layout) -> list:
        """Per dimension, this thread's unwrapped index of its element 0 (i32, emitted once in the
        entry block): element j's index is this plus `layout.local_offsets(shape)[j]`, wrapped
        modulo the shape where the layout's tile exceeds it. `layout` is blocked or a
        tensor-core layout, not a slice."""
        key = ("bases", layout, self.first_thread())
        if key not in self._cache:
            with self.builder.goto_block(self.builder.function.entry_basic_block):
                if hasattr(layout, "thread_base"):
                    from ttbuild.backend.llir import mma_index
                    self._cache[key] = mma_index.bases(self, layout)
                else:
                    self._bases(layout)
        return self._cache[key]

    def _local_indices(self, layout, shape):
        if isinstance(layout, Slice):
            d = layout.dim
            return [t[:d] + t[d + 1:] for t in self._local_indices(layout.parent, layout.parent_shape(shape))]
        base = self.thread_base(layout)
        b = self.builder
        out = []
        for off in layout.local_offsets(shape):
            idx = []
            for d in range(len(shape)):
                v = b.add(base[d], ir.Constant(I32, off[d])) if off[d] else base[d]
                if layout.tile(d) > shape[d]:
                    v = b.and_(v, ir.Constant(I32, shape[d] - 1))
                idx.append(v)
            out.append(tuple(idx))
        return out

    def owned(self, layout, shape) -> list | None:
        """Per element, an i1 that is true in exactly one thread of those holding it (the one whose
        unwrapped index is in range), or None when no thread shares elements. A slice layout's
        elements are its parent's over the shape with 1s inserted, so the same test applies there.
        Atomics use it so each element is applied once (Triton masks redundant threads alike)."""
        key = ("own", layout, tuple(shape), self.first_thread())
        if key in self._cache:
            return self._cache[key]
        par, pshape, dims = duplicated_dims(layout, shape)
        out = None
        if dims:
            b = self.builder
            with b.goto_block(b.function.entry_basic_block):
                bases = self._bases(par)
                out = []
                for off in par.local_offsets(pshape):
                    cond = None
                    for d in dims:
                        v = b.add(bases[d], ir.Constant(I32, off[d])) if off[d] else bases[d]
                        c = b.icmp_unsigned("<", v, ir.Constant(I32, pshape[d]))
                        cond = c if cond is None else b.and_(cond, c)
                    out.append(cond)
        self._cache[key] = out
        return out

    def _bases(self, layout):
        """Per dimension, this thread's first (unwrapped) index under a blocked layout."""
        key = ("bases", layout, self.first_thread())
        if key in self._cache:
            return self._cache[key]
        b = self.builder
        tid = self.sreg("tid.x")
        lane = b.and_(tid, ir.Constant(I32, 31)) if self.num_warps > 1 else tid
        warp = b.lshr(tid, ir.Constant(I32, 5))
        base = [None] * layout.rank
        lrem, wrem = lane, warp
        for i, d in enumerate(layout.order):
            tpw, wpc = layout.threads_per_warp[d], layout.warps_per_cta[d]
            ld = b.and_(lrem, ir.Constant(I32, tpw - 1)) if tpw < 32 else lrem
            wd = b.and_(wrem, ir.Constant(I32, wpc - 1)) if i < layout.rank - 1 else wrem
            lrem = b.lshr(lrem, ir.Constant(I32, tpw.bit_length() - 1))
            wrem = b.lshr(wrem, ir.Constant(I32, wpc.bit_length() - 1))
            t = b.add(b.mul(wd, ir.Constant(I32, tpw)), ld) if wpc > 1 else ld
            base[d] = b.mul(t, ir.Constant(I32, layout.size_per_thread[d]))
        self._cache[key] = base
        return base

    def _blocked_indices(self, layout, shape):
        b = self.builder
        base = self._bases(layout)
        out = []
        for off in layout.local_offsets(shape):
            idx = []
            for d in range(layout.rank):
                v = b.add(base[d], ir.Constant(I32, off[d])) if off[d] else base[d]
                if layout.tile(d) > shape[d]:  # the tile wraps: threads share (broadcast) elements
                    v = b.and_(v, ir.Constant(I32, shape[d] - 1))
                idx.append(v)
            out.append(tuple(idx))
        return out
