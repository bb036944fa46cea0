"""tl.sort / tl.flip / tl.topk through the backend: no indicator conversions, and every thread stores the right elements.

The LLIR is evaluated across the threads by `llir_eval.Cta`.
"""

from __future__ import annotations

import re

import pytest
from test_backend_reduce import deep_recursion, lower_capturing  # noqa: F401  (fixture)

import ttbuild

# Inputs the kernel computes (no loads) so the evaluator follows every value: (37 i + 11) mod 101
# on BM x N, minus 50 (negative values: a signed compare), with repeats once N > 101.
_SRC = '''
import triton
import triton.language as tl


@triton.jit
def sort_kernel(y_ptr, BM: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr, FLIP: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * N + tl.arange(0, N)[None, :]
    x = (offs * 37 + 11) % 101 - 50
    if FLIP:
        y = tl.flip(x, 1)
    else:
        y = tl.sort(x, descending=DESC)
    tl.store(y_ptr + offs, y)


@triton.jit
def topk_kernel(y_ptr, BM: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * N + tl.arange(0, N)[None, :]
    x = (offs * 37 + 11) % 101 - 50
    tl.store(y_ptr + tl.arange(0, BM)[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K))
'''


def _lower_capturing_stores(ttgir_text: bytes, monkeypatch) -> list:
    """emit.lower, keeping (function, pointer, value) of every tt.store."""
    return lower_capturing(ttgir_text, "tt.store", lambda ctx, args, _: (ctx.builder.function, args[0], args[1]),
                           monkeypatch)


@pytest.mark.parametrize("bm, n, warps, desc, flip", [
    (1, 16, 1, False, False), (2, 32, 2, True, False), (4, 64, 4, False, False), (1, 256, 4, True, False),
    (8, 4, 1, False, False), (4, 32, 4, False, True),
])
def test_every_thread_stores_the_sorted_row(bm, n, warps, desc, flip, tmp_path, monkeypatch, deep_recursion):  # noqa: F811
    from llir_eval import Cta

    src = tmp_path / "sort.py"
    src.write_text(_SRC)
    ttgir = ttbuild.compile(src, kernel="sort_kernel", signature="*i32:16", num_warps=warps, until="ttgir",
                            constexprs={"BM": bm, "N": n, "DESC": desc, "FLIP": flip})["ttgir"]
    # the [1, .., 2, .., 1] indicators are rebuilt in place; what may still convert is the whole
    # block on its way into or out of the hypercube (Triton's linear layouts avoid those too)
    for shape in re.findall(rb'"ttg.convert_layout"\(%\w+\) : \(tensor<([\dx]+)xi32', ttgir):
        assert eval(shape.replace(b"x", b"*")) == bm * n, shape
    (fn, _, value), = _lower_capturing_stores(ttgir, monkeypatch)
    rows = [[(37 * (i * n + j) + 11) % 101 - 50 for j in range(n)] for i in range(bm)]
    want = [row[::-1] if flip else sorted(row, reverse=desc) for row in rows]
    cta = Cta(fn, 32 * warps)
    seen = set()
    for tid in range(32 * warps):
        t = cta.thread(tid)
        ixs = value.layout.thread_indices(tid, value.shape)
        got = [(t(v) ^ 1 << 31) - (1 << 31) for v in value.elems]  # ints only: a failure prints no LLIR
        assert got == [want[i][j] for i, j in ixs], tid
        seen.update(ixs)
    assert len(seen) == bm * n


@pytest.mark.parametrize("bm, n, k, warps", [(2, 32, 4, 2), (4, 64, 8, 4), (2, 16, 1, 1)])
def test_every_thread_stores_the_top_k(bm, n, k, warps, tmp_path, monkeypatch, deep_recursion):  # noqa: F811
    """Each halving max leaves the hypercube in a slice layout; its indicators are rebuilt there too."""
    from llir_eval import Cta

    src = tmp_path / "topk.py"
    src.write_text(_SRC)
    ttgir = ttbuild.compile(src, kernel="topk_kernel", signature="*i32:16", num_warps=warps, until="ttgir",
                            constexprs={"BM": bm, "N": n, "K": k})["ttgir"]
    for shape in re.findall(rb'"ttg.convert_layout"\(%\w+\) : \(tensor<([\dx]+)xi32', ttgir):
        assert not (b"x" in shape and eval(shape.replace(b"x", b"*")) == 2), shape  # no [1,..,2,..,1] indicator
    (fn, _, value), = _lower_capturing_stores(ttgir, monkeypatch)
    rows = [[(37 * (i * n + j) + 11) % 101 - 50 for j in range(n)] for i in range(bm)]
    want = [sorted(row, reverse=True)[:k] for row in rows]
    cta = Cta(fn, 32 * warps)
    for tid in range(32 * warps):
        t = cta.thread(tid)
        ixs = value.layout.thread_indices(tid, value.shape)
        assert [(t(v) ^ 1 << 31) - (1 << 31) for v in value.elems] == [want[i][j] for i, j in ixs], tid
