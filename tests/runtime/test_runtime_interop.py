"""Arguments from other frameworks on the CPU: DLPack capsules built with ctypes, __cuda_array_interface__ v3 streams, explicit streams, devices."""

from __future__ import annotations

import contextlib
import ctypes
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runtime_fakes import FakeTorch, RecordingDriver, add_params, attach, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime.interop import DLManagedTensor, InteropError

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
NAME = b"dltensor"


class DLPackArray:
    """A producer that exports a DLManagedTensor in a "dltensor" capsule, like a CUDA array of a
    framework the runtime has never heard of; it records the stream each export was asked for."""

    def __init__(self, ptr, code=2, bits=32, device=(2, 0), offset=0, shape=(8,)):
        self.device = device
        self.streams = []
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data, t.byte_offset = ptr, offset
        t.device.device_type, t.device.device_id = device
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        t.ndim, t.shape = len(shape), self.shape

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _capsule_new(ctypes.addressof(self.managed), NAME, None)


class CAIArray:
    def __init__(self, ptr, typestr="<f4", stream=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": typestr, "shape": (8,),
                                         "version": 3, "stream": stream}


@pytest.fixture
def lib(tmp_path):
    docs = [meta("add_fp32", "add_kernel", add_params("fp32")), meta("add_fp16", "add_kernel", add_params("fp16")),
            meta("add_bf16", "add_kernel", add_params("bf16"))]
    drv = RecordingDriver()
    return attach(rt.load(str(write_lib(tmp_path, docs)), driver=drv), drv)


def ptrs(launch, n=3):
    return [struct.unpack("<Q", r)[0] for r in launch["raw"][:n]]


def test_dlpack_pointer_dtype_and_offset(lib):
    drv = lib.add_kernel._driver
    x, y = DLPackArray(0x10000, offset=0x40), DLPackArray(0x20000)
    o = DLPackArray(0x30000, code=2, bits=16)
    with pytest.raises(rt.NoMatchingVariant, match="output_ptr: expects \\*fp32, got a fp16 tensor"):
        lib.add_kernel[(1,)](x, y, o, 8)
    lib.add_kernel[(1,)](x, y, DLPackArray(0x30000), 8, stream=0x99)
    bf = [DLPackArray(0x40000 + i * 0x100, code=4, bits=16) for i in range(3)]
    lib.add_kernel[(1,)](*bf, 8)
    assert ptrs(drv.launches[0]) == [0x10040, 0x20000, 0x30000]
    assert drv.loads[0][1] == b"CUBIN:add_fp32" and drv.loads[1][1] == b"CUBIN:add_bf16"
    # the producer is asked to order its work before the launch stream (0 is spelled 1, legacy)
    assert x.streams == [1, 0x99] and bf[0].streams == [1]


def test_dlpack_in_host_memory_or_unknown_device_is_refused(lib):
    with pytest.raises(InteropError, match="'x_ptr': DLPack tensor lives on cpu:0"):
        lib.add_kernel[(1,)](DLPackArray(0x1000, device=(1, 0)), DLPackArray(0x1000), DLPackArray(0x1000), 8)
    np = pytest.importorskip("numpy")
    with pytest.raises(InteropError, match="'y_ptr': DLPack tensor lives on cpu"):
        lib.add_kernel[(1,)](DLPackArray(0x1000), np.zeros(4, np.float32), DLPackArray(0x1000), 8)


def test_dlpack_on_another_device_launches_there_and_mixed_devices_fail(lib, monkeypatch):
    drv = lib.add_kernel._driver
    entered = []

    @contextlib.contextmanager
    def on_device(d):
        entered.append(d)
        yield

    drv.on_device = on_device
    arrays = [DLPackArray(0x1000 * (i + 1), device=(2, 1)) for i in range(3)]
    lib.add_kernel[(1,)](*arrays, 8)
    assert entered == [1] and len(drv.launches) == 1
    with pytest.raises(InteropError, match="different devices: 'x_ptr' on cuda:1, 'y_ptr' on cuda:0"):
        lib.add_kernel[(1,)](arrays[0], DLPackArray(0x5000), arrays[2], 8)
    torch = FakeTorch(monkeypatch)
    with pytest.raises(InteropError, match="different devices: 'x_ptr' on cuda:0, 'y_ptr' on cuda:1"):
        lib.add_kernel[(1,)](torch.Tensor(0x1000), arrays[1], torch.Tensor(0x3000), 8)


def test_cai_stream_is_waited_on_unless_it_is_the_launch_stream(lib):
    drv = lib.add_kernel._driver
    lib.add_kernel[(1,)](CAIArray(0x1000, stream=0xAA), CAIArray(0x2000), CAIArray(0x3000, stream=None), 8,
                         stream=0xBB)
    assert drv.waits == [(0xBB, 0xAA)]
    lib.add_kernel[(1,)](CAIArray(0x1000, stream=0xBB), CAIArray(0x2000), CAIArray(0x3000), 8, stream=0xBB)
    lib.add_kernel[(1,)](CAIArray(0x1000, stream=1), CAIArray(0x2000), CAIArray(0x3000), 8)  # legacy == 0
    assert drv.waits == [(0xBB, 0xAA)]
    lib.add_kernel[(1,)](CAIArray(0x1000, stream=2), CAIArray(0x2000), CAIArray(0x3000), 8)
    assert drv.waits[-1] == (0, 2)  # the per-thread default stream is another stream
    assert [c["stream"] for c in drv.launches] == [0xBB, 0xBB, 0, 0]


def test_cai_stream_zero_is_disallowed(lib):
    with pytest.raises(InteropError, match="stream 0 is disallowed by CAI v3"):
        lib.add_kernel[(1,)](CAIArray(0x1000, stream=0), CAIArray(0x2000), CAIArray(0x3000), 8)


def test_a_driver_that_cannot_wait_says_so(tmp_path):
    class NoWait(RecordingDriver):
        stream_wait = None

    drv = NoWait()
    lib = attach(rt.load(str(write_lib(tmp_path, [meta("a", "add_kernel", add_params("fp32"))])), driver=drv), drv)
    with pytest.raises(rt.LaunchError, match="'x_ptr' asks for a wait on stream 0xaa"):
        lib.add_kernel[(1,)](CAIArray(0x1000, stream=0xAA), CAIArray(0x2000), CAIArray(0x3000), 8)


def test_stream_objects(lib):
    drv = lib.add_kernel._driver

    class CudaCoreStream:  # cuda.core's protocol: (version, handle)
        def __cuda_stream__(self):
            return (0, 0x321)

    lib.add_kernel[(1,)](CAIArray(0x1000), CAIArray(0x2000), CAIArray(0x3000), 8, stream=CudaCoreStream())
    with pytest.raises(rt.LaunchError, match="stream= must be a CUstream handle"):
        lib.add_kernel[(1,)](CAIArray(0x1000), CAIArray(0x2000), CAIArray(0x3000), 8, stream="s")
    assert drv.launches[0]["stream"] == 0x321


def test_torch_op_without_torch_is_an_import_error(lib, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError):
        rt.torch_op(lib.add_kernel, "t::add", (1,), mutates_args=("output_ptr",))
