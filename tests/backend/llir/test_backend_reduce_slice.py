"""A reduction of a reduction's result: tt.reduce of a slice layout (nested too) lowers, and every thread holds the exact result (the LLIR evaluated by `llir_eval.Cta`)."""

from __future__ import annotations

import re

import pytest
from test_backend_reduce import _blocked, _lower_capturing_reduces, deep_recursion  # noqa: F401  (fixture)

import ttbuild
from ttbuild.backend.ir.distributed import Slice

# Inputs the kernel computes (no loads) so the evaluator follows every value; (37 i + 11 j) mod 101
# has ties, which argmax resolves to the first index (Triton's tie_break_left).
_SRC = '''
import triton
import triton.language as tl


@triton.jit
def twice_kernel(s_ptr, i_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = (rm[:, None] * 37 + rn[None, :] * 11) % 101
    r = tl.sum(x, axis=AXIS)
    tl.store(s_ptr, tl.max(r, axis=0))
    tl.store(i_ptr, tl.argmax(r, axis=0))


@triton.jit
def thrice_kernel(s_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    x = (tl.arange(0, A)[:, None, None] * 37 + tl.arange(0, B)[None, :, None] * 11
         + tl.arange(0, C)[None, None, :] * 5) % 101
    r = tl.sum(x, axis=2)
    tl.store(s_ptr + tl.arange(0, B), tl.max(r, axis=0))
    tl.store(s_ptr + B, tl.sum(tl.sum(r, axis=1), axis=0))
'''


_MMA = "#ttg.nvidia_mma<{{versionMajor = {major}, versionMinor = 0, warpsPerCTA = {warps}, instrShape = {instr}}}>"


@pytest.mark.parametrize("axis,constexprs,warps,layout", [
    (1, {"BM": 64, "BN": 64}, 4, None),
    (0, {"BM": 64, "BN": 64}, 4, None),
    (1, {"BM": 32, "BN": 128}, 8, _blocked([1, 4], [4, 8], [2, 4])),    # warps along both dimensions
    (0, {"BM": 128, "BN": 32}, 8, _blocked([2, 1], [8, 4], [4, 2])),
    (1, {"BM": 16, "BN": 64}, 8, _blocked([1, 2], [2, 16], [8, 1])),    # rows wrap: copies across warps
    # the tensor-core accumulator's layouts (a reduction of a dot's result, reduced again)
    (1, {"BM": 64, "BN": 64}, 4, _MMA.format(major=2, warps="[2, 2]", instr="[16, 8]")),
    (0, {"BM": 64, "BN": 64}, 4, _MMA.format(major=2, warps="[2, 2]", instr="[16, 8]")),
    (1, {"BM": 64, "BN": 64}, 4, _MMA.format(major=3, warps="[4, 1]", instr="[16, 64, 16]")),
    (0, {"BM": 64, "BN": 128}, 8, _MMA.format(major=3, warps="[4, 2]", instr="[16, 64, 16]")),
])
def test_reduction_of_a_reduction_gives_every_thread_the_result(axis, constexprs, warps, layout, tmp_path,
                                                                 monkeypatch, deep_recursion):  # noqa: F811
    from llir_eval import Cta

    src = tmp_path / "twice.py"
    src.write_text(_SRC)
    ttgir_text = ttbuild.compile(src, kernel="twice_kernel", signature="*i32:16,*i32:16",
                                 constexprs={**constexprs, "AXIS": axis}, num_warps=warps, until="ttgir")["ttgir"].decode()
    if layout is not None:
        assert len(set(re.findall(r"#ttg\.blocked<\{[^}]*\}>", ttgir_text))) == 1
        ttgir_text = re.sub(r"#ttg\.blocked<\{[^}]*\}>", layout, ttgir_text)
    got = _lower_capturing_reduces(ttgir_text.encode(), monkeypatch)
    assert len(got) == 3  # the first sum, then max and argmax of its result
    assert all(isinstance(srcs[0].layout, Slice) for _, srcs, _ in got[1:])
    bm, bn = constexprs["BM"], constexprs["BN"]
    x = [[(37 * i + 11 * j) % 101 for j in range(bn)] for i in range(bm)]
    r = [sum(row) for row in x] if axis == 1 else [sum(x[i][j] for i in range(bm)) for j in range(bn)]
    cta = Cta(got[0][0], 32 * warps)
    mx, arg = got[1][2][0], got[2][2][1]
    for tid in range(32 * warps):
        t = cta.thread(tid)
        assert t(mx) == max(r), tid
        assert t(arg) == r.index(max(r)), tid


@pytest.mark.parametrize("shape,warps", [((4, 8, 16), 4), ((8, 4, 32), 8), ((2, 16, 8), 2)])
def test_reductions_of_a_3d_reduction_in_nested_slices(shape, warps, tmp_path, monkeypatch, deep_recursion):  # noqa: F811
    """A 3-D sum along its last axis, then a max along the first (a slice of a blocked layout)
    and a sum of a sum (a slice of a slice): every thread holding an output holds its value."""
    from llir_eval import Cta

    src = tmp_path / "thrice.py"
    src.write_text(_SRC)
    a, b, c = shape
    ttgir_text = ttbuild.compile(src, kernel="thrice_kernel", signature="*i32:16", num_warps=warps, until="ttgir",
                                 constexprs={"A": a, "B": b, "C": c})["ttgir"]
    got = _lower_capturing_reduces(ttgir_text, monkeypatch)
    assert len(got) == 4
    assert isinstance(got[3][1][0].layout, Slice) and isinstance(got[3][1][0].layout.parent, Slice)
    x = [[[(37 * i + 11 * j + 5 * k) % 101 for k in range(c)] for j in range(b)] for i in range(a)]
    r = [[sum(x[i][j]) for j in range(b)] for i in range(a)]
    cta = Cta(got[0][0], 32 * warps)
    mx, total = got[1][2][0], got[3][2][0]
    for tid in range(32 * warps):
        t = cta.thread(tid)
        for ix, v in zip(mx.layout.thread_indices(tid, mx.shape), mx.elems):
            assert t(v) == max(r[i][ix[0]] for i in range(a)), (tid, ix)
        assert t(total) == sum(map(sum, r)), tid
