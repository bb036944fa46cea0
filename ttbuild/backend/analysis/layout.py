"""Layout math over the distributed encodings of ttbuild.backend.ir.distributed.

Triton's default blocked layout, the layouts tt.trans / tt.join / tt.split / tt.reshape infer,
register-renaming conversions, and constant groups.

Sources: Triton lib/Dialect/TritonGPU/IR/Dialect.cpp (BlockedEncodingAttr::get, the infer*OpEncoding
hooks) and ElementwiseOpToLLVM.cpp (maybeDeduplicate), cited per function.
"""

from __future__ import annotations

from functools import lru_cache
from math import prod
from operator import itemgetter

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.distributed import Blocked


def default_blocked(shape, num_warps: int, spt_fast: int = 1, threads_per_warp: int = 32,
                    order=None, size_per_thread=None) -> Blocked:
    """Triton's `BlockedEncodingAttr::get(shape, sizePerThread, order, numWarps, 32, numCTAs=1)`:
    lanes then warps fill the dimensions fastest-first, never more than a dimension can hold.
    sizePerThread is `spt_fast` along the fastest dimension and 1 elsewhere, or `size_per_thread`
    (one entry per dimension) when given."""
    rank = len(shape)
    order = tuple(order) if order is not None else tuple(reversed(range(rank)))
    if size_per_thread is not None:
        spt = [max(1, min(s, n)) for s, n in zip(size_per_thread, shape)]
    else:
        spt = [1] * rank
        spt[order[0]] = max(1, min(spt_fast, shape[order[0]]))
    tpw, wpc = [1] * rank, [1] * rank
    lanes, warps = threads_per_warp, num_warps
    shape_per_cta = list(shape)
    for i, d in enumerate(order):
        last = i == rank - 1
        room = max(1, shape_per_cta[d] // spt[d])
        tpw[d] = lanes if last else max(1, min(lanes, room))
        lanes //= tpw[d]
    for i, d in enumerate(order):
        last = i == rank - 1
        room = max(1, shape_per_cta[d] // (spt[d] * tpw[d]))
        wpc[d] = warps if last else max(1, min(warps, room))
        warps //= wpc[d]
    return Blocked(tuple(spt), tuple(tpw), tuple(wpc), order)


def fma_dot_blocked(shape, num_warps: int, threads_per_warp: int = 32) -> Blocked:
    """The `#ttg.blocked` result layout Triton gives every `tt.dot` when it converts TTIR to TTGIR
    (TritonToTritonGPUPass.cpp, TritonDotPattern), which an FMA dot keeps: 2x2 elements per thread
    in the two minor dimensions from 4 elements per thread, 4x4 from 16 (each at most the
    dimension), order minor-first. A thread then owns square blocks of the result, so it needs
    few rows of A and columns of B for its outputs (the operands hold all of K per row/column)."""
    rank = len(shape)
    per_thread = prod(shape) // (num_warps * threads_per_warp)
    s = 4 if per_thread >= 16 else 2 if per_thread >= 4 else 1
    spt = [1] * (rank - 2) + [s, s]
    return default_blocked(shape, num_warps, 1, threads_per_warp, size_per_thread=spt)


def same_thread_map(src_l, dst_l, shape, threads: int, dst_shape=None) -> list[int] | None:
    """Per element of `dst_l` (its local_offsets order), its position among the same thread's
    elements of `src_l` when every one of `threads` threads already holds what it needs (a
    conversion between the two is a register renaming, as Triton's mma -> dot_op shortcut), else
    None. Layouts are any with `thread_indices` (blocked, slice, tensor-core). With `dst_shape`
    (a tt.reshape's result shape) elements are matched by row-major flat index instead."""
    def flat(ix, sh):
        n = 0
        for i, s in zip(ix, sh):
            n = n * s + i
        return n
    pos, pick, n_src = None, None, 0
    for tid in range(threads):
        src = src_l.thread_indices(tid, shape)
        dst = dst_l.thread_indices(tid, dst_shape or shape)
        if dst_shape is not None:
            src, dst = [flat(ix, shape) for ix in src], [flat(ix, dst_shape) for ix in dst]
        if pick is not None and len(src) == n_src and len(set(src)) == n_src:
            # Each of this thread's src elements is held once, so `have` below would map
            # src[j] -> j and `p == pos` is exactly dst[k] == src[pos[k]] for every k.
            if tuple(dst) != pick(src):
                return None
            continue
        have = {ix: j for j, ix in reversed(list(enumerate(src)))}
        try:
            p = [have[ix] for ix in dst]
        except KeyError:
            return None
        if pos is None:
            pos, n_src = p, len(src)
            pick = (lambda xs: ()) if not p else (lambda xs, g=itemgetter(*p): (g(xs),)) if len(p) == 1 \
                else itemgetter(*p)
        elif p != pos:
            return None
    return pos


def unflatten(flat: Blocked, shape) -> Blocked:
    """The blocked layout of `shape` that holds each element where the 1-D layout `flat` holds its
    row-major flat index: each of flat's levels (sizePerThread, threadsPerWarp, warpsPerCTA)
    splits over the dimensions last-first; what a level has left once every dimension is covered
    replicates along dimension 0.

    This is the layout pair Triton's `inferReshapeOpEncoding` maps onto each other (equal as
    linear layouts), so a `tt.reshape` between unflatten(f, a) and unflatten(f, b) verifies
    without allow_reorder. Powers of two only, as blocked layouts are.
    """
    rank, rem, levels = len(shape), list(shape), []
    for f in (flat.size_per_thread[0], flat.threads_per_warp[0], flat.warps_per_cta[0]):
        per = [1] * rank
        for d in reversed(range(rank)):
            g = min(f, rem[d])
            per[d], rem[d], f = g, rem[d] // g, f // g
        per[0] *= f
        levels.append(tuple(per))
    return Blocked(levels[0], levels[1], levels[2], tuple(reversed(range(rank))))


def trans_order(op) -> list[int]:
    """tt.trans `order`: result dimension k is operand dimension order[k]."""
    text = str(mu.props(op)["order"])
    return [int(x) for x in text.split(":")[1].strip(" >").split(",")]


def transposed(lay, order):
    """The layout tt.trans infers for its result (Triton's inferTransOpEncoding for blocked
    layouts): per-dimension fields permuted by `order`, `order` renumbered; None for others."""
    if not isinstance(lay, Blocked):
        return None
    perm = lambda t: tuple(t[o] for o in order)
    return Blocked(perm(lay.size_per_thread), perm(lay.threads_per_warp), perm(lay.warps_per_cta),
                   tuple(order.index(o) for o in lay.order))


def joined(lay):
    """The layout tt.join infers for its result from its operands' (Triton's
    inferDefaultJoinOpEncoding for blocked layouts): a new most-minor dimension of size 2 held
    whole by each thread. None for other encodings."""
    if not isinstance(lay, Blocked):
        return None
    return Blocked(lay.size_per_thread + (2,), lay.threads_per_warp + (1,), lay.warps_per_cta + (1,),
                   (lay.rank,) + lay.order)


def split_result(lay):
    """The layout tt.split infers for its results from its operand's (Triton's
    inferSplitOpEncoding for blocked layouts): the last dimension dropped; None unless each
    thread holds both of its elements (sizePerThread 2, one lane and one warp along it), the
    only operand layout Triton's verifier accepts."""
    if not isinstance(lay, Blocked):
        return None
    last = lay.rank - 1
    if (lay.size_per_thread[last], lay.threads_per_warp[last], lay.warps_per_cta[last]) != (2, 1, 1):
        return None
    return Blocked(lay.size_per_thread[:-1], lay.threads_per_warp[:-1], lay.warps_per_cta[:-1],
                   tuple(o for o in lay.order if o != last))


@lru_cache(maxsize=1024)
def constant_groups(layout, shape: tuple[int, ...], constancy: tuple[int, ...],
                    threads: int) -> tuple[int, ...] | None:
    """For a value constant over aligned blocks of `constancy` elements along each dimension
    (the axis analysis' constancy, Triton's AxisInfo), per element of `layout` over `shape` (its
    local order) the first element that holds the same value in every one of `threads`
    threads, or None when no two elements share. An elementwise op then computes one element
    per group (Triton's maybeDeduplicate, ElementwiseOpToLLVM.cpp): attention's key mask
    `where(cols < N_CTX, 0, -1e6)` on the accumulator's column slice is 4 selects per thread
    where its 16 columns pair up by 8 but N_CTX % 16 == 0 makes blocks of 16. `layout` is any
    with `thread_indices` (blocked, slice, tensor-core)."""
    if all(c <= 1 for c in constancy):
        return None
    blocks = [[tuple(i // c for i, c in zip(ix, constancy)) for ix in layout.thread_indices(tid, shape)]
              for tid in range(threads)]
    first: dict = {}
    out = tuple(first.setdefault(k, j) for j, k in enumerate(zip(*blocks)))  # k: element j's block per thread
    return out if len(first) < len(out) else None
