"""The per-program global scratch buffer a kernel with "global_scratch" metadata takes after its parameters; stdlib only.

Triton's `global_scratch`, which its launcher fills from `triton.set_allocator`.

ABI (what the compiler assumes, ttbuild.graph.meta.global_scratch): a variant whose metadata has
"global_scratch": {"size": S, "align": A} has one more kernel parameter after every parameter
`params` lists: the u64 device address of a buffer of at least S * gx * gy * gz bytes, aligned to
max(A, MIN_ALIGN); program (x, y, z) owns bytes [S * (x + gx * (y + gy * z)), + S). The kernel
writes its bytes before reading them, so the buffer is never cleared.

Where the buffer comes from: one buffer per (CUDA context, stream), shared by every kernel and
grid launched there through one driver object (`global_scratch(driver)`). Launches on one stream
run in order, so the next launch on that stream may reuse the bytes the last one used; launches on
different streams get different buffers. The per-thread default stream (handle 2) is a different
stream in every thread, so it gets a buffer per thread as well. A launch that needs more than the
stream's buffer holds replaces it with a larger one (cuMemAlloc through the driver seam, at least
twice the old capacity): the old buffer may still be read by kernels in flight, and by CUDA graphs
captured with its address, so it is not freed then but kept, retired, until `release()` (which
synchronizes every context that holds a buffer first) or the end of the process (the contexts'
teardown reclaims device memory; the per-driver registry keeps its GlobalScratch as long). With
doubling, the retired buffers of a stream total less than its live one.

The fast launch paths cache the address: the generated Python path asks `ScratchUse` (a dict
lookup), the C path (claunch.c) keeps per kernel and grid the (device, stream, size, alignment,
epoch) it last asked for and the address it got, and calls no Python while those hold. `epoch`
(a C integer the C path reads directly) is bumped whenever a buffer is replaced (growth) or freed
(`release()`, before it frees): a cached address is the live buffer of its stream while the
epoch holds, so after a growth every launch moves to the new buffer (one Python call per kernel
and grid) and the retired one is only read by kernels already in flight.

CUDA graphs: memory cannot be allocated while a stream is being captured (cuMemAlloc fails and
invalidates the capture), so a launch during capture that would need to grow its stream's buffer
raises GlobalScratchError instead, before touching the driver. Launch the kernel once on the
capture stream with the same (or a larger) grid before capturing, or `reserve()` the bytes there.
A captured graph keeps the address of its capture stream's buffer: it is not freed before
`release()`, and replays of graphs captured on one stream must not run concurrently with each other
or with eager launches on that stream (they share the buffer, as they would share the stream).

The seam (ttbuild.runtime.driver's pattern: duck-typed, so CPU tests inject fakes):
`mem_alloc(ctx, nbytes) -> address`, `mem_free(ctx, address)`, `ctx_synchronize(ctx)` (`ctx`: the
context key `driver.context()` returned) and, optional, `stream_is_capturing(stream) -> bool`.
CudaDriver offers them (cuMemAlloc, cuMemFree, cuCtxSynchronize, cuStreamIsCapturing).
"""

from __future__ import annotations

import ctypes
import itertools
import threading

from ..errors import TTBuildError
from .driver import PerDriver

MIN_ALIGN = 128          # the buffer's base alignment at least (a CUtensorMap needs 64, Triton uses 128)
GRANULE = 4096           # capacities are multiples of this
PER_THREAD_STREAM = 2    # CU_STREAM_PER_THREAD: each thread's own default stream
# CUresult names with which an allocation fails because some stream is capturing
CAPTURE_ERRORS = ("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
                  "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD")


class GlobalScratchError(TTBuildError, RuntimeError):
    """Global scratch that cannot be provided: a driver without the allocation seam, or a
    buffer that would have to grow while its stream is captured into a CUDA graph."""


_thread = threading.local()
_thread_ids = itertools.count(1)


def _thread_token() -> int:
    """This thread's number, never reused by a later thread (thread idents are): the
    per-thread default stream of a thread that ended may still run its kernels."""
    token = getattr(_thread, "token", None)
    if token is None:
        token = _thread.token = next(_thread_ids)
    return token


class _Buffer:
    __slots__ = ("address", "capacity", "base", "ctx", "stream")

    def __init__(self, address, capacity, base, ctx, stream):
        self.address, self.capacity, self.base, self.ctx, self.stream = address, capacity, base, ctx, stream


class GlobalScratch:
    """(context, stream) -> scratch buffer, for one driver (see the module doc). `buffers` is
    read without the lock (a dict lookup is atomic); growth takes the lock."""

    def __init__(self, driver):
        self.driver = driver
        self.buffers: dict = {}
        self.retired: list = []  # replaced buffers, freed by release()
        self.allocs = 0          # cuMemAlloc calls so far (tests, diagnostics)
        self._epoch = ctypes.c_uint64(0)
        # where the C launch path reads `epoch` (an address the object keeps alive)
        self.epoch_address = ctypes.addressof(self._epoch)
        self._lock = threading.Lock()

    @property
    def epoch(self) -> int:
        """Bumped when a buffer is replaced or freed: an address handed out in an older epoch
        may be retired or freed (see the module doc)."""
        return self._epoch.value

    def address(self, ctx, stream: int, nbytes: int, align: int = MIN_ALIGN, what: str = "a kernel") -> int:
        """The address of `stream`'s buffer in context `ctx` (current), grown to at least
        `nbytes` and aligned to max(align, MIN_ALIGN) first where it is not. Raises
        GlobalScratchError when growing is needed during a CUDA graph capture of `stream`."""
        key = (ctx, stream, _thread_token()) if stream == PER_THREAD_STREAM else (ctx, stream)
        buf = self.buffers.get(key)
        if buf is not None and buf.capacity >= nbytes and buf.address % align == 0:
            return buf.address
        with self._lock:
            buf = self.buffers.get(key)
            if buf is not None and buf.capacity >= nbytes and buf.address % align == 0:
                return buf.address
            return self._grow(key, ctx, stream, buf, nbytes, max(align, MIN_ALIGN), what)

    def _grow(self, key, ctx, stream, old, nbytes, align, what) -> int:
        driver = self.driver
        alloc = getattr(driver, "mem_alloc", None)
        if alloc is None:
            raise GlobalScratchError(f"{what} needs global scratch memory and {type(driver).__name__} cannot "
                                     "allocate device memory (mem_alloc): launch through ttbuild.runtime.CudaDriver")
        capturing = getattr(driver, "stream_is_capturing", None)
        if capturing is not None and capturing(stream):
            raise GlobalScratchError(
                f"{what} needs {nbytes} bytes of global scratch on stream {stream:#x}, which holds "
                f"{old.capacity if old else 0}, and the stream is being captured into a CUDA graph, where "
                "memory cannot be allocated: launch it once on this stream with this grid before capturing "
                "(or ttbuild.runtime.scratch.reserve() the bytes there)")
        capacity = -(-max(nbytes, 2 * old.capacity if old else 0, 1) // GRANULE) * GRANULE
        try:
            base = alloc(ctx, capacity)
            address = base
            if base % align:  # cuMemAlloc aligns to 256 bytes or more; a larger alignment pads
                driver.mem_free(ctx, base)
                base = alloc(ctx, capacity + align - 1)
                address = -(-base // align) * align
        except Exception as exc:
            if getattr(exc, "result", None) in CAPTURE_ERRORS:
                raise GlobalScratchError(
                    f"{what} needs {nbytes} bytes of global scratch on stream {stream:#x} and cuMemAlloc "
                    f"failed with {exc.result}: a CUDA graph capture is in progress (in global capture mode "
                    "no thread may allocate); grow the buffer before capturing, as above") from exc
            raise
        self.allocs += 1
        self.buffers[key] = _Buffer(address, capacity, base, ctx, stream)
        if old is not None:
            self.retired.append(old)
            self._epoch.value += 1  # the C path's cached addresses of `old` are stale now
        return address

    def reserve(self, ctx, stream: int, nbytes: int, align: int = MIN_ALIGN) -> int:
        """Grow `stream`'s buffer in `ctx` to at least `nbytes` now (e.g. before a CUDA graph
        capture of that stream); returns its address."""
        return self.address(ctx, stream, nbytes, align, "reserve()")

    def release(self) -> None:
        """Free every buffer, live and retired, after synchronizing each context that holds one;
        the next launch allocates anew. No launch may run concurrently, and no CUDA graph that
        captured one of these addresses may be replayed afterwards."""
        with self._lock:
            self._epoch.value += 1  # before anything is freed: cached addresses are stale now
            held = list(self.buffers.values()) + self.retired
            self.buffers, self.retired = {}, []
            for ctx in dict.fromkeys(b.ctx for b in held):
                self.driver.ctx_synchronize(ctx)
            for b in held:
                self.driver.mem_free(b.ctx, b.base)

    def held(self) -> int:
        """Bytes allocated now, live and retired buffers."""
        return sum(b.capacity for b in list(self.buffers.values()) + self.retired)


class ScratchUse:
    """`use(stream, programs) -> address` for one variant in one context: the buffer of
    `stream` grown to `size * programs` bytes (the launch paths call it; claunch.c caches what
    it returns while `scratch.epoch` holds)."""

    __slots__ = ("scratch", "ctx", "size", "align", "what")

    def __init__(self, scratch: GlobalScratch, ctx, size: int, align: int, what: str):
        self.scratch, self.ctx, self.size, self.align, self.what = scratch, ctx, size, align, what

    def __call__(self, stream: int, programs: int) -> int:
        return self.scratch.address(self.ctx, stream, self.size * programs, self.align, self.what)


global_scratch = PerDriver(GlobalScratch)  # driver -> its GlobalScratch (one per driver object)


def reserve(nbytes: int, stream: int = 0, device: int | None = None, driver=None) -> int:
    """Make `stream`'s scratch buffer on `device` (default: the current context's) hold at least
    `nbytes`, e.g. before capturing a CUDA graph on that stream; returns its address. `driver`:
    the one the launches go through (default: the process-wide one)."""
    if driver is None:
        from .driver import default_driver

        driver = default_driver()
    ctx, _ = driver.context(device)
    return global_scratch(driver).reserve(ctx, stream, nbytes)


def release(driver=None) -> None:
    """GlobalScratch.release() of `driver` (default: the process-wide one)."""
    if driver is None:
        from .driver import default_driver

        driver = default_driver()
    global_scratch(driver).release()
