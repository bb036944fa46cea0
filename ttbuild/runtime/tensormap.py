"""CUtensorMaps in device memory for the descriptor parameters that load through TMA; stdlib only.

Encoded with `cuTensorMapEncodeTiled`, stored in append-only device slabs, cached by everything they depend on
(cuda.bindings imported lazily, by the CUDA seam).

A `tensordesc<...>` parameter the TTGIR stage chose to load through TMA (ttbuild.tma; its metadata
`descriptors` entry has "tma": {"swizzle", "box"}) takes `<name>.tensormap`, the device address of
a 128-byte CUtensorMap in global memory (64-byte aligned), in front of its pointer-form parameters.
`TensorMaps.address` returns that address for one host descriptor: a dict lookup when the same
(device, dtype, base address, shape, strides, box, swizzle, padding) was seen before, else it
encodes the map (CUDA driver API, "Tensor Map Object Management"), copies it into the next free
128-byte slot of the device's slab and remembers the slot. The key holds every input of the
encoding (the driver version, the only other one, is fixed per process), so a hit is always the
right map.

The encoding (as Triton's `fillTMADescriptorTiled`, third_party/nvidia/backend/driver.c):
globalDim is the shape innermost first, globalStrides the byte strides of every dimension but the
innermost, innermost first; boxDim the box innermost first; elementStrides all 1; interleave NONE;
swizzle 0/32/64/128 bytes -> NONE/32B/64B/128B; L2 promotion 128B (Triton's launcher); out-of-bound
fill from the host descriptor's `padding` (Triton's make_tensordesc_arg): "zero" -> NONE (zeros, as
the pointer form's `other=0`), "nan" -> NAN_REQUEST_ZERO_FMA (NaN; floating-point element types
only: fp16, bf16, fp32, fp64, since 8-bit floats are encoded as UINT8, which the driver cannot
NaN-fill). Drivers up to CUDA 13.1 get Triton's and CUTLASS's workaround of the driver's
small-tensor bug (bit 85 of the map cleared when the tensor spans less than 128 KiB).

Slots are never rewritten while a kernel may read them: slabs are append-only. When a device holds
MAX_SLOTS maps, the context is synchronized, the slabs of the generation before are freed, and
the table starts over in new slabs (the last generation stays allocated one more round, for
launches that looked an address up before the switch).

The seam (ttbuild.runtime.driver's pattern: duck-typed, so CPU tests inject fakes): a driver that
offers `tensor_map_encode_tiled` is used as is (see `TensorMapDriver`); a CudaDriver (`.cu`) is
wrapped in `CudaTensorMaps`; any other driver cannot launch TMA kernels.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Protocol

from ..errors import TTBuildError
from ..signature import DTYPE_BYTES
from .driver import PerDriver

MAP_BYTES = 128          # sizeof(CUtensorMap)
MAP_ALIGN = 64           # cuTensorMapEncodeTiled: "tensorMap address must be aligned to 64 bytes"
SLAB_SLOTS = 512         # 64 KiB per cuMemAlloc
MAX_SLOTS = 1 << 15      # maps per device and generation (4 MiB)

# cuTensorMapEncodeTiled's limits (CUDA driver API): rank 1..5, globalDim in [1, 2**32], byte
# strides multiples of 16 below 2**40, boxDim in [1, 256].
MAX_RANK = 5
MAX_DIM = 1 << 32
MAX_STRIDE_BYTES = 1 << 40
MAX_BOX = 256

# Signature dtype -> CUtensorMapDataType enumerator. TMA moves bytes: only the element size and
# the NaN fill (padding="nan": FLOAT types alone) depend on the type, so 8-bit floats and ints
# are UINT8 and the 16-bit ints UINT16 (the enum has no INT8 / INT16).
DATA_TYPES = {
    "fp16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "fp32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "fp64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
    "i1": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "fp8e4nv": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "fp8e5": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i16": "CU_TENSOR_MAP_DATA_TYPE_UINT16", "u16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32", "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64", "u64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
}
SWIZZLES = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
            64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}
INTERLEAVE = "CU_TENSOR_MAP_INTERLEAVE_NONE"
L2_PROMOTION = "CU_TENSOR_MAP_L2_PROMOTION_L2_128B"
OOB_FILL = "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"
OOB_FILL_NAN = "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"
# host descriptor padding -> out-of-bound fill (Triton's TensorDescriptor: "zero" or "nan")
OOB_FILLS = {"zero": OOB_FILL, "nan": OOB_FILL_NAN}
# the dtypes whose map data type is a FLOAT one, which the driver can fill with NaN
NAN_FILL_DTYPES = frozenset(d for d, t in DATA_TYPES.items() if "FLOAT" in t)

# Triton's fillTMADescriptorTiled / CUTLASS b7ecaa6: drivers up to 13.1 mis-encode maps of tensors
# spanning < 128 KiB (Blackwell); clearing bit 85 (bit 21 of the second 64-bit word) avoids it.
SMALL_TENSOR_BUG_DRIVER = 13010
SMALL_TENSOR_BYTES = 128 * 1024
SMALL_TENSOR_BIT = 85


class TensorMapError(TTBuildError, ValueError):
    """A tensor map that cannot be encoded (the message names what is out of range), or a
    driver that cannot encode tensor maps."""


class TensorMapDriver(Protocol):
    """What TensorMaps needs of a driver. Enumerators are passed by their CUDA names
    (CU_TENSOR_MAP_SWIZZLE_128B, ...); arrays innermost dimension first, as the driver API."""

    def tensor_map_encode_tiled(self, data_type: str, rank: int, address: int, global_dim: tuple,
                                global_strides: tuple, box_dim: tuple, element_strides: tuple,
                                interleave: str, swizzle: str, l2_promotion: str, oob_fill: str) -> bytes:
        """cuTensorMapEncodeTiled: the 128 bytes of the CUtensorMap."""

    def tensor_map_alloc(self, nbytes: int) -> int:
        """cuMemAlloc in the current context: the device address."""

    def tensor_map_free(self, address: int) -> None:
        """cuMemFree."""

    def tensor_map_upload(self, address: int, data: bytes) -> None:
        """Copy host bytes to device memory; the copy is complete (visible to any later launch
        on any stream) when this returns."""

    def tensor_map_synchronize(self) -> None:
        """cuCtxSynchronize: every kernel launched so far in the current context has finished."""

    def tensor_map_device(self) -> int:
        """The device ordinal of the current context."""

    # Optional: on_device(device) (a context manager making that device's context current) and
    # driver_version() (cuDriverGetVersion), as ttbuild.runtime.driver.Driver.


class CudaTensorMaps:
    """TensorMapDriver over a ttbuild.runtime.driver.CudaDriver (its cuda.bindings module and
    CUresult checks). Uploads go through a pinned staging buffer and a private non-blocking
    stream that is synchronized: a miss waits for its own 128-byte copy, not for other work."""

    def __init__(self, driver):
        self.driver = driver
        self.cu = driver.cu
        self._streams: dict = {}   # device -> its private upload stream
        self._staging = None       # pinned host buffer of MAP_BYTES
        self.on_device = getattr(driver, "on_device", None) or _stay
        self.driver_version = getattr(driver, "driver_version", None)

    def _enum(self, kind: str, name: str):
        return getattr(getattr(self.cu, kind), name)

    def tensor_map_encode_tiled(self, data_type, rank, address, global_dim, global_strides, box_dim,
                                element_strides, interleave, swizzle, l2_promotion, oob_fill):
        """cuTensorMapEncodeTiled: the 128-byte CUtensorMap of a tiled TMA view (rank dims of global_dim elements,
        global_strides in bytes for dims 1.., box_dim elements per box; enum names as CUDA spells them). Raises
        CudaError."""
        cu = self.cu
        tmap = self.driver.check("cuTensorMapEncodeTiled", cu.cuTensorMapEncodeTiled(
            self._enum("CUtensorMapDataType", data_type), rank, address,
            [cu.cuuint64_t(d) for d in global_dim], [cu.cuuint64_t(s) for s in global_strides],
            [cu.cuuint32_t(b) for b in box_dim], [cu.cuuint32_t(e) for e in element_strides],
            self._enum("CUtensorMapInterleave", interleave), self._enum("CUtensorMapSwizzle", swizzle),
            self._enum("CUtensorMapL2promotion", l2_promotion), self._enum("CUtensorMapFloatOOBfill", oob_fill)),
            f"{data_type}, globalAddress={address:#x}, globalDim={list(global_dim)}, "
            f"globalStrides={list(global_strides)}, boxDim={list(box_dim)}, {swizzle}")
        return b"".join(int(w).to_bytes(8, "little") for w in tmap.opaque)

    def tensor_map_alloc(self, nbytes):
        """Device memory for `nbytes` of tensor maps (cuMemAlloc); returns its address. Raises CudaError."""
        return int(self.driver.check("cuMemAlloc", self.cu.cuMemAlloc(nbytes), f"{nbytes} bytes of tensor maps"))

    def tensor_map_free(self, address):
        """Free device memory from tensor_map_alloc. Raises CudaError."""
        self.driver.check("cuMemFree", self.cu.cuMemFree(address))

    def tensor_map_upload(self, address, data):
        """Copy tensor map bytes `data` to device `address` through a pinned staging buffer (made on first use).
        Raises CudaError."""
        import ctypes

        cu, check = self.cu, self.driver.check
        if self._staging is None:
            self._staging = int(check("cuMemHostAlloc", cu.cuMemHostAlloc(
                MAP_BYTES, cu.CU_MEMHOSTALLOC_PORTABLE)))
        device = self.tensor_map_device()
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = check("cuStreamCreate", cu.cuStreamCreate(
                int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)))
        ctypes.memmove(self._staging, data, len(data))
        check("cuMemcpyHtoDAsync", cu.cuMemcpyHtoDAsync(address, self._staging, len(data), stream))
        check("cuStreamSynchronize", cu.cuStreamSynchronize(stream))

    def tensor_map_synchronize(self):
        """cuCtxSynchronize: wait for uploads before the staging buffer is reused. Raises CudaError."""
        self.driver.check("cuCtxSynchronize", self.cu.cuCtxSynchronize())

    def tensor_map_device(self):
        """The current context's device ordinal (cuCtxGetDevice). Raises CudaError."""
        return int(self.driver.check("cuCtxGetDevice", self.cu.cuCtxGetDevice()))


@contextlib.contextmanager
def _stay(device):
    yield


def encode_args(dtype: str, address: int, shape, strides, box, swizzle: int, padding: str = "zero") -> tuple:
    """cuTensorMapEncodeTiled's arguments (TensorMapDriver.tensor_map_encode_tiled's order) for
    a row-major tensor of `dtype` at `address` with `shape` and `strides` (elements, outermost
    first, the last 1), copied in boxes of `box` (outermost first) with `swizzle` bytes, elements
    out of bounds read as zeros (`padding` "zero") or NaN ("nan"). Raises TensorMapError for what
    the driver API refuses."""
    fill = OOB_FILLS.get(padding) if isinstance(padding, str) else None
    if fill is None:
        raise TensorMapError(f"Illegal value for padding: {padding!r} (\"zero\" or \"nan\")")
    if fill is OOB_FILL_NAN and dtype not in NAN_FILL_DTYPES:
        raise TensorMapError(f"Padding option `nan` is only supported for floating point tensors; a {dtype} "
                             f"tensor map ({DATA_TYPES[dtype]}) cannot be filled with NaN "
                             f"(TMA NaN fill: {', '.join(sorted(NAN_FILL_DTYPES))})")
    size = DTYPE_BYTES[dtype]
    shape, strides, box = [int(d) for d in shape], [int(s) for s in strides], [int(b) for b in box]
    rank = len(shape)
    if not 1 <= rank <= MAX_RANK or len(strides) != rank or len(box) != rank:
        raise TensorMapError(f"a tensor map has rank 1 to {MAX_RANK} with one stride and one box extent per "
                             f"dimension, got shape {list(shape)}, strides {list(strides)}, box {list(box)}")
    if swizzle not in SWIZZLES:
        raise TensorMapError(f"swizzle must be 0, 32, 64 or 128 bytes, got {swizzle}")
    if address % 16:
        raise TensorMapError(f"the base address must be 16-byte aligned, got {address:#x}")
    for d in shape:
        if not 1 <= d <= MAX_DIM:
            raise TensorMapError(f"TMA needs every extent in [1, 2**32], got shape {list(shape)}")
    byte_strides = [s * size for s in strides[:-1]]
    for s in byte_strides:
        if s < 0 or s % 16 or s >= MAX_STRIDE_BYTES:
            raise TensorMapError(f"TMA needs strides that are non-negative multiples of 16 bytes below 2**40, "
                                 f"got {list(strides)} elements of {size} bytes")
    for b in box:
        if not 1 <= b <= MAX_BOX:
            raise TensorMapError(f"a box extent must be in [1, {MAX_BOX}], got box {list(box)}")
    return (DATA_TYPES[dtype], rank, address, tuple(reversed(shape)), tuple(reversed(byte_strides)),
            tuple(reversed(box)), (1,) * rank, INTERLEAVE, SWIZZLES[swizzle], L2_PROMOTION, fill)


def small_tensor_fix(data: bytes, dtype: str, shape, strides, driver_version: int | None) -> bytes:
    """`data` with bit 85 cleared where the driver (cuDriverGetVersion <= 13010) needs the
    small-tensor workaround: the tensor's last byte lies within 128 KiB of its base (Triton's
    test: 1 + the byte offset of the last element < 128 KiB)."""
    if driver_version is None or driver_version > SMALL_TENSOR_BUG_DRIVER:
        return data
    size = DTYPE_BYTES[dtype]
    if sum((d - 1) * s * size for d, s in zip(shape, strides)) + 1 >= SMALL_TENSOR_BYTES:
        return data
    out = bytearray(data)
    out[SMALL_TENSOR_BIT // 8] &= ~(1 << (SMALL_TENSOR_BIT % 8)) & 0xFF
    return bytes(out)


class _Device:
    """One device's slots: the slabs of the current generation, the next free slot, and the
    previous generation's slabs (freed at the next switch)."""

    __slots__ = ("slabs", "old", "free", "end", "used")

    def __init__(self):
        self.slabs, self.old = [], []
        self.free = self.end = self.used = 0


class TensorMaps:
    """key -> device address of its encoded CUtensorMap, for one driver (see the module doc).
    `table` is read without the lock (a dict lookup is atomic); misses take the lock."""

    def __init__(self, driver: TensorMapDriver, max_slots: int = MAX_SLOTS, slab_slots: int = SLAB_SLOTS):
        self.driver = driver
        self.table: dict = {}
        self.max_slots, self.slab_slots = max_slots, slab_slots
        self.encodes = 0  # maps encoded so far (tests, diagnostics)
        # bumped when maps are forgotten (an address cached before may be freed later); the C
        # launch path reads it at epoch_address (an address this object keeps alive)
        self._epoch = ctypes.c_uint64(0)
        self.epoch_address = ctypes.addressof(self._epoch)
        self._devices: dict = {}
        self._lock = threading.Lock()
        self._version = None
        self._on_device = getattr(driver, "on_device", None) or _stay

    @property
    def epoch(self) -> int:
        """How many times maps were forgotten (a new generation)."""
        return self._epoch.value

    def current_device(self) -> int:
        """The device ordinal tensor maps are made for now (the driver's current context)."""
        return self.driver.tensor_map_device()

    def address(self, device: int, dtype: str, address: int, shape: tuple, strides: tuple,
                box: tuple, swizzle: int, padding: str = "zero") -> int:
        """The device address of the map of this descriptor on `device` (the device holding
        `address`; `padding` the out-of-bound fill, "zero" or "nan"), encoding and uploading it
        on the first request. Raises TensorMapError."""
        key = (device, dtype, address, shape, strides, box, swizzle, padding)
        hit = self.table.get(key)
        if hit is not None:
            return hit
        args = encode_args(dtype, address, shape, strides, box, swizzle, padding)
        with self._lock:
            hit = self.table.get(key)
            if hit is not None:
                return hit
            with self._on_device(device):
                data = bytes(self.driver.tensor_map_encode_tiled(*args))
                if len(data) != MAP_BYTES:
                    raise TensorMapError(f"cuTensorMapEncodeTiled gave {len(data)} bytes, not {MAP_BYTES}")
                data = small_tensor_fix(data, dtype, shape, strides, self._driver_version())
                slot = self._slot(device)
                self.driver.tensor_map_upload(slot, data)
            self.encodes += 1
            self.table[key] = slot
            return slot

    def _driver_version(self):
        if self._version is None:
            get = getattr(self.driver, "driver_version", None)
            self._version = get() if get is not None else 0  # 0: unknown, no workaround
        return self._version or None

    def _slot(self, device) -> int:
        """The next free slot on `device` (its context current), opening a slab or a new
        generation as needed."""
        d = self._devices.get(device)
        if d is None:
            d = self._devices[device] = _Device()
        if d.used >= self.max_slots:
            self._new_generation(device, d)
        if d.free >= d.end:
            nbytes = self.slab_slots * MAP_BYTES
            base = self.driver.tensor_map_alloc(nbytes)
            if base % MAP_ALIGN:
                self.driver.tensor_map_free(base)
                raise TensorMapError(f"device allocation at {base:#x} is not {MAP_ALIGN}-byte aligned")
            d.slabs.append(base)
            d.free, d.end = base, base + nbytes
        slot = d.free
        d.free += MAP_BYTES
        d.used += 1
        return slot

    def _new_generation(self, device, d: _Device) -> None:
        """Forget `device`'s maps: wait for every launch so far, free the generation before the
        current one (no launch can still read it), keep the current one a round longer."""
        self._epoch.value += 1
        self.driver.tensor_map_synchronize()
        for base in d.old:
            self.driver.tensor_map_free(base)
        d.old, d.slabs = d.slabs, []
        d.free = d.end = d.used = 0
        for key in [k for k in self.table if k[0] == device]:
            del self.table[key]


def _new_tensor_maps(driver) -> TensorMaps:
    if hasattr(driver, "tensor_map_encode_tiled"):
        return TensorMaps(driver)
    if hasattr(driver, "cu") and hasattr(driver, "check"):
        return TensorMaps(CudaTensorMaps(driver))
    raise TensorMapError(f"{type(driver).__name__} cannot encode CUDA tensor maps (TMA): launch "
                         "through ttbuild.runtime.CudaDriver or a driver with tensor_map_encode_tiled")


_tensor_maps = PerDriver(_new_tensor_maps)


def tensor_maps(driver) -> TensorMaps:
    """The TensorMaps of `driver` (one per driver object, made on first use): the driver itself
    where it offers `tensor_map_encode_tiled`, else a CudaDriver through CudaTensorMaps. Raises
    TensorMapError for a driver that has neither."""
    return _tensor_maps(driver)
