"""Blocked layouts and the axis analysis: properties over random shapes, and the facts the
coalescing decision rests on for the reference kernels."""

from __future__ import annotations

from collections import Counter
from math import prod
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttbuild.backend.analysis.layout import default_blocked
from ttbuild.backend.ir.encodings import Blocked

DATA = Path(__file__).parents[2] / "data"

pow2 = lambda lo, hi: st.integers(lo, hi).map(lambda e: 1 << e)


@settings(max_examples=200, deadline=None)
@given(shape=st.lists(pow2(0, 7), min_size=1, max_size=2) | st.lists(pow2(0, 12), min_size=1, max_size=1), num_warps=pow2(0, 3), spt=pow2(0, 3))
def test_default_blocked_covers_every_element_equally(shape, num_warps, spt):
    layout = default_blocked(shape, num_warps, spt)
    assert all(t >= 1 for t in layout.threads_per_warp)
    assert prod(layout.threads_per_warp) == 32
    assert prod(layout.warps_per_cta) == num_warps
    seen = Counter()
    n = layout.elems_per_thread(shape)
    for tid in range(32 * num_warps):
        idx = layout.thread_indices(tid, shape)
        assert len(idx) == n
        seen.update(idx)
    assert len(seen) == prod(shape)  # every element is owned by some thread
    assert len(set(seen.values())) == 1  # and all equally often (broadcast when the tile wraps)


@settings(max_examples=100, deadline=None)
@given(shape=st.lists(pow2(5, 8), min_size=1, max_size=2), num_warps=pow2(0, 3), spt=pow2(0, 3))
def test_runs_along_the_fastest_dim_are_contiguous(shape, num_warps, spt):
    layout = default_blocked(shape, num_warps, spt)
    f = layout.order[0]
    run = min(layout.size_per_thread[f], shape[f])
    idx = layout.thread_indices(num_warps * 32 - 1, shape)
    for j in range(0, len(idx), run):
        chunk = idx[j:j + run]
        assert [c[f] for c in chunk] == list(range(chunk[0][f], chunk[0][f] + run))
        assert chunk[0][f] % run == 0  # chunks start aligned: 16-byte vector accesses stay aligned


@given(st.builds(Blocked, st.tuples(pow2(0, 4)), st.tuples(st.just(32)), st.tuples(pow2(0, 3)),
                 st.just((0,))))
def test_encoding_spelling_round_trips(layout):
    assert Blocked.parse(layout.attr()) == layout
    assert layout.attr().startswith("#ttg.blocked<{sizePerThread = [")


def _axis(text):
    """(analysis, ops, keep-alive): the module must outlive the ops the test looks at."""
    from ttbuild.backend import mlir_util as mu
    from ttbuild.backend.analysis.axis import AxisAnalysis
    ctx = mu.context()
    module = mu.parse_module(text, ctx, "ttir")
    func = module.body.operations[0]
    ops = list(func.regions[0].blocks[0].operations)
    return AxisAnalysis(func), ops, (ctx, module)


def test_axis_facts_for_add_kernel():
    a, ops, ctx = _axis((DATA / "add_kernel.ttir").read_text())
    by_loc = {}
    for op in ops:
        if op.results:
            by_loc.setdefault(op.operation.name, []).append(a.info(op.results[0]))
    assert by_loc["tt.make_range"][0].contiguity == (1024,)
    offsets = by_loc["arith.addi"][0]
    assert offsets.contiguity == (1024,) and offsets.divisibility == (1024,)
    ptrs = by_loc["tt.addptr"][0]
    assert ptrs.contiguity == (1024,) and ptrs.divisibility == (16,)  # bytes: from tt.divisibility
    assert by_loc["arith.cmpi"][0].constancy == (1,)  # n has no divisibility: per-element mask


def test_mask_constancy_follows_the_divisibility_of_n():
    text = (DATA / "add_kernel.ttir").read_text().replace(
        "{tt.divisibility = 16 : i32}, {}]", "{tt.divisibility = 16 : i32}, {tt.divisibility = 16 : i32}]")
    a, ops, ctx = _axis(text)
    cmp = next(op for op in ops if op.operation.name == "arith.cmpi")
    assert a.info(cmp.results[0]).constancy == (16,)


@pytest.mark.parametrize("div,vec", [(16, 4), (8, 2), (4, 1), (1, 1)])
def test_pointer_alignment_limits_vector_width(div, vec):
    from ttbuild.stages import ttgir
    text = (DATA / "add_kernel.ttir").read_text().replace("tt.divisibility = 16", f"tt.divisibility = {div}")
    out = ttgir.run({"ttir": text.encode()}, {"num_warps": 4})["ttgir"].decode()
    assert f"sizePerThread = [{vec}]" in out


def test_constant_groups_share_elements_across_every_thread():
    """An elementwise op computes one element per block its value is constant over, in any
    layout (Triton's maybeDeduplicate): attention's key mask on the wgmma accumulator's column
    slice (16 columns per thread, pairs every 8) with N_CTX % 16 == 0 is 4 values per thread,
    not 8; a blocked row run of 8 with constancy 16 is one; nothing is shared across blocks."""
    from ttbuild.backend.analysis.layout import constant_groups
    from ttbuild.backend.ir.encodings import Blocked, NvidiaMma, Slice

    cols = Slice(0, NvidiaMma(warps_per_cta=(4, 1), instr_shape=(16, 64, 16), version=(3, 0)))
    g = constant_groups(cols, (64,), (16,), 128)
    assert len(g) == 16 and len(set(g)) == 4
    for tid in range(128):  # every element of a group lies in one block of 16, in every thread
        ix = cols.thread_indices(tid, (64,))
        assert all(ix[j][0] // 16 == ix[g[j]][0] // 16 for j in range(16))
    assert len(set(constant_groups(cols, (64,), (8,), 128))) == 8
    rows = Blocked((1, 8), (4, 8), (4, 1), (1, 0))
    g = constant_groups(rows, (64, 64), (1, 16), 128)
    assert len(g) == 32 and len(set(g)) == 4  # 4 rows of one 8-wide run each
    assert constant_groups(rows, (64, 64), (1, 1), 128) is None
