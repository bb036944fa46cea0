"""Distributed encodings (a tensor spread over a CTA's threads) as frozen dataclasses with printer (`attr`) and per-thread element map.

`#ttg.blocked`, `#ttg.slice`, `#ttg.nvidia_mma` (mma.sync and wgmma accumulators) and `#ttg.dot_op`
(tensor-core and FMA operands).

Every distributed layout answers the same questions LLIR relies on: a thread owns
`local_offsets(shape)` (fixed offsets, the same in every thread) added to a base index that
depends only on its lane and warp (`thread_indices`), wrapped modulo the shape where the
layout's tile exceeds it (several warps then hold the same elements).

Blocked: each thread owns `sizePerThread` contiguous elements per dimension, `threadsPerWarp`
threads and `warpsPerCTA` warps tile the rest, `order` lists the dimensions fastest-first; the
tile repeats (or wraps, broadcasting) to cover the shape (Triton `BlockedEncodingAttr`).

Tensor-core fragment maps (PTX ISA 9.7.14.5.8, "Matrix Fragments for mma.m16n8k16"; CuTe
SM80_16x8x16; ../shared/TENSORCORE.md section 3), lane = 4g + t (g = lane >> 2, t = lane & 3),
kW = kWidth = 32 / element bits (elements of one operand register, consecutive along K):
- accumulator 16x8 per warp: c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g+8, 2t), (g+8, 2t+1);
- A 16x(8 kW): register r holds row g + 8 (r & 1), columns kW t + 4 kW (r >> 1) + [0, kW);
- B (8 kW)x8: register r holds rows kW t + 4 kW r + [0, kW), column g.
Warps tile the accumulator with warpsPerCTA, dimension N fastest (Triton's MMAv2 warp order);
an A fragment is shared by the warps of one row of warps, a B fragment by one column.
Triton: include/triton/Dialect/TritonGPU/IR/TritonGPUAttrDefs.td (BlockedEncodingAttr,
SliceEncodingAttr, NvidiaMmaEncodingAttr, DotOperandEncodingAttr). Parsing: ttbuild.backend.ir.encodings.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from itertools import product
from math import prod

from ttbuild.backend.ir.attrtext import fmt_list, int_field, int_list


@dataclass(frozen=True)
class Blocked:
    """`#ttg.blocked<{sizePerThread, threadsPerWarp, warpsPerCTA, order}>` (see the module docstring); per-dimension tuples, `order` fastest-first."""
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.order)

    def attr(self) -> str:
        """Triton's spelling, e.g. `#ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>`."""
        f = fmt_list
        return (f"#ttg.blocked<{{sizePerThread = {f(self.size_per_thread)}, threadsPerWarp = "
                f"{f(self.threads_per_warp)}, warpsPerCTA = {f(self.warps_per_cta)}, order = {f(self.order)}}}>")

    @classmethod
    def parse(cls, text: str) -> "Blocked":
        """Inverse of attr(); ValueError if `text` is not a blocked encoding."""
        if not text.startswith("#ttg.blocked<"):
            raise ValueError(f"not a blocked encoding: {text}")
        return cls(int_list(text, "sizePerThread"), int_list(text, "threadsPerWarp"), int_list(text, "warpsPerCTA"),
                   int_list(text, "order"))

    def tile(self, d: int) -> int:
        """Elements one CTA covers along dimension d in one repetition."""
        return self.size_per_thread[d] * self.threads_per_warp[d] * self.warps_per_cta[d]

    def reps(self, shape, d: int) -> int:
        """How many times the CTA tile repeats along dimension d to cover `shape` (at least 1)."""
        return max(1, shape[d] // self.tile(d))

    def elems_per_thread(self, shape) -> int:
        """Elements each thread holds of a tensor of `shape`."""
        n = 1
        for d in range(self.rank):
            n *= min(self.size_per_thread[d], shape[d]) * self.reps(shape, d)
        return n

    def local_offsets(self, shape) -> list[tuple[int, ...]]:
        """Per-thread element j -> its offset from the thread's base index, per dimension.

        Elements enumerate with order[0] fastest, so a run of size_per_thread[order[0]] elements is
        contiguous in memory along the fastest dimension (what vector loads need).
        """
        per_dim = []
        for d in range(self.rank):
            spt = min(self.size_per_thread[d], shape[d])
            per_dim.append([r * self.tile(d) + k for r in range(self.reps(shape, d)) for k in range(spt)])
        # product() varies its last argument fastest: feed dims slowest-first.
        dims_slow_first = list(reversed(self.order))
        out = []
        for combo in product(*(per_dim[d] for d in dims_slow_first)):
            off = [0] * self.rank
            for d, v in zip(dims_slow_first, combo):
                off[d] = v
            out.append(tuple(off))
        return out

    def thread_indices(self, tid: int, shape) -> list[tuple[int, ...]]:
        """Reference (pure Python) of what the LLIR index math computes: thread `tid`'s element
        indices, in local_offsets order. Lanes and warps split over dimensions fastest-first."""
        lane, warp = tid % 32, tid // 32
        base = [0] * self.rank
        for i, d in enumerate(self.order):
            tpw, wpc = self.threads_per_warp[d], self.warps_per_cta[d]
            ld, lane = lane % tpw, lane // tpw
            wd = warp % wpc if i < self.rank - 1 else warp
            warp //= wpc
            base[d] = (wd * tpw + ld) * self.size_per_thread[d]
        return [tuple((base[d] + off[d]) % shape[d] for d in range(self.rank))
                for off in self.local_offsets(shape)]


@dataclass(frozen=True)
class Slice:
    """`#ttg.slice<{dim, parent}>`: the parent layout with dimension `dim` removed, as a reduction
    along `dim` leaves it (Triton `SliceEncodingAttr`). A thread owns the parent's elements over the
    parent shape with a 1 inserted at `dim`; indices are the parent's with `dim` dropped."""
    dim: int
    parent: "Blocked | Slice"

    @property
    def rank(self) -> int:
        """Number of dimensions (the parent's minus one)."""
        return self.parent.rank - 1

    @property
    def order(self) -> tuple[int, ...]:
        """The parent's order without `dim`, renumbered."""
        return tuple(o - (o > self.dim) for o in self.parent.order if o != self.dim)

    @property
    def size_per_thread(self) -> tuple[int, ...]:
        """The parent's sizePerThread without `dim`."""
        s = self.parent.size_per_thread
        return s[:self.dim] + s[self.dim + 1:]

    def attr(self) -> str:
        """Triton's spelling, `#ttg.slice<{dim = d, parent = ...}>`."""
        return f"#ttg.slice<{{dim = {self.dim}, parent = {self.parent.attr()}}}>"

    def parent_shape(self, shape) -> tuple[int, ...]:
        """`shape` with a 1 inserted at `dim`: the parent tensor the slice is taken from."""
        shape = tuple(shape)
        return shape[:self.dim] + (1,) + shape[self.dim:]

    def _drop(self, t):
        return t[:self.dim] + t[self.dim + 1:]

    def elems_per_thread(self, shape) -> int:
        """Elements each thread holds of a tensor of `shape` (the parent's over parent_shape)."""
        return self.parent.elems_per_thread(self.parent_shape(shape))

    def local_offsets(self, shape) -> list[tuple[int, ...]]:
        """The parent's local offsets over parent_shape, `dim` dropped."""
        return [self._drop(o) for o in self.parent.local_offsets(self.parent_shape(shape))]

    def thread_indices(self, tid: int, shape) -> list[tuple[int, ...]]:
        """Thread `tid`'s element indices (the parent's with `dim` dropped)."""
        return [self._drop(o) for o in self.parent.thread_indices(tid, self.parent_shape(shape))]


class _Affine:
    """Shared machinery: `_tile_offsets` (a thread's offsets inside one warp tile), `_warp_tile`
    (elements one warp covers per dimension), `_warps` (warps per dimension, 1 where the
    fragment is replicated), `_lane_base`/`_warp_coords`; repetitions slowest-first."""

    def tile(self, d: int) -> int:
        """Elements the CTA covers along d in one repetition."""
        return self._warp_tile()[d] * self._warps()[d]

    def reps(self, shape, d: int) -> int:
        """Repetitions of the CTA tile along dimension `d` to cover `shape[d]` (at least 1: a smaller shape is
        replicated)."""
        return max(1, shape[d] // self.tile(d))

    def elems_per_thread(self, shape) -> int:
        """Elements each thread holds of a tensor of `shape` in this layout."""
        return len(self.local_offsets(shape))

    def rep_grid(self, shape) -> list[tuple[int, ...]]:
        """The repetition coordinates in element order (dimension 0 slowest)."""
        return list(product(*(range(self.reps(shape, d)) for d in range(len(shape)))))

    def local_offsets(self, shape) -> list[tuple[int, ...]]:
        """Offsets from the thread base, repetitions slowest-first; along a dimension the shape
        makes smaller than one warp's tile (a size-1 dimension of a broadcast operand, a reduced
        dimension) only the offsets inside the shape are kept, as blocked layouts clip
        sizePerThread, so each thread holds each of its elements once."""
        return list(_offsets(self, tuple(shape)))

    def _rep_order(self, shape):
        return self.rep_grid(shape)

    def thread_base(self, lane: int, warp: int) -> tuple[int, ...]:
        """Index of this thread's element 0 before wrapping (pure Python reference of the LLIR)."""
        lb = self._lane_base(lane)
        wc = self._warp_coords(warp)
        wt = self._warp_tile()
        return tuple(wc[d] * wt[d] + lb[d] for d in range(len(lb)))

    def thread_indices(self, tid: int, shape) -> list[tuple[int, ...]]:
        """The tensor indices thread `tid` (0..32*num_warps-1) holds, in register order, wrapped modulo `shape` where
        the layout covers more than the tensor."""
        base = self.thread_base(tid % 32, tid // 32)
        offs = _offsets(self, tuple(shape))
        if len(shape) == 2:  # the common case, without the per-dimension generator
            (b0, b1), (s0, s1) = base, shape
            return [((b0 + o0) % s0, (b1 + o1) % s1) for o0, o1 in offs]
        return [tuple((base[d] + off[d]) % shape[d] for d in range(len(shape))) for off in offs]


def _offsets(layout: _Affine, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """_Affine.local_offsets, computed once per (layout, shape): the layouts are frozen values
    and same_thread_map asks for the same offsets once per thread (256 times per conversion)."""
    try:
        return _cached_offsets(layout, shape)
    except TypeError:  # a layout built with list fields is not hashable: compute it every time
        return _affine_offsets(layout, shape)


def _affine_offsets(layout: _Affine, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    wt = layout._warp_tile()
    inner = [off for off in layout._tile_offsets()
             if all(off[d] < shape[d] or shape[d] >= wt[d] for d in range(len(shape)))]
    tiles = [layout.tile(d) for d in range(len(shape))]
    out = []
    for rep in layout._rep_order(shape):
        for off in inner:
            out.append(tuple(rep[d] * tiles[d] + off[d] for d in range(len(shape))))
    return tuple(out)


_cached_offsets = functools.lru_cache(maxsize=1024)(_affine_offsets)


@dataclass(frozen=True)
class NvidiaMma(_Affine):
    """`#ttg.nvidia_mma<{versionMajor, versionMinor = 0, warpsPerCTA, instrShape}>`: a
    tensor-core accumulator.

    Version 2, mma.sync: m16n8 tiles, rank 2 or rank 3 with a leading batch dimension whose
    instrShape entry is 1; warps N fastest.
    Version 3, wgmma (rank 2, instrShape = [16, n, k]): each warp owns 16 rows by n columns of
    its warpgroup's m64nNk result, the mma.sync C pattern repeated every 8 columns (PTX ISA
    9.7.15.5.1, "Matrix fragments for wgmma .m64nNk16": d[4j..4j+3] = rows g, g, g+8, g+8 at
    columns 8j + 2t, +1); warps M fastest, so four consecutive warps (a warpgroup) stack 64 rows
    (Triton: nvidiaMmaToLinearLayout, row-major warp order only below Hopper)."""
    warps_per_cta: tuple[int, ...]
    instr_shape: tuple[int, ...] = (16, 8)
    version: tuple[int, int] = (2, 0)

    @property
    def rank(self) -> int:
        """Number of dimensions (2, or 3 with a batch dimension)."""
        return len(self.warps_per_cta)

    @property
    def order(self) -> tuple[int, ...]:
        """Dimensions fastest-first: the last one first."""
        return tuple(reversed(range(self.rank)))

    @property
    def size_per_thread(self) -> tuple[int, ...]:
        """Two consecutive columns per thread (c0, c1 of the fragment)."""
        return (1,) * (self.rank - 1) + (2,)

    def attr(self) -> str:
        """Triton's spelling, `#ttg.nvidia_mma<{versionMajor, versionMinor, warpsPerCTA, instrShape}>`."""
        return (f"#ttg.nvidia_mma<{{versionMajor = {self.version[0]}, versionMinor = {self.version[1]}, "
                f"warpsPerCTA = {fmt_list(self.warps_per_cta)}, instrShape = {fmt_list(self.instr_shape)}}}>")

    @classmethod
    def parse(cls, text: str) -> "NvidiaMma":
        """Inverse of attr(); ValueError when a field is missing."""
        return cls(int_list(text, "warpsPerCTA"), int_list(text, "instrShape"),
                   (int_field(text, "versionMajor"), int_field(text, "versionMinor")))

    @property
    def is_hopper(self) -> bool:
        """Version 3: a wgmma accumulator."""
        return self.version[0] == 3

    @property
    def warp_order(self) -> tuple[int, ...]:
        """Dimensions fastest-first in which warp indices advance: N first for mma.sync, M first
        for wgmma (a warpgroup's four warps stack along M)."""
        return (0, 1) if self.is_hopper else tuple(reversed(range(self.rank)))

    def warp_stride(self, d: int) -> int:
        """How far apart (in warps) two warps adjacent along dimension d are."""
        order = self.warp_order
        return prod(self.warps_per_cta[e] for e in order[:order.index(d)])

    def _warp_tile(self):
        if self.is_hopper:
            return (16, self.instr_shape[1])
        return (1,) * (self.rank - 2) + (16, 8)

    def _warps(self):
        return self.warps_per_cta

    def _tile_offsets(self):
        z = (0,) * (self.rank - 2)
        n8 = self.instr_shape[1] // 8 if self.is_hopper else 1
        return [z + (r, 8 * j + c) for j in range(n8) for r, c in ((0, 0), (0, 1), (8, 0), (8, 1))]

    def _lane_base(self, lane: int):
        return (0,) * (self.rank - 2) + (lane >> 2, 2 * (lane & 3))

    def warp_coords(self, warp: int) -> tuple[int, ...]:
        """Warp index -> its coordinate per dimension (in `warp_order`); the slowest dimension's
        coordinate keeps any excess warps (they wrap, as blocked layouts do)."""
        out = [0] * self.rank
        for d in self.warp_order:
            w = self.warps_per_cta[d]
            out[d] = warp % w
            warp //= w
        return tuple(out)

    def _warp_coords(self, warp: int):
        return self.warp_coords(warp)


class _OperandDims:
    """The dimensions of a dot operand (`op_idx` 0: A, [..., M, K]; 1: B, [..., K, N]) over its
    `parent` layout."""

    @property
    def rank(self) -> int:
        """Number of dimensions (the parent's)."""
        return self.parent.rank

    @property
    def k_dim(self) -> int:
        """The reduction dimension: the last for A, the one before it for B."""
        return self.rank - 1 if self.op_idx == 0 else self.rank - 2


@dataclass(frozen=True)
class DotOperand(_OperandDims, _Affine):
    """`#ttg.dot_op<{opIdx, parent = #ttg.nvidia_mma<...>, kWidth}>`: operand A (opIdx 0,
    [..., M, K]) or B (opIdx 1, [..., K, N]) of mma.sync, kWidth elements per 32-bit register."""
    op_idx: int
    parent: NvidiaMma
    k_width: int

    @property
    def order(self) -> tuple[int, ...]:
        """Dimensions fastest-first: K first (a register's kWidth elements run along K)."""
        k, r = self.k_dim, self.rank
        return (k,) + tuple(d for d in reversed(range(r)) if d != k)

    @property
    def size_per_thread(self) -> tuple[int, ...]:
        """kWidth consecutive elements along K, 1 elsewhere."""
        s = [1] * self.rank
        s[self.k_dim] = self.k_width
        return tuple(s)

    @property
    def k_instr(self) -> int:
        """K of one mma.sync: 16 for 16-bit, 8 for tf32, 32 for 8-bit elements."""
        return 8 * self.k_width

    def attr(self) -> str:
        """Triton's spelling, `#ttg.dot_op<{opIdx, parent = #ttg.nvidia_mma<...>, kWidth}>`."""
        return f"#ttg.dot_op<{{opIdx = {self.op_idx}, parent = {self.parent.attr()}, kWidth = {self.k_width}}}>"

    def _warp_tile(self):
        z = (1,) * (self.rank - 2)
        return z + ((16, self.k_instr) if self.op_idx == 0 else (self.k_instr, 8))

    def _warps(self):
        w = list(self.parent.warps_per_cta)
        w[self.k_dim] = 1  # K is never split over warps: every warp holds all of K
        return tuple(w)

    def _tile_offsets(self):
        z = (0,) * (self.rank - 2)
        kw = self.k_width
        out = []
        if self.op_idx == 0:
            for r in range(4):
                for e in range(kw):
                    out.append(z + (8 * (r & 1), 4 * kw * (r >> 1) + e))
        else:
            for r in range(2):
                for e in range(kw):
                    out.append(z + (4 * kw * r + e, 0))
        return out

    def _lane_base(self, lane: int):
        g, t = lane >> 2, lane & 3
        z = (0,) * (self.rank - 2)
        return z + ((g, self.k_width * t) if self.op_idx == 0 else (self.k_width * t, g))

    def _warp_coords(self, warp: int):
        wc = list(self.parent.warp_coords(warp))
        wc[self.k_dim] = 0
        if self.op_idx == 0:
            wc[self.rank - 1] = 0
        else:
            wc[self.rank - 2] = 0
        return tuple(wc)

    def _rep_order(self, shape):
        """Repetitions with K fastest: one (m or n) tile's fragments for every k step in a row."""
        return self.rep_grid(shape) if self.op_idx == 0 else sorted(
            self.rep_grid(shape), key=lambda r: tuple(r[:-2]) + (r[-1], r[-2]))

    def regs(self, shape) -> dict:
        """(batch rep, m-or-n rep, k rep) -> this thread's element positions per 32-bit register
        (4 registers for A, 2 for B, kWidth elements each, in local_offsets order)."""
        per = len(self._tile_offsets())
        out = {}
        for i, rep in enumerate(self._rep_order(shape)):
            b = rep[0] if self.rank == 3 else 0
            mn, k = (rep[-2], rep[-1]) if self.op_idx == 0 else (rep[-1], rep[-2])
            out[(b, mn, k)] = [list(range(i * per + r * self.k_width, i * per + (r + 1) * self.k_width))
                               for r in range(per // self.k_width)]
        return out


@dataclass(frozen=True)
class FmaOperand(_OperandDims):
    """`#ttg.dot_op<{opIdx, parent = #ttg.blocked<...>}>`: an operand of the FMA dot (Triton's
    fallback where no mma shape applies, e.g. fp64). A thread holds, for every row (A) or
    column (B) of the result it owns under the blocked parent, the whole K extent."""
    op_idx: int
    parent: object  # Blocked

    @property
    def order(self) -> tuple[int, ...]:
        """The blocked parent's order."""
        return self.parent.order

    @property
    def size_per_thread(self) -> tuple[int, ...]:
        """The blocked parent's sizePerThread."""
        return self.parent.size_per_thread

    def attr(self) -> str:
        """Triton's spelling, `#ttg.dot_op<{opIdx, parent = #ttg.blocked<...>}>`."""
        return f"#ttg.dot_op<{{opIdx = {self.op_idx}, parent = {self.parent.attr()}}}>"

    def tile(self, d: int) -> int:
        """Elements the CTA covers along d in one repetition (0 along K: every thread holds all of K)."""
        return 0 if d == self.k_dim else self.parent.tile(d)  # 0: K never wraps

    def outer_offsets(self, shape) -> list[tuple[int, ...]]:
        """The parent's distinct offsets over every dimension but K (batch and M for A, batch and
        N for B; the K position holds 0), first-seen order. The result's dimension at the
        operand's K position (N for A, M for B) does not select operand elements."""
        pshape = list(shape)
        pshape[self.k_dim] = self.parent.tile(self.k_dim)
        seen = {}
        for o in self.parent.local_offsets(tuple(pshape)):
            key = o[:self.k_dim] + (0,) + o[self.k_dim + 1:]
            seen.setdefault(key, None)
        return list(seen)

    def local_offsets(self, shape) -> list[tuple[int, ...]]:
        """outer_offsets, each repeated for every k of the K extent (K fastest)."""
        out = []
        for o in self.outer_offsets(shape):
            for k in range(shape[self.k_dim]):
                out.append(o[:self.k_dim] + (k,) + o[self.k_dim + 1:])
        return out

    def elems_per_thread(self, shape) -> int:
        """Elements each thread holds of an operand of `shape`."""
        return len(self.local_offsets(shape))

    def thread_base(self, lane: int, warp: int) -> tuple[int, ...]:
        """Index of this thread's element 0: its first parent element with K at 0."""
        shape = [self.parent.tile(d) for d in range(self.rank)]
        first = self.parent.thread_indices(warp * 32 + lane, tuple(shape))[0]
        return first[:self.k_dim] + (0,) + first[self.k_dim + 1:]

    def thread_indices(self, tid: int, shape) -> list[tuple[int, ...]]:
        """Thread `tid`'s element indices, in local_offsets order, wrapped modulo `shape`."""
        base = self.thread_base(tid % 32, tid // 32)
        return [tuple((base[d] + off[d]) % shape[d] for d in range(len(shape)))
                for off in self.local_offsets(shape)]
