"""tt.scan in registers (llir.scan): the lowering run over every thread of a CTA at once (numpy arrays
for values, a warp's lanes for shuffles, a dict for shared memory) against numpy's scans, and the
shuffle structure of its PTX against Triton's for the scan kernels of kernels/ and tests/data/gpu_kernels."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_rows import rows
from llvmlite import ir
from oracle import ROW_SOURCE, run_triton, triton_python

import ttbuild
from ttbuild.backend.analysis.allocation import scan_bytes, scan_plan, segment_plan
from ttbuild.backend.analysis.layout import default_blocked
from ttbuild.backend.ir.encodings import Blocked, Slice
from ttbuild.backend.llir import scan as lscan
from ttbuild.backend.llir.scan_smem import scan_through_smem

MOD = 1000003  # affine maps combine modulo a prime: exact, and the order of combination shows
I32 = ir.IntType(32)


class V(ir.Value):
    """One i32 (or i1) value in every thread of the CTA."""

    def __init__(self, arr, type=I32):
        self.arr, self.type = np.asarray(arr, dtype=np.int64), type


def _arr(x, n):
    return np.full(n, x.constant, dtype=np.int64) if isinstance(x, ir.Constant) else x.arr


class Builder:
    """The llvmlite IRBuilder calls llir.scan makes, evaluated in every thread of the CTA."""

    def __init__(self, cta):
        self.cta, self.n = cta, cta.threads

    def _op(self, f, a, b, t=None):
        return V(f(_arr(a, self.n), _arr(b, self.n)), t or a.type)

    def and_(self, a, b): return self._op(np.bitwise_and, a, b)  # noqa: E704
    def or_(self, a, b): return self._op(np.bitwise_or, a, b)  # noqa: E704
    def xor(self, a, b): return self._op(np.bitwise_xor, a, b)  # noqa: E704
    def lshr(self, a, b): return self._op(np.right_shift, a, b)  # noqa: E704
    def add(self, a, b): return self._op(np.add, a, b)  # noqa: E704
    def mul(self, a, b): return self._op(np.multiply, a, b)  # noqa: E704
    def sub(self, a, b): return self._op(np.subtract, a, b)  # noqa: E704
    def udiv(self, a, b): return self._op(np.floor_divide, a, b)  # noqa: E704
    def urem(self, a, b): return self._op(np.remainder, a, b)  # noqa: E704
    def bitcast(self, v, t): return V(_arr(v, self.n), t)  # noqa: E704
    trunc = zext = bitcast

    def icmp_unsigned(self, op, a, b):
        f = {"<": np.less, ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}[op]
        return self._op(f, a, b, ir.IntType(1))

    def select(self, c, x, y):
        return V(np.where(_arr(c, self.n) != 0, _arr(x, self.n), _arr(y, self.n)), x.type)

    @contextlib.contextmanager
    def if_then(self, c):
        self.cta.masks.append(_arr(c, self.n) != 0)
        yield
        self.cta.masks.pop()

    def call(self, fn, args):
        """`llvm.nvvm.shfl.sync.<mode>.i32`: out-of-range lanes keep their own value."""
        x, d = _arr(args[1], self.n), _arr(args[2], self.n)
        tid = np.arange(self.n)
        lane = tid % 32
        src = {"up": np.where(lane >= d, lane - d, lane), "down": np.where(lane + d <= 31, lane + d, lane),
               "idx": d % 32}[fn.split(".")[4]]
        return V(x[tid - lane + src], args[1].type)

    def store(self, v, ptr):
        """Threads inside the current if_then store; two different values at one address between
        two barriers fail (a race)."""
        live = np.logical_and.reduce(self.cta.masks) if self.cta.masks else np.ones(self.n, bool)
        for t in np.nonzero(live)[0]:
            at, x = int(ptr.arr[t]), int(v.arr[t])
            assert 0 <= at < self.cta.bytes, f"store at {at} outside the {self.cta.bytes} bytes planned"
            assert self.cta.fresh.setdefault(at, x) == x, f"two stores of different values at {at} between barriers"
            self.cta.mem[at] = x

    def load(self, ptr):
        """Threads outside the current if_then read 0 (their value is never used)."""
        live = np.logical_and.reduce(self.cta.masks) if self.cta.masks else np.ones(self.n, bool)
        return V([self.cta.mem[int(a)] if ok else 0 for a, ok in zip(ptr.arr, live)], ptr.type.pointee)


class Cta:
    """The llir context calls llir.scan makes, for `warps` warps."""

    def __init__(self, warps, nbytes):
        self.threads, self.num_warps, self.masks, self.mem, self.fresh, self.bytes = 32 * warps, warps, [], {}, {}, nbytes
        self.builder = Builder(self)

    def barrier(self):
        self.fresh = {}

    def sreg(self, name):
        assert name == "tid.x"
        return V(np.arange(self.threads))

    def lane_warp(self):
        t = np.arange(self.threads)
        return V(t % 32), V(t // 32)

    def smem(self, off):
        return V(_arr(off, self.threads))

    def indices(self, layout, shape):
        per = [layout.thread_indices(t, shape) for t in range(self.threads)]
        return [tuple(V([p[j][d] for p in per]) for d in range(len(shape))) for j in range(len(per[0]))]

    def before_smem_write(self): pass  # noqa: E704
    def after_smem_read(self): pass  # noqa: E704
    def intrinsic(self, name, *_): return name  # noqa: E704


class Src:
    def __init__(self, elems, layout, shape):
        self.elems, self.layout, self.shape = elems, layout, shape


def _reference(xs, axis, reverse):
    """numpy's cumsum (one operand) or the affine-map scan (two: (a1, b1) then (a2, b2) is
    (a1 a2, b1 a2 + b2) mod MOD) along `axis`, from the end for `reverse`."""
    xs = [np.flip(x, axis) if reverse else x for x in xs]
    if len(xs) == 1:
        out = [np.cumsum(xs[0], axis=axis)]
    else:
        a, b = (np.moveaxis(x, axis, 0).copy() for x in xs)
        for i in range(1, a.shape[0]):
            b[i] = (b[i - 1] * a[i] + b[i]) % MOD
            a[i] = a[i - 1] * a[i] % MOD
        out = [np.moveaxis(a, 0, axis), np.moveaxis(b, 0, axis)]
    return [np.flip(o, axis) if reverse else o for o in out]


def emulate(layout, shape, axis, warps, reverse, nops, seed=0, smem=False):
    """Runs llir.scan's lowering (`smem`: llir.scan_smem's) on random integers in `layout` over all
    threads; asserts every thread's every element equals the reference and shared memory stays
    within the bytes planned."""
    shape = tuple(shape)
    rng = np.random.default_rng(seed)
    xs = [rng.integers(1, 1000, size=shape) for _ in range(nops)]
    _, P, _ = segment_plan(shape, axis, 32 * warps)
    nbytes = (np.prod(shape) + np.prod(shape) // shape[axis] * P) * 4 * nops if smem else \
        scan_bytes(layout, shape, axis, 32 * warps, ["i32"] * nops)
    cta = Cta(warps, nbytes)
    held = [layout.thread_indices(t, shape) for t in range(cta.threads)]
    srcs = [Src([V([x[h[j]] for h in held]) for j in range(len(held[0]))], layout, shape) for x in xs]
    if nops == 1:
        combine = lambda p, q: [cta.builder.add(p[0], q[0])]  # noqa: E731
    else:
        combine = lambda p, q: [V(p[0].arr * q[0].arr % MOD), V((p[1].arr * q[0].arr + q[1].arr) % MOD)]  # noqa: E731
    spec = lscan.Spec(axis, reverse, ("i32",) * nops, combine)
    outs = (scan_through_smem if smem else lscan.lower_scan)(cta, spec, srcs)
    ref = _reference(xs, axis, reverse)
    for k, out in enumerate(outs):
        for j, v in enumerate(out.elems):
            want = np.array([ref[k][h[j]] for h in held])
            assert np.array_equal(v.arr, want), (j, k, np.nonzero(v.arr != want)[0][:8])
    return cta


CASES = [  # (layout, shape, axis, warps): one line over warps, lanes only, with copies, 2-D, slices
    (Blocked((8,), (32,), (8,), (0,)), (4096,), 0, 8),  # a row of a sparsemax-like kernel: 2 chunks, 8 warps
    (Blocked((4,), (32,), (4,), (0,)), (256,), 0, 4),  # 2 of 4 warps hold distinct data
    (Blocked((4,), (32,), (1,), (0,)), (512,), 0, 1),  # one warp, 4 chunks carried by shfl.idx
    (Blocked((1,), (32,), (4,), (0,)), (8,), 0, 4),  # copies in lanes and warps
    (Blocked((8,), (32,), (1,), (0,)), (4,), 0, 1),  # one thread's elements only
    (Blocked((1, 1), (2, 16), (4, 1), (1, 0)), (16, 32), 0, 4),
    (Blocked((1, 4), (4, 8), (2, 2), (1, 0)), (8, 64), 1, 4),
    (Blocked((2, 1), (8, 4), (1, 4), (0, 1)), (64, 16), 0, 4),
    (Blocked((1, 2), (8, 4), (2, 2), (1, 0)), (4, 8), 0, 4),  # the block smaller than the layout
    (Blocked((1, 1), (4, 8), (4, 2), (0, 1)), (128, 64), 0, 8),
    (Slice(1, Blocked((1, 4), (4, 8), (4, 1), (1, 0))), (64,), 0, 4),
    (Slice(0, Blocked((1, 4), (4, 8), (1, 4), (1, 0))), (256,), 0, 4),
]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("nops", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}-ax{c[2]}-w{c[3]}")
def test_register_scan_matches_numpy_in_every_thread(case, nops, reverse):
    layout, shape, axis, warps = case
    cta = emulate(layout, shape, axis, warps, reverse, nops)
    assert bool(cta.mem) == (scan_plan(layout, shape, axis).red.warps > 1)  # shared memory only across warps


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("case", CASES[:4] + CASES[5:7], ids=lambda c: f"{c[1]}-ax{c[2]}-w{c[3]}")
def test_shared_memory_scan_matches_numpy_in_every_thread(case, reverse):
    """The lowering kept for layouts scan_plan does not cover (blocked ones here, to compare)."""
    layout, shape, axis, warps = case
    emulate(layout, shape, axis, warps, reverse, 2, smem=True)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2), st.lists(st.integers(0, 6), min_size=2, max_size=2), st.integers(0, 3), st.integers(0, 3),
       st.booleans(), st.integers(0, 1), st.integers(1, 2))
def test_register_scan_on_random_blocked_layouts(rank, sizes, wbits, sbits, order01, axis, nops):
    shape = tuple(2 ** s for s in sizes[:rank])
    axis = axis % rank
    lay = default_blocked(shape, 2 ** wbits, 2 ** sbits, 32, (0, 1)[:rank] if order01 or rank == 1 else (1, 0))
    emulate(lay, shape, axis, 2 ** wbits, order01, nops, seed=sum(sizes))


# --- PTX structure against Triton's -------------------------------------------------------------

ROOT = Path(__file__).parents[3]
KDIRS = (ROOT / "kernels", ROOT / "tests" / "data" / "gpu_kernels")
SCAN_ROWS = [dict(v, dir=d) for d in KDIRS for v in rows(d) if re.match(r"(scan|cumsum)", v["name"])]

# Triton compiles each row of argv[2] (JSON) from source and prints its PTX per row name.
TRITON_PTX = ROW_SOURCE + r"""
out = {}
for job in json.loads(sys.argv[2]):
    src = row_source(getattr(mod, job["kernel"]), job["signature"], job["constexprs"])
    out[job["name"]] = triton.compile(src, target=target, options={"num_warps": job["num_warps"]}).asm["ptx"]
print(json.dumps(out))
"""


def _count(ptx: str, what: str) -> int:
    return len(re.findall(what, ptx))


@pytest.fixture(scope="module")
def triton_ptx():
    triton_python()  # skip when no Triton can be found
    out = {}
    for d, f in sorted({(v["dir"], v["file"]) for v in SCAN_ROWS}):
        jobs = [{"name": v["name"], "kernel": v["kernel"], "signature": v["signature"],
                 "constexprs": v.get("constexprs", {}), "num_warps": v.get("num_warps", 4)}
                for v in SCAN_ROWS if (v["dir"], v["file"]) == (d, f)]
        out.update(json.loads(run_triton(TRITON_PTX, str(d / f), json.dumps(jobs))))
    return out


def _ours(name: str) -> dict[str, str]:
    v = next(r for r in SCAN_ROWS if r["name"] == name)
    out = ttbuild.compile(v["dir"] / v["file"], kernel=v["kernel"], signature=v["signature"],
                          constexprs=v.get("constexprs", {}), num_warps=v.get("num_warps", 4))
    return {k: out[k].decode() for k in ("ttgir", "ptx")}


@pytest.mark.parametrize("name", [v["name"] for v in SCAN_ROWS])
def test_scan_shuffles_match_triton(name, triton_ptx):
    """Ours shuffles as Triton's warpScan and carries do (one shfl.sync.up or .down of ours per
    shfl.sync.up of Triton's, fewer where Triton keeps dead ones: the carry shuffle of a one-element
    chunk, the last chunk's broadcast), and never flips a reverse scan with butterflies (Triton:
    five per element, twice); shared memory and barriers no more than Triton's, none at all where
    Triton needs none (every line within one warp)."""
    ours, theirs = _ours(name), triton_ptx[name]
    if re.search(r'"tt.scan"\(.*?\}\) : \(tensor<[^,]*, #ttg\.slice', ours["ttgir"], re.S):
        pytest.skip("ours scans the slice layout in registers, Triton converts it to a blocked one first")
    up = _count(ours["ptx"], r"shfl\.sync\.(up|down)")
    assert 0 < up <= _count(theirs, r"shfl\.sync\.up"), (up, _count(theirs, r"shfl\.sync\.up"))
    if '"tt.reduce"' not in ours["ttgir"]:
        assert _count(ours["ptx"], r"shfl\.sync\.bfly") == 0
    for what in (r"ld\.shared", r"st\.shared", r"bar\.sync"):
        assert _count(ours["ptx"], what) <= _count(theirs, what), what
    if "ld.shared" not in theirs:
        assert "ld.shared" not in ours["ptx"] and "bar.sync" not in ours["ptx"]


@pytest.mark.parametrize("name,up,stores", [("scan_long_4096", 96, 16), ("scan_long_256", 24, 4),
                                            ("scan_int_2048_w4", 48, 8), ("scan_long_512_w1", 96, 0)])
def test_lines_over_warps_shuffle_as_triton(name, up, stores, triton_ptx):
    """Lines of several chunks of several elements, where Triton's shuffles are all live: the same
    count as Triton's, and one store per chunk, operand and scan of each warp's total (none for a
    line within one warp)."""
    ptx = _ours(name)["ptx"]
    assert _count(ptx, r"shfl\.sync\.(up|down)") == up == _count(triton_ptx[name], r"shfl\.sync\.up")
    assert _count(ptx, r"st\.shared") == stores
