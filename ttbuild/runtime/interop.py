"""Device arrays from other frameworks: DLPack capsules read through ctypes, `__cuda_array_interface__` v3 with its stream, and where each argument lives.

DLPack: `obj.__dlpack_device__()` -> (device_type, device_id); `obj.__dlpack__(stream=s)` -> a
PyCapsule named "dltensor" around a DLManagedTensor (dlpack.h, DLPack 0.8/1.0 ABI: the legacy,
unversioned capsule every producer still emits without `max_version`). The consumer passes the
stream it will use the data on (CUDA: 1 = legacy default stream, 2 = per-thread default, else
the handle) so the producer orders its pending work before that stream (Python array API
standard, `__dlpack__`). The capsule is dropped after its pointer is read: the producer's own
object keeps the memory alive, as a torch tensor does for `data_ptr()`.

CUDA Array Interface v3 (numba docs, "CUDA Array Interface (Version 3)"): `stream` absent or
None means no synchronization is needed; 1 is the legacy default stream, 2 the per-thread
default stream, 0 is disallowed (ambiguous), anything else a CUstream handle. A consumer that
uses the data on another stream must make that stream wait on the producer's: the launcher
records an event on the producer stream and has the launch stream wait on it (Driver.stream_wait).
"""

from __future__ import annotations

import ctypes

from ..errors import TTBuildError

# dlpack.h DLDeviceType values that name memory a CUDA kernel can address.
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
DEVICE_TYPE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                     10: "rocm", 13: "cuda_managed", 14: "oneapi"}
# dlpack.h DLDataTypeCode -> Triton dtype names, by (code, bits).
_DL_DTYPES = {
    (0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
    (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
    (2, 16): "fp16", (2, 32): "fp32", (2, 64): "fp64", (4, 16): "bf16", (6, 8): "i1",
    (10, 8): "fp8e4nv", (12, 8): "fp8e5",  # kDLFloat8_e4m3fn, kDLFloat8_e5m2 (DLPack 1.1)
}
# CAI v3 / DLPack stream numbers for the two default streams; both are also valid CUstream
# handles in the driver API (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD), and 0 means legacy.
STREAM_LEGACY, STREAM_PER_THREAD = 1, 2


class InteropError(TTBuildError, TypeError):
    """An argument from another framework that a kernel cannot take: host memory, a bad
    capsule, a CAI stream of 0, tensors on different devices."""


class DLDevice(ctypes.Structure):
    """DLPack's DLDevice (dlpack.h): device type (kDLCUDA = 2, ...) and ordinal."""
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """DLPack's DLDataType: type code (0 int, 1 uint, 2 float, 4 bfloat), bits, lanes."""
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """DLPack's DLTensor: data pointer, device, rank, dtype, shape and strides (in elements, NULL for compact
    row-major), byte offset."""
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    """DLPack's DLManagedTensor: the tensor, its producer's context and deleter (a "dltensor" capsule holds one)."""
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def device_label(device_type: int, device_id: int) -> str:
    """"cuda:0", "cpu:0" ...: how messages name a DLPack device (type code and ordinal)."""
    return f"{DEVICE_TYPE_NAMES.get(device_type, f'device type {device_type}')}:{device_id}"


def dlpack_device(obj, name: str) -> int:
    """CUDA device ordinal of a DLPack-exporting object; InteropError for host or non-CUDA memory."""
    dev_type, dev_id = obj.__dlpack_device__()
    dev_type, dev_id = int(dev_type), int(dev_id)
    if dev_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise InteropError(f"argument {name!r}: DLPack tensor lives on {device_label(dev_type, dev_id)}; "
                           "a kernel needs CUDA device memory (kDLCUDA or kDLCUDAManaged)")
    return dev_id


def dlpack_pointer(obj, name: str, stream: int) -> tuple[int, str | None, tuple, tuple | None]:
    """(data address incl. byte_offset, Triton dtype name or None, shape, strides in elements
    or None) of `obj.__dlpack__(stream=...)`, the producer ordered before `stream` (0 is passed
    as 1, the legacy default stream, as the protocol spells it)."""
    capsule = obj.__dlpack__(stream=stream or STREAM_LEGACY)
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise InteropError(f"argument {name!r}: __dlpack__ returned {type(capsule).__name__}, "
                           "not an unconsumed 'dltensor' capsule")
    managed = DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    if t.device.device_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise InteropError(f"argument {name!r}: DLPack tensor lives on "
                           f"{device_label(t.device.device_type, t.device.device_id)}")
    dtype = _DL_DTYPES.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    ptr = (t.data or 0) + t.byte_offset
    del capsule  # its destructor returns the tensor to the producer (deleter), unconsumed
    return ptr, dtype, shape, strides


def cai_stream(cai: dict, name: str) -> int | None:
    """The producer stream a CAI v3 consumer must wait on, or None when no sync is needed."""
    stream = cai.get("stream")
    if stream is None:
        return None
    stream = int(stream)
    if stream == 0:
        raise InteropError(f"argument {name!r}: __cuda_array_interface__ stream 0 is disallowed "
                           "by CAI v3 (ambiguous); producers give 1 for the legacy default stream")
    return stream


def same_stream(a: int, b: int) -> bool:
    """Whether two launch streams are one: 0 and 1 both name the legacy default stream."""
    return (a or STREAM_LEGACY) == (b or STREAM_LEGACY)
