"""The launch seam: a Driver loads cubins and launches functions; CudaDriver does it through cuda.bindings.driver, imported lazily.

Any object with the three methods of `Driver` can stand in (tests inject a recording fake through
`ttbuild.runtime.load(..., driver=...)`). Every CUresult is checked; failures raise CudaError
carrying the result's name (e.g. CUDA_ERROR_NO_BINARY_FOR_GPU) and the call that failed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import weakref
from typing import Protocol

from ..errors import TTBuildError

# Dynamic shared memory above this needs cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
# (CUDA C Programming Guide, "Shared Memory": 48 KB default cap on dynamic allocations).
DEFAULT_SHARED_LIMIT = 48 * 1024


class CudaError(TTBuildError, RuntimeError):
    """A CUDA driver call failed: `.result` is the CUresult name, `.call` the driver function."""

    def __init__(self, call: str, result: str, detail: str = ""):
        self.call, self.result = call, result
        msg = f"{call} failed: {result}"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class Capability(tuple):
    """A device's compute capability, (major, minor) to every reader of a tuple, with the one fact of its GPU
    model a variant may also depend on: `sm_count` (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT; None when the
    driver does not say). A variant built for a GPU model runs only where it matches (Variant.model_ok)."""

    sm_count: int | None

    def __new__(cls, major: int, minor: int, sm_count: int | None = None):
        self = super().__new__(cls, (major, minor))
        self.sm_count = sm_count
        return self


class Driver(Protocol):
    """What the runtime needs of a CUDA driver (CudaDriver through cuda.bindings, CtypesCudaDriver through libcuda,
    the tests' fakes): contexts, module loading and launching. Optional methods (on_device, stream_wait,
    launch_pdl, driver_version, the C path's c_launch_address / function_address / check_code) enable what needs
    them."""
    def context(self, device_hint: int | None) -> tuple[object, tuple[int, int]]:
        """(hashable key of the current CUDA context, its device's compute capability);
        makes the primary context of device_hint (default 0) current if none is."""

    def load_function(self, image: bytes, entry: str, shared: int) -> object:
        """Load a cubin into the current context and return the handle of kernel `entry`."""

    def launch(self, function, grid: tuple[int, int, int], block_x: int, shared: int,
               stream: int, params_address: int, values: tuple) -> None:
        """cuLaunchKernel; params_address points to a void*[] of the kernel's parameters.
        `values` are the same parameters as Python values (for fakes and error messages)."""

    # Optional, used when present:
    #   cu_launch, cu_success: cuda.bindings' cuLaunchKernel and CUDA_SUCCESS, called directly
    #     by the generated launch path (ttbuild.runtime.fastpath) instead of `launch`;
    #   check(call, result, detail): raise CudaError for a failed cu_launch result;
    #   c_launch_address, function_address(fn), check_code(call, err, detail): libcuda's
    #     cuLaunchKernel as a C function address, the raw CUfunction of a loaded function and
    #     CudaError for a CUresult code: what the C launch path (ttbuild.runtime.cext) needs;
    #   on_device(device): a context manager making that device's primary context current;
    #   launch_pdl(...): `launch` with programmatic dependent launch (`launch_pdl=True`);
    #   stream_wait(stream, producer): make `stream` wait on work queued so far on `producer`;
    #   mem_alloc(ctx, nbytes), mem_free(ctx, address), ctx_synchronize(ctx), stream_is_capturing(stream):
    #     the global scratch buffers of kernels that take one (ttbuild.runtime.scratch).


class CudaDriver:
    """Driver over `cuda.bindings.driver`; module handles stay alive as long as this object."""

    def __init__(self):
        from cuda.bindings import driver as cu  # lazy: `import ttbuild.runtime` stays CUDA-free

        self.cu = cu
        self._lock = threading.Lock()
        self._initialized = False
        self._capability: dict = {}
        self._seen = threading.local()  # per thread: {device: (context key, capability)}
        self._modules: list = []
        self._launch = cu.cuLaunchKernel
        self._get_current = cu.cuCtxGetCurrent
        self._success = cu.CUresult.CUDA_SUCCESS
        # The generated launch path calls cuda.bindings' cuLaunchKernel itself: measured with a
        # no-op libcuda, its wrapper costs 0.84 us per call, libcuda through ctypes with
        # prebuilt c_void_p arguments 0.80 us and with argtypes 2.0 us, so nothing cheaper exists
        # from pure Python.
        self.cu_launch = cu.cuLaunchKernel
        self.cu_success = self._success
        self._ctx_device: dict = {}
        self._events: dict = {}
        self._libcuda = None

    @property
    def c_launch_address(self) -> int | None:
        """libcuda's cuLaunchKernel as a C function address (the C launch path calls it); None
        where libcuda cannot be opened (the first launch then raises the driver's own error)."""
        if self._libcuda is None:
            try:
                self._libcuda = ctypes.CDLL("libcuda.so.1")
            except OSError:
                return None
        return ctypes.cast(self._libcuda.cuLaunchKernel, ctypes.c_void_p).value

    def function_address(self, fn) -> int:
        """The raw CUfunction handle of what load_function returned."""
        return int(fn)

    def check_code(self, call: str, err: int, detail: str = ""):
        """Raise CudaError for a nonzero CUresult code `err` (an int from a C call)."""
        self.check(call, (self.cu.CUresult(err),), detail)

    def check(self, call: str, result, detail: str = ""):
        """Unpack a cuda.bindings return tuple, raising CudaError unless it is CUDA_SUCCESS."""
        if isinstance(result, tuple):
            err, rest = result[0], result[1:]
        else:
            err, rest = result, ()
        if err != self._success:
            name = getattr(err, "name", str(err))
            try:
                ok, text = self.cu.cuGetErrorString(err)
            except Exception:  # no libcuda at all: the name alone must do
                ok, text = None, None
            if ok == self._success and text:
                detail = (detail + "; " if detail else "") + text.decode(errors="replace")
            raise CudaError(call, name, detail)
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def _init(self):
        with self._lock:
            if not self._initialized:
                self.check("cuInit", self.cu.cuInit(0))
                self._initialized = True

    def context(self, device_hint=None):
        """See Driver.context. With a device hint (torch's current device) the context found at
        a thread's first launch on that device is reused without asking the driver again, as
        Triton's launcher does: frameworks keep one (primary) context per device. Per thread,
        because a context is current per thread: autograd's backward thread may have none until
        its first launch, and then gets the device's primary context (Triton's loadBinary does
        the same), so a load or launch there never meets CUDA_ERROR_INVALID_CONTEXT."""
        if device_hint is not None:
            seen = getattr(self._seen, "by_device", None)
            if seen is None:
                seen = self._seen.by_device = {}
            hit = seen.get(device_hint)
            if hit is None:
                hit = seen[device_hint] = self._current_context(device_hint)
            return hit
        return self._current_context(None)

    def _current_context(self, device_hint):
        try:
            err, ctx = self._get_current()
        except RuntimeError as exc:  # cuda.pathfinder: libcuda.so.1 not found (no driver)
            raise CudaError("cuCtxGetCurrent", "CUDA driver library not available", str(exc)) from None
        if err != self._success or not int(ctx):
            self._init()
            dev = self.check("cuDeviceGet", self.cu.cuDeviceGet(device_hint or 0))
            ctx = self.check("cuDevicePrimaryCtxRetain", self.cu.cuDevicePrimaryCtxRetain(dev))
            self.check("cuCtxSetCurrent", self.cu.cuCtxSetCurrent(ctx))
        key = int(ctx)
        cap = self._capability.get(key)
        if cap is None:
            dev = self.check("cuCtxGetDevice", self.cu.cuCtxGetDevice())
            self._ctx_device[key] = int(dev)
            attr = self.cu.CUdevice_attribute
            major = self.check("cuDeviceGetAttribute", self.cu.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
            minor = self.check("cuDeviceGetAttribute", self.cu.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
            sms = self.check("cuDeviceGetAttribute", self.cu.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))
            cap = self._capability[key] = Capability(major, minor, sms)
        return key, cap

    @contextlib.contextmanager
    def on_device(self, device: int):
        """Run the body with `device`'s primary context current (pushed, then popped), unless
        the current context already belongs to it: a launch goes where its arguments live."""
        key, _ = self._current_context(None)
        if self._ctx_device.get(key) == device:
            yield
            return
        cu = self.cu
        dev = self.check("cuDeviceGet", cu.cuDeviceGet(device))
        ctx = self.check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(dev))
        self.check("cuCtxPushCurrent", cu.cuCtxPushCurrent(ctx))
        try:
            yield
        finally:
            self.check("cuCtxPopCurrent", cu.cuCtxPopCurrent())
            self.check("cuDevicePrimaryCtxRelease", cu.cuDevicePrimaryCtxRelease(dev))

    def stream_wait(self, stream: int, producer: int) -> None:
        """`stream` waits for the work queued so far on `producer` (CAI v3's consumer duty): an
        event recorded on the producer, waited on by the launch stream; no host blocking."""
        cu = self.cu
        key, _ = self._current_context(None)
        event = self._events.get(key)
        if event is None:
            event = self._events[key] = self.check("cuEventCreate", cu.cuEventCreate(
                cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
        self.check("cuEventRecord", cu.cuEventRecord(event, producer), f"producer stream {producer:#x}")
        self.check("cuStreamWaitEvent", cu.cuStreamWaitEvent(stream, event, 0), f"launch stream {stream:#x}")

    @contextlib.contextmanager
    def _in_context(self, ctx):
        """Run the body with the context whose key context() returned current (pushed, then
        popped, unless it is current already)."""
        err, current = self._get_current()
        if err == self._success and int(current) == ctx:
            yield
            return
        cu = self.cu
        self.check("cuCtxPushCurrent", cu.cuCtxPushCurrent(cu.CUcontext(ctx)))
        try:
            yield
        finally:
            self.check("cuCtxPopCurrent", cu.cuCtxPopCurrent())

    def mem_alloc(self, ctx, nbytes: int) -> int:
        """cuMemAlloc of `nbytes` in context `ctx` (a key from context()): the device address."""
        with self._in_context(ctx):
            return int(self.check("cuMemAlloc", self.cu.cuMemAlloc(nbytes), f"{nbytes} bytes of global scratch"))

    def mem_free(self, ctx, address: int) -> None:
        """cuMemFree of what mem_alloc gave in context `ctx`."""
        with self._in_context(ctx):
            self.check("cuMemFree", self.cu.cuMemFree(address))

    def ctx_synchronize(self, ctx) -> None:
        """cuCtxSynchronize of context `ctx`: every kernel launched in it so far has finished."""
        with self._in_context(ctx):
            self.check("cuCtxSynchronize", self.cu.cuCtxSynchronize())

    def stream_is_capturing(self, stream: int) -> bool:
        """Whether work queued on `stream` now would be captured into a CUDA graph rather than
        run (cuStreamIsCapturing: ACTIVE or INVALIDATED; the legacy stream while a blocking
        stream of its context captures counts as capturing, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)."""
        cu = self.cu
        err, status = cu.cuStreamIsCapturing(stream)
        if err == cu.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
            return True
        self.check("cuStreamIsCapturing", (err,), f"stream {stream:#x}")
        return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE

    def driver_version(self) -> int:
        """cuDriverGetVersion: 1000 * major + 10 * minor of the CUDA version the driver supports
        (13000 = CUDA 13.0, shipped with driver 580)."""
        self._init()
        return int(self.check("cuDriverGetVersion", self.cu.cuDriverGetVersion()))

    def load_function(self, image, entry, shared):
        """Load the cubin or PTX `image` into the current context (cuModuleLoadData) and return kernel `entry`'s
        CUfunction; above 48 KiB of dynamic `shared` bytes, opts it in
        (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). Raises CudaError naming the call."""
        cu = self.cu
        module = self.check("cuModuleLoadData", cu.cuModuleLoadData(image),
                            f"loading the cubin of {entry}")
        self._modules.append(module)
        fn = self.check("cuModuleGetFunction", cu.cuModuleGetFunction(module, entry.encode()),
                        f"entry {entry!r}")
        if shared > DEFAULT_SHARED_LIMIT:
            self.check("cuFuncSetAttribute", cu.cuFuncSetAttribute(
                fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
                f"{entry} needs {shared} bytes of shared memory")
        return fn

    def launch_pdl(self, function, grid, block_x, shared, stream, params_address, values):
        """cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the grid
        may start while the previous kernel on `stream` runs, up to its
        griddepcontrol.launch_dependents, and waits for it in griddepcontrol.wait (CUDA
        Programming Guide, "Programmatic Dependent Launch"; Triton's launch_pdl)."""
        cu = self.cu
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block_x, 1, 1
        config.sharedMemBytes = shared
        config.hStream = cu.CUstream(stream)
        config.attrs = [attr]
        config.numAttrs = 1
        handle = function[1] if isinstance(function, tuple) else function
        self.check("cuLaunchKernelEx", cu.cuLaunchKernelEx(config, handle, params_address, 0),
                   f"grid={grid}, block=({block_x},1,1), shared={shared}, launch_pdl")

    def launch(self, function, grid, block_x, shared, stream, params_address, values):
        """cuLaunchKernel of `function` on `grid` (3 ints) with `block_x` threads (x only), `shared` dynamic bytes,
        on `stream` (an int handle), parameters at `params_address` (a void*[]); `values` keeps the packed values
        alive. Raises CudaError on failure."""
        # A raw int stream: measured on an H200 host, cuda.bindings takes it faster (3.8 us per
        # launch) than a pre-built CUstream object (4.7 us) or libcuda through ctypes (5.1 us).
        err, = self._launch(function, grid[0], grid[1], grid[2], block_x, 1, 1, shared, stream,
                            params_address, 0)
        if err != self._success:
            self.check("cuLaunchKernel", (err,), f"grid={grid}, block=({block_x},1,1), "
                                                   f"shared={shared}")


_default = None
_default_lock = threading.Lock()


def default_driver() -> CudaDriver:
    """The process-wide driver, created (and cuda.bindings imported) on first use.

    TTBUILD_LAUNCH=ctypes picks CtypesCudaDriver (leaner per-launch path); default CudaDriver.
    """
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                fast = os.environ.get("TTBUILD_LAUNCH", "") == "ctypes"
                _default = CtypesCudaDriver() if fast else CudaDriver()
    return _default


class CtypesCudaDriver(CudaDriver):
    """CudaDriver whose per-launch calls (cuCtxGetCurrent, cuLaunchKernel) go straight to libcuda
    through ctypes, skipping cuda.bindings' argument wrapping (a few microseconds per launch).
    Loading and error names still go through cuda.bindings; handles are the same objects."""

    def __init__(self):
        super().__init__()
        self.cu_launch = None  # its function handles are (int, CUfunction) pairs: take `launch`
        libcuda = self._libcuda = ctypes.CDLL("libcuda.so.1")
        u32, vp = ctypes.c_uint, ctypes.c_void_p
        self._c_launch = libcuda.cuLaunchKernel
        self._c_launch.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp]
        self._c_launch.restype = ctypes.c_int
        self._c_get_current = libcuda.cuCtxGetCurrent
        self._c_get_current.argtypes = [ctypes.POINTER(vp)]
        self._c_get_current.restype = ctypes.c_int
        self._ctx_out = vp()
        self._ctx_ref = ctypes.byref(self._ctx_out)
        self._handles: dict = {}

    def context(self, device_hint=None):
        """As Driver.context, answering from a cache keyed by the current CUcontext handle (read through ctypes) when
        no device is asked for."""
        if device_hint is not None:
            return super().context(device_hint)
        if self._c_get_current(self._ctx_ref) == 0 and self._ctx_out.value:
            key = self._ctx_out.value
            cap = self._capability.get(key)
            if cap is not None:
                return key, cap
        return super()._current_context(device_hint)

    def load_function(self, image, entry, shared):
        """(raw CUfunction handle as an int, the cuda.bindings object kept alive beside it)."""
        fn = super().load_function(image, entry, shared)
        return int(fn), fn  # raw handle for ctypes; keep the wrapper alive beside it

    def function_address(self, fn) -> int:
        """The raw CUfunction handle (an int) the C launch path takes."""
        return fn[0]

    def launch(self, function, grid, block_x, shared, stream, params_address, values):
        """cuLaunchKernel through ctypes (libcuda), as CudaDriver.launch. Raises CudaError on failure."""
        err = self._c_launch(function[0], grid[0], grid[1], grid[2], block_x, 1, 1, shared,
                             stream or None, params_address, None)
        if err:
            self.check_code("cuLaunchKernel", err, f"grid={grid}, block=({block_x},1,1), shared={shared}")


class PerDriver:
    """`per(driver)`: the one object `make(driver)` made for that driver object, made on first use
    (thread-safe). Drivers that take weak references are keyed weakly, others strongly."""

    def __init__(self, make):
        self.make = make
        self._weak: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._strong: dict = {}
        self._lock = threading.Lock()

    def __call__(self, driver):
        with self._lock:
            try:
                table = self._weak
                found = table.get(driver)
            except TypeError:  # no weak references to this driver
                table = self._strong
                found = table.get(driver)
            if found is None:
                found = table[driver] = self.make(driver)
            return found
