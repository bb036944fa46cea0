"""Op names of the dialects TTGIR holds, one constant each (`TTG.CONVERT_LAYOUT` names the layout conversion): every pass, analysis and lowering rule compares against these, never a string of its own.

An op's name is `<dialect>.<op>` as Triton 3.6 prints it in generic form; the constant is the op
part upper-cased, dots become underscores (`tt.reduce.return` -> `TT.REDUCE_RETURN`). The classes
are plain namespaces of `str` constants, never instantiated.
"""

from __future__ import annotations


class TT:
    """The `tt` dialect (Triton: include/triton/Dialect/Triton/IR/TritonOps.td)."""

    ADDPTR = "tt.addptr"
    ADVANCE = "tt.advance"
    ASSERT = "tt.assert"
    ATOMIC_CAS = "tt.atomic_cas"
    ATOMIC_RMW = "tt.atomic_rmw"
    BITCAST = "tt.bitcast"
    BROADCAST = "tt.broadcast"
    CAT = "tt.cat"
    CLAMPF = "tt.clampf"
    DESCRIPTOR_LOAD = "tt.descriptor_load"
    DESCRIPTOR_REDUCE = "tt.descriptor_reduce"
    DESCRIPTOR_STORE = "tt.descriptor_store"
    DOT = "tt.dot"
    ELEMENTWISE_INLINE_ASM = "tt.elementwise_inline_asm"
    EXPAND_DIMS = "tt.expand_dims"
    EXTERN_ELEMENTWISE = "tt.extern_elementwise"
    FP_TO_FP = "tt.fp_to_fp"
    FUNC = "tt.func"
    GET_NUM_PROGRAMS = "tt.get_num_programs"
    GET_PROGRAM_ID = "tt.get_program_id"
    HISTOGRAM = "tt.histogram"
    INT_TO_PTR = "tt.int_to_ptr"
    JOIN = "tt.join"
    LOAD = "tt.load"
    MAKE_RANGE = "tt.make_range"
    MAKE_TENSOR_DESCRIPTOR = "tt.make_tensor_descriptor"
    MAKE_TENSOR_PTR = "tt.make_tensor_ptr"
    MULHIUI = "tt.mulhiui"
    PRECISE_DIVF = "tt.precise_divf"
    PRECISE_SQRT = "tt.precise_sqrt"
    PRINT = "tt.print"
    PTR_TO_INT = "tt.ptr_to_int"
    REDUCE = "tt.reduce"
    REDUCE_RETURN = "tt.reduce.return"
    RESHAPE = "tt.reshape"
    RETURN = "tt.return"
    SCAN = "tt.scan"
    SCAN_RETURN = "tt.scan.return"
    SPLAT = "tt.splat"
    SPLIT = "tt.split"
    STORE = "tt.store"
    TRANS = "tt.trans"


class TTG:
    """The `ttg` dialect (Triton: include/triton/Dialect/TritonGPU/IR/TritonGPUOps.td)."""

    ASYNC_COMMIT_GROUP = "ttg.async_commit_group"
    ASYNC_COPY_GLOBAL_TO_LOCAL = "ttg.async_copy_global_to_local"
    ASYNC_WAIT = "ttg.async_wait"
    CONVERT_LAYOUT = "ttg.convert_layout"
    GLOBAL_SCRATCH_ALLOC = "ttg.global_scratch_alloc"
    LOCAL_ALLOC = "ttg.local_alloc"
    LOCAL_DEALLOC = "ttg.local_dealloc"
    LOCAL_LOAD = "ttg.local_load"
    LOCAL_STORE = "ttg.local_store"
    MEMDESC_INDEX = "ttg.memdesc_index"
    MEMDESC_SUBSLICE = "ttg.memdesc_subslice"
    MEMDESC_TRANS = "ttg.memdesc_trans"
    # warp specialization (Triton's WarpSpecializeOp): region 0 runs on the kernel's warps and
    # ends in ttg.warp_yield, region 1 on the producer warps and ends in ttg.warp_return
    WARP_SPECIALIZE = "ttg.warp_specialize"
    WARP_YIELD = "ttg.warp_yield"
    WARP_RETURN = "ttg.warp_return"


class TTNG:
    """The `ttng` dialect (Triton: include/triton/Dialect/TritonNvidiaGPU/IR/TritonNvidiaGPUOps.td)."""

    ASYNC_TMA_COPY_GLOBAL_TO_LOCAL = "ttng.async_tma_copy_global_to_local"
    ASYNC_TMA_COPY_LOCAL_TO_GLOBAL = "ttng.async_tma_copy_local_to_global"
    ASYNC_TMA_REDUCE = "ttng.async_tma_reduce"
    ASYNC_TMA_STORE_WAIT = "ttng.async_tma_store_wait"
    ARRIVE_BARRIER = "ttng.arrive_barrier"
    BARRIER_EXPECT = "ttng.barrier_expect"
    FENCE_ASYNC_SHARED = "ttng.fence_async_shared"
    INIT_BARRIER = "ttng.init_barrier"
    INVAL_BARRIER = "ttng.inval_barrier"
    NAMED_BARRIER_ARRIVE = "ttng.named_barrier_arrive"  # (id: i32, threads: i32): bar.arrive
    NAMED_BARRIER_WAIT = "ttng.named_barrier_wait"  # (id: i32, threads: i32): bar.sync
    REINTERPRET_TENSOR_DESCRIPTOR = "ttng.reinterpret_tensor_descriptor"
    TENSORMAP_CREATE = "ttng.tensormap_create"
    TENSORMAP_FENCEPROXY_ACQUIRE = "ttng.tensormap_fenceproxy_acquire"
    WAIT_BARRIER = "ttng.wait_barrier"
    WARP_GROUP_DOT = "ttng.warp_group_dot"
    WARP_GROUP_DOT_WAIT = "ttng.warp_group_dot_wait"


class SCF:
    """MLIR's `scf` dialect (structured control flow)."""

    CONDITION = "scf.condition"
    FOR = "scf.for"
    IF = "scf.if"
    WHILE = "scf.while"
    YIELD = "scf.yield"


class ARITH:
    """MLIR's `arith` dialect."""

    ADDF = "arith.addf"
    ADDI = "arith.addi"
    ANDI = "arith.andi"
    BITCAST = "arith.bitcast"
    CEILDIVSI = "arith.ceildivsi"
    CEILDIVUI = "arith.ceildivui"
    CMPF = "arith.cmpf"
    CMPI = "arith.cmpi"
    CONSTANT = "arith.constant"
    DIVF = "arith.divf"
    DIVSI = "arith.divsi"
    DIVUI = "arith.divui"
    EXTF = "arith.extf"
    EXTSI = "arith.extsi"
    EXTUI = "arith.extui"
    FLOORDIVSI = "arith.floordivsi"
    FPTOSI = "arith.fptosi"
    FPTOUI = "arith.fptoui"
    MAXIMUMF = "arith.maximumf"
    MAXNUMF = "arith.maxnumf"
    MAXSI = "arith.maxsi"
    MAXUI = "arith.maxui"
    MINIMUMF = "arith.minimumf"
    MINNUMF = "arith.minnumf"
    MINSI = "arith.minsi"
    MINUI = "arith.minui"
    MULF = "arith.mulf"
    MULI = "arith.muli"
    NEGF = "arith.negf"
    ORI = "arith.ori"
    REMF = "arith.remf"
    REMSI = "arith.remsi"
    REMUI = "arith.remui"
    SELECT = "arith.select"
    SHLI = "arith.shli"
    SHRSI = "arith.shrsi"
    SHRUI = "arith.shrui"
    SITOFP = "arith.sitofp"
    SUBF = "arith.subf"
    SUBI = "arith.subi"
    TRUNCF = "arith.truncf"
    TRUNCI = "arith.trunci"
    UITOFP = "arith.uitofp"
    XORI = "arith.xori"


class MATH:
    """MLIR's `math` dialect."""

    ABSF = "math.absf"
    ABSI = "math.absi"
    ACOS = "math.acos"
    ACOSH = "math.acosh"
    ASIN = "math.asin"
    ASINH = "math.asinh"
    ATAN = "math.atan"
    ATAN2 = "math.atan2"
    ATANH = "math.atanh"
    CBRT = "math.cbrt"
    CEIL = "math.ceil"
    COPYSIGN = "math.copysign"
    COS = "math.cos"
    COSH = "math.cosh"
    ERF = "math.erf"
    ERFC = "math.erfc"
    EXP = "math.exp"
    EXP2 = "math.exp2"
    EXPM1 = "math.expm1"
    FLOOR = "math.floor"
    FMA = "math.fma"
    LOG = "math.log"
    LOG10 = "math.log10"
    LOG1P = "math.log1p"
    LOG2 = "math.log2"
    POWF = "math.powf"
    ROUND = "math.round"
    ROUNDEVEN = "math.roundeven"
    RSQRT = "math.rsqrt"
    SIN = "math.sin"
    SINH = "math.sinh"
    SQRT = "math.sqrt"
    TAN = "math.tan"
    TANH = "math.tanh"
    TRUNC = "math.trunc"


class GPU:
    """MLIR's `gpu` dialect (only its barrier appears in TTGIR)."""

    BARRIER = "gpu.barrier"


class ATTR:
    """Discardable attribute names Triton's dialects put on ops (TritonDialect.td, TritonGPUDialect.td)."""

    NUM_STAGES = "tt.num_stages"  # on an scf.for: tl.range(num_stages=...)
    WARP_SPECIALIZE = "tt.warp_specialize"  # on an scf.for: tl.range(warp_specialize=True)
    TOTAL_NUM_WARPS = "ttg.total-num-warps"  # on the module: warps launched, the partitions' included
    DIVISIBILITY = "tt.divisibility"  # on tt.func arguments and their axis info
    CONTIGUITY = "tt.contiguity"
    CONSTANCY = "tt.constancy"
    GLOBAL_SCRATCH_SIZE = "ttg.global_scratch_memory_size"  # on the module: bytes of global scratch per program
    GLOBAL_SCRATCH_ALIGNMENT = "ttg.global_scratch_memory_alignment"
    GLOBAL_SCRATCH_OFFSET = "ttg.global_scratch_memory_offset"  # on a ttg.global_scratch_alloc
    # ttbuild's own: on a ttng.barrier_expect / TMA copy whose ring slot came back through an
    # "empty" mbarrier (ttbuild.backend.ttgir.pipeline.release): no CTA barrier before it
    RELEASED = "ttb.released"
