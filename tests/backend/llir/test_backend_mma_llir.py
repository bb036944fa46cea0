"""The LLIR index math of the tensor-core layouts equals its pure-Python specification.

The swizzled shared offset (dot.swizzled_offset vs SwizzledShared.offset) and each thread's base
index (mma_index.bases vs thread_base), evaluated by JIT-compiling the emitted LLVM IR for the host.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import llvmlite.binding as llvm
import pytest
from llvmlite import ir

from ttbuild.backend.ir.encodings import Blocked, DotOperand, FmaOperand, NvidiaMma, SwizzledShared
from ttbuild.backend.llir import mma_index
from ttbuild.backend.llir.async_copy import MemDesc
from ttbuild.backend.llir.dot import swizzled_offset

I32 = ir.IntType(32)


def _jit(build, nargs: int, nouts: int):
    """Compile fn(i32 x nargs, i32* out) whose body `build(builder, args) -> [i32 x nouts]`
    emits; returns a Python callable args -> list of outs."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = ir.Module(name="t")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I32] * nargs + [I32.as_pointer()]), "f")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    outs = build(b, list(fn.args[:nargs]))
    for i, v in enumerate(outs):
        b.store(v, b.gep(fn.args[nargs], [ir.Constant(I32, i)]))
    b.ret_void()
    target = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), target)
    engine.finalize_object()
    cfn = ctypes.CFUNCTYPE(None, *([ctypes.c_int32] * nargs), ctypes.POINTER(ctypes.c_int32))(
        engine.get_function_address("f"))

    def call(*args):
        buf = (ctypes.c_int32 * nouts)()
        cfn(*args, buf)
        return list(buf)
    call.engine = engine  # keep the code alive
    return call


@pytest.mark.parametrize("sw,shape", [(SwizzledShared(8, 2, 4, (1, 0)), (64, 32)),
                                      (SwizzledShared(8, 1, 8, (0, 1)), (32, 64)),
                                      (SwizzledShared(4, 1, 8, (1, 0)), (16, 32)),
                                      (SwizzledShared(16, 2, 4, (1, 0)), (32, 64)),
                                      (SwizzledShared(8, 1, 8, (2, 1, 0)), (2, 16, 64))])
def test_swizzled_offset_llir_matches_spec(sw, shape):
    rank = len(shape)
    desc = MemDesc(None, shape, "f16", sw.order)
    f = _jit(lambda b, args: [swizzled_offset(b, sw, desc, args)], rank, 1)
    import itertools
    for idx in itertools.product(*(range(s) for s in shape)):
        assert f(*idx)[0] == sw.offset(idx, shape), idx


def _fake_ctx(b, lane, warp):
    ns = SimpleNamespace(builder=b, lane_warp=lambda: (lane, warp))

    def bases(layout):  # blocked parents of FMA operands: lane/warp split as Triton's blocked layout
        out = [None] * layout.rank
        lrem, wrem = lane, warp
        for i, d in enumerate(layout.order):
            tpw, wpc = layout.threads_per_warp[d], layout.warps_per_cta[d]
            ld = b.urem(lrem, ir.Constant(I32, tpw))
            wd = b.urem(wrem, ir.Constant(I32, wpc)) if i < layout.rank - 1 else wrem
            lrem, wrem = b.udiv(lrem, ir.Constant(I32, tpw)), b.udiv(wrem, ir.Constant(I32, wpc))
            out[d] = b.mul(b.add(b.mul(wd, ir.Constant(I32, tpw)), ld), ir.Constant(I32, layout.size_per_thread[d]))
        return out
    ns._bases = bases
    return ns


@pytest.mark.parametrize("layout", [NvidiaMma((2, 2)), NvidiaMma((8, 1)), NvidiaMma((1, 4)), NvidiaMma((4, 1, 1), (1, 16, 8)),
                                    DotOperand(0, NvidiaMma((2, 2)), 2), DotOperand(1, NvidiaMma((2, 4)), 2),
                                    DotOperand(0, NvidiaMma((4, 1)), 1), DotOperand(1, NvidiaMma((2, 2)), 4),
                                    DotOperand(1, NvidiaMma((4, 1, 1), (1, 16, 8)), 2),
                                    FmaOperand(0, Blocked((1, 4), (4, 8), (4, 1), (1, 0))),
                                    FmaOperand(0, Blocked((1, 1, 2), (1, 4, 8), (1, 4, 1), (2, 1, 0))),
                                    FmaOperand(1, Blocked((1, 1, 2), (2, 2, 8), (2, 1, 2), (2, 1, 0)))])
def test_thread_bases_llir_match_spec(layout):
    rank = layout.rank
    f = _jit(lambda b, args: mma_index.bases(_fake_ctx(b, args[0], args[1]), layout), 2, rank)
    warps = 1
    for w in getattr(getattr(layout, "parent", layout), "warps_per_cta", (1,)):
        warps *= w
    for tid in range(32 * warps):
        assert tuple(f(tid % 32, tid // 32)) == layout.thread_base(tid % 32, tid // 32), tid


@pytest.mark.parametrize("parent,shape", [(Blocked((1, 4), (4, 8), (4, 1), (1, 0)), (64, 32, 16)),
                                          (Blocked((1, 1, 2), (1, 4, 8), (1, 4, 1), (2, 1, 0)), (2, 32, 16, 16)),
                                          (Blocked((1, 1, 2), (2, 2, 8), (2, 1, 2), (2, 1, 0)), (4, 8, 32, 16))])
def test_fma_operands_hold_what_each_output_needs(parent, shape):
    """FMA path (rank 2 and batched rank 3): a thread's A elements are exactly the (batch, m, k)
    of the outputs it owns under the blocked parent, for every k, and its B elements the
    (batch, k, n); fma_dot reads them by these offsets."""
    *batch, M, N, K = shape
    b = tuple(batch)
    a_l, b_l = FmaOperand(0, parent), FmaOperand(1, parent)
    warps = 1
    for w in parent.warps_per_cta:
        warps *= w
    for tid in range(32 * warps):
        outs = parent.thread_indices(tid, b + (M, N))
        want_a = {o[:-1] + (k,) for o in outs for k in range(K)}
        want_b = {o[:-2] + (k, o[-1]) for o in outs for k in range(K)}
        got_a = a_l.thread_indices(tid, b + (M, K))
        got_b = b_l.thread_indices(tid, b + (K, N))
        assert set(got_a) == want_a and len(got_a) == len(want_a), tid
        assert set(got_b) == want_b and len(got_b) == len(want_b), tid
