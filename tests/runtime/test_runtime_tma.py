"""Descriptor parameters that load through TMA (metadata `descriptors[i]["tma"]`): the launch passes the device address of the descriptor's CUtensorMap in front of base, shape and strides; maps are encoded once per distinct descriptor (ttbuild.runtime.tensormap), through a fake driver seam that records what cuTensorMapEncodeTiled would get."""

from __future__ import annotations

import contextlib
import ctypes
import struct
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runtime_fakes import FakeTorch, RecordingDriver, attach, desc_entries, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime import cext, tensormap
from ttbuild.runtime.tensordesc import DescriptorLauncher, _driver_of
from ttbuild.runtime.tensormap import CudaTensorMaps, TensorMapError, TensorMaps, encode_args

SLAB = 512 * 128  # tensormap.SLAB_SLOTS maps of 128 bytes


class TMADriver(RecordingDriver):
    """RecordingDriver plus the tensor-map seam: encodes are recorded and give 128 distinct bytes
    (all bits set past the first byte), slabs come from a counter, uploads land in `memory`."""

    def __init__(self, version=13020, **kw):
        super().__init__(version=version, **kw)
        self.encoded, self.allocs, self.freed, self.uploads = [], [], [], []
        self.memory: dict = {}
        self.syncs = 0
        self.current = 0
        self.switches = []
        self._next = 0x7F00_0000_0000

    def tensor_map_encode_tiled(self, *args):
        self.encoded.append((self.current, args))
        return bytes([len(self.encoded) & 0xFF]) + b"\xff" * 127

    def tensor_map_alloc(self, nbytes):
        addr = self._next
        self._next += nbytes + 0x1000
        self.allocs.append((self.current, addr, nbytes))
        return addr

    def tensor_map_free(self, address):
        self.freed.append(address)

    def tensor_map_upload(self, address, data):
        self.uploads.append((self.current, address))
        self.memory[address] = bytes(data)

    def tensor_map_synchronize(self):
        self.syncs += 1

    def tensor_map_device(self):
        return self.current

    @contextlib.contextmanager
    def on_device(self, device):
        self.switches.append(device)
        prev, self.current = self.current, device
        try:
            yield
        finally:
            self.current = prev


def tma_params(swizzle=128, box=(64, 64)):
    """k(a_desc: tensordesc<fp16[64, 64]> through TMA, b_desc: tensordesc<fp32[8, 16]> pointer form, n)."""
    params = desc_entries("a_desc", "fp16", (64, 64), tensormap=True) + desc_entries("b_desc", "fp32", (8, 16)) + \
        [{"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1},
         {"name": "BLOCK", "kind": "constexpr", "value": 64}]
    descriptors = [{"name": "a_desc", "dtype": "fp16", "block_shape": [64, 64],
                    "tma": {"swizzle": swizzle, "box": list(box)}},
                   {"name": "b_desc", "dtype": "fp32", "block_shape": [8, 16]}]
    return params, descriptors


def tma_doc(variant="k_tma", num_warps=4, **kw):
    params, descriptors = tma_params(**kw)
    return meta(variant, "k", params, num_warps=num_warps, descriptors=descriptors)


@pytest.fixture
def torch(monkeypatch):
    return FakeTorch(monkeypatch)


def _tensor(torch, ptr, shape, strides, dtype="float16", device=0):
    t = torch.Tensor(ptr, dtype, device)
    t.shape, t._strides = tuple(shape), tuple(strides)
    t.stride = lambda: t._strides
    return t


def load(tmp_path, docs=None, **kw):
    write_lib(tmp_path, docs or [tma_doc()])
    drv = TMADriver(**kw)
    return attach(rt.load(str(tmp_path), driver=drv), drv), drv


def u64(raw):
    return struct.unpack("<Q", raw)[0]


def test_a_tma_descriptor_passes_its_map_address_before_base_shape_and_strides(tmp_path, torch):
    lib, drv = load(tmp_path)
    kernel = lib.k
    assert kernel.call_names == ("a_desc", "b_desc", "n", "BLOCK")
    a = _tensor(torch, 0x10000, (300, 512), (512, 1))
    b = torch.Tensor(0x80000, "float32")
    kernel[(2,)](rt.TensorDescriptor(a, (300, 512), (512, 1), (64, 64)),
                 rt.TensorDescriptor(b, (8, 32), (32, 1), (8, 16)), 9)
    raw = drv.launches[-1]["raw"]
    assert len(raw) == 10
    (device, args), = drv.encoded
    slot = u64(raw[0])
    assert drv.uploads == [(0, slot)] and drv.memory[slot] == bytes([1]) + b"\xff" * 127
    assert slot % 64 == 0 and slot == drv.allocs[0][1] and drv.allocs[0][2] == SLAB
    assert u64(raw[1]) == 0x10000 and [struct.unpack("<i", r[:4])[0] for r in raw[2:4]] == [300, 512]
    assert struct.unpack("<q", raw[4])[0] == 512 and u64(raw[5]) == 0x80000  # b_desc: pointer form
    assert [struct.unpack("<i", r[:4])[0] for r in raw[6:8]] + [struct.unpack("<q", raw[8])[0]] == [8, 32, 32]
    # what cuTensorMapEncodeTiled gets: innermost first, byte strides, the box reversed
    assert device == 0 and args == (
        "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 2, 0x10000, (512, 300), (1024,), (64, 64), (1, 1),
        "CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_SWIZZLE_128B", "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
        "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")


def test_a_repeated_descriptor_is_one_lookup_and_others_are_encoded_anew(tmp_path, torch):
    lib, drv = load(tmp_path, [tma_doc(swizzle=64, box=(64, 32))])

    def launch(ptr, shape, strides, device=0):
        a = _tensor(torch, ptr, shape, strides, device=device)
        b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32", device), (8, 32), (32, 1), (8, 16))
        lib.k[(1,)](rt.TensorDescriptor(a, shape, strides, (64, 64)), b, 1)
        return u64(drv.launches[-1]["raw"][0])

    first = launch(0x10000, (256, 128), (128, 1))
    assert [launch(0x10000, (256, 128), (128, 1)) for _ in range(3)] == [first] * 3  # new objects, same map
    assert len(drv.encoded) == 1 and len(drv.uploads) == 1
    others = [launch(0x20000, (256, 128), (128, 1)),   # another base
              launch(0x10000, (200, 128), (128, 1)),   # another extent
              launch(0x10000, (256, 128), (256, 1)),   # another row stride
              launch(0x10000, (256, 128), (128, 1), device=1)]  # the same address on another device
    assert len(set(others + [first])) == 5 and len(drv.encoded) == 5
    assert [a[2:6] for _, a in drv.encoded[1:4]] == [
        (0x20000, (128, 256), (256,), (32, 64)), (0x10000, (128, 200), (256,), (32, 64)),
        (0x10000, (128, 256), (512,), (32, 64))]
    assert drv.encoded[-1][1][8] == "CU_TENSOR_MAP_SWIZZLE_64B"
    # device 0's maps share one slab, 128 bytes apart; device 1's map lives in its own slab, made there
    assert [s - first for s in others[:3]] == [128, 256, 384]
    assert [(d, n) for d, _, n in drv.allocs] == [(0, SLAB), (1, SLAB)] and drv.encoded[-1][0] == 1
    assert drv.uploads[-1] == (1, others[-1]) and others[-1] == drv.allocs[1][1]
    assert launch(0x10000, (256, 128), (128, 1), device=1) == others[-1]


def test_keyword_and_positional_launches_pass_the_same_parameters(tmp_path, torch):
    lib, drv = load(tmp_path)
    a = rt.TensorDescriptor(_tensor(torch, 0x10000, (64, 64), (64, 1)), (64, 64), (64, 1), (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    lib.k[(1,)](a, b, 3)
    lib.k[(1,)](a, b_desc=b, n=3)
    lib.k[(1,)](b_desc=b, n=3, a_desc=a)
    lib.k.run(a, b, 3, grid=(1,))
    assert len(drv.launches) == 4 and all(c["raw"] == drv.launches[0]["raw"] for c in drv.launches)
    assert len(drv.encoded) == 1


def test_a_tensor_as_descriptor_takes_the_signature_block(tmp_path, torch):
    lib, drv = load(tmp_path)
    a = _tensor(torch, 0x10000, (128, 64), (64, 1))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    lib.k[(1,)](a, b, 3)
    assert drv.encoded[0][1][3:6] == ((64, 128), (128,), (64, 64))
    assert u64(drv.launches[-1]["raw"][1]) == 0x10000


def test_select_encodes_nothing(tmp_path, torch):
    lib, drv = load(tmp_path)
    a = rt.TensorDescriptor(_tensor(torch, 0x10000, (64, 64), (64, 1)), (64, 64), (64, 1), (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    assert lib.k.select(a, b, 3).variant == "k_tma"
    assert not drv.encoded and not drv.allocs


@pytest.mark.parametrize("shape, strides, why", [
    ((0, 64), (64, 1), r"a_desc: TMA needs every extent in \[1, 2\*\*32\]"),
    ((64, 2**32 + 1), (2**32 + 8, 1), r"a_desc: TMA needs every extent in \[1, 2\*\*32\]"),
    ((64, 64), (2**39, 1), r"a_desc: TMA needs strides .* below 2\*\*40"),
    ((64, 64), (-64, 1), r"a_desc: TMA needs strides that are non-negative"),
])
def test_what_the_driver_api_refuses_is_a_descriptor_error(tmp_path, torch, shape, strides, why):
    lib, drv = load(tmp_path)
    a = rt.TensorDescriptor(_tensor(torch, 0x10000, shape, strides), shape, strides, (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    with pytest.raises(rt.DescriptorError, match=why):
        lib.k[(1,)](a, b, 3)
    assert not drv.encoded and not drv.launches


def test_the_pointer_form_checks_still_come_first(tmp_path, torch):
    lib, drv = load(tmp_path)
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    bad = rt.TensorDescriptor(_tensor(torch, 0x10008, (64, 64), (64, 1)), (64, 64), (64, 1), (64, 64))
    with pytest.raises(rt.DescriptorError, match="a_desc: the base address must be 16-byte aligned"):
        lib.k[(1,)](bad, b, 3)
    host = rt.TensorDescriptor(_tensor(torch, 0x10000, (64, 64), (64, 1), device=-1), (64, 64), (64, 1), (64, 64))
    with pytest.raises(rt.DescriptorError, match="a_desc: the descriptor's tensor is in host memory"):
        lib.k[(1,)](host, b, 3)
    assert not drv.encoded


def test_small_tensors_get_the_driver_workaround_up_to_cuda_13_1(tmp_path, torch):
    """Bit 85 of the map is cleared where cuDriverGetVersion <= 13010 and the tensor spans less
    than 128 KiB (Triton's fillTMADescriptorTiled, after CUTLASS)."""
    for version, shape, cleared in ((13010, (64, 64), True), (13020, (64, 64), False),
                                    (13000, (513, 128), False), (13000, (512, 128), True)):
        lib, drv = load(tmp_path / str(version) / str(shape[0]), version=version)
        a = rt.TensorDescriptor(_tensor(torch, 0x10000, shape, (128, 1)), shape, (128, 1), (64, 64))
        lib.k[(1,)](a, rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16)), 1)
        data = drv.memory[u64(drv.launches[-1]["raw"][0])]
        assert data[10] == (0xDF if cleared else 0xFF) and data[:10] == bytes([1]) + b"\xff" * 9
        assert data[11:] == b"\xff" * 117


def test_a_full_device_starts_a_new_generation_after_a_synchronize():
    drv = TMADriver()
    maps = TensorMaps(drv, max_slots=2, slab_slots=2)

    def addr(ptr, device=0):
        return maps.address(device, "fp16", ptr, (64, 64), (64, 1), (64, 64), 128)

    a, b = addr(0x1000), addr(0x2000)
    other = addr(0x1000, device=1)
    assert b == a + 128 and drv.syncs == 0 and len(maps.table) == 3
    c = addr(0x3000)  # device 0 is full: a new generation in a new slab, nothing freed yet
    assert drv.syncs == 1 and not drv.freed and c not in (a, b)
    assert set(maps.table.values()) == {c, other}  # device 0's old maps are forgotten, device 1's kept
    assert addr(0x1000) == c + 128 and maps.encodes == 5
    addr(0x4000)  # full again: the first generation's slab is freed now
    assert drv.syncs == 2 and drv.freed == [a]
    assert addr(0x1000, device=1) == other


def test_the_map_is_encoded_on_the_device_that_holds_the_tensor(tmp_path, torch):
    lib, drv = load(tmp_path)
    a = rt.TensorDescriptor(_tensor(torch, 0x10000, (64, 64), (64, 1), device=1), (64, 64), (64, 1), (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32", device=1), (8, 16), (16, 1), (8, 16))
    lib.k[(1,)](a, b, 3)
    assert drv.switches == [1] and drv.encoded[0][0] == 1 and drv.allocs[0][0] == 1
    assert drv.contexts[-1] == 1  # the launch went to device 1 too


def test_cuda_array_interface_bases_use_the_current_device(tmp_path, torch):
    lib, drv = load(tmp_path)

    class Cai:
        __cuda_array_interface__ = {"data": (0x30000, False), "typestr": "<f2", "shape": (64, 64), "version": 3}

    a = rt.TensorDescriptor(Cai(), (64, 64), (64, 1), (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    drv.current = 0
    lib.k[(1,)](a, b, 3)
    assert drv.encoded[0][1][2] == 0x30000 and drv.allocs[0][0] == 0


def test_variants_that_encode_a_descriptor_differently_are_refused_at_load(tmp_path):
    write_lib(tmp_path, [tma_doc("k_a", num_warps=4), tma_doc("k_b", num_warps=8, swizzle=64, box=(64, 32))])
    lib = rt.load(str(tmp_path), driver=TMADriver())
    with pytest.raises(rt.MetadataError, match="k_a, k_b disagree on descriptor 'a_desc'"):
        _ = lib.k
    assert isinstance(lib.variant("k_b"), DescriptorLauncher)  # one variant alone is fine


def test_variants_that_agree_share_one_launcher(tmp_path, torch):
    lib, drv = load(tmp_path, [tma_doc("k_a", num_warps=4), tma_doc("k_b", num_warps=8)])
    a = rt.TensorDescriptor(_tensor(torch, 0x10000, (64, 64), (64, 1)), (64, 64), (64, 1), (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    lib.k[(1,)](a, b, 3, num_warps=8)
    assert drv.launches[-1]["block_x"] == 256 and len(drv.encoded) == 1


@pytest.mark.parametrize("tma, why", [
    ({"swizzle": 16, "box": [64, 64]}, "has 'tma'"),
    ({"swizzle": 128, "box": [64]}, "has 'tma'"),
    ({"swizzle": 128}, "has 'tma'"),
])
def test_a_malformed_tma_record_is_a_metadata_error(tmp_path, tma, why):
    doc = tma_doc()
    doc["descriptors"][0]["tma"] = tma
    write_lib(tmp_path, [doc])
    with pytest.raises(rt.MetadataError, match=why):
        _ = rt.load(str(tmp_path), driver=TMADriver()).k


def test_a_tma_record_without_its_tensormap_parameter_is_a_metadata_error(tmp_path):
    doc = tma_doc()
    doc["params"] = doc["params"][1:]
    write_lib(tmp_path, [doc])
    with pytest.raises(rt.MetadataError, match=r"descriptor 'a_desc' passes as \['base', 'shape', 'shape', 'stride'\] "
                                               r"in the metadata's params, not as the contiguous \['tensormap', 'base'"):
        _ = rt.load(str(tmp_path), driver=TMADriver()).k


def test_a_driver_without_the_seam_says_so(tmp_path, torch):
    write_lib(tmp_path, [tma_doc()])
    drv = RecordingDriver()
    lib = attach(rt.load(str(tmp_path), driver=drv), drv)
    a = rt.TensorDescriptor(_tensor(torch, 0x10000, (64, 64), (64, 1)), (64, 64), (64, 1), (64, 64))
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 16), (16, 1), (8, 16))
    with pytest.raises(TensorMapError, match="RecordingDriver cannot encode CUDA tensor maps"):
        lib.k[(1,)](a, b, 3)


def test_the_driver_of_a_tuned_launcher_is_its_base_launchers():
    drv = object()
    assert _driver_of(types.SimpleNamespace(driver=drv)) is drv
    assert _driver_of(types.SimpleNamespace(base=types.SimpleNamespace(driver=drv))) is drv


@pytest.mark.parametrize("dtype, enum, size", [
    ("bf16", "BFLOAT16", 2), ("fp32", "FLOAT32", 4), ("fp64", "FLOAT64", 8), ("fp8e4nv", "UINT8", 1),
    ("fp8e5", "UINT8", 1), ("i8", "UINT8", 1), ("u8", "UINT8", 1), ("i16", "UINT16", 2), ("i32", "INT32", 4),
    ("u32", "UINT32", 4), ("i64", "INT64", 8), ("u64", "UINT64", 8),
])
def test_every_dtype_has_its_data_type_and_byte_strides(dtype, enum, size):
    args = encode_args(dtype, 0x1000, (3, 5, 64), (640, 64, 1), (1, 2, 32), 0)
    assert args[0] == f"CU_TENSOR_MAP_DATA_TYPE_{enum}" and args[1] == 3
    assert args[3:7] == ((64, 5, 3), (64 * size, 640 * size), (32, 2, 1), (1, 1, 1))
    assert args[8] == "CU_TENSOR_MAP_SWIZZLE_NONE"


def test_the_enumerator_names_are_cuda_bindings():
    cu = pytest.importorskip("cuda.bindings.driver")
    for name in tensormap.DATA_TYPES.values():
        getattr(cu.CUtensorMapDataType, name)
    for name in tensormap.SWIZZLES.values():
        getattr(cu.CUtensorMapSwizzle, name)
    getattr(cu.CUtensorMapInterleave, tensormap.INTERLEAVE)
    getattr(cu.CUtensorMapL2promotion, tensormap.L2_PROMOTION)
    getattr(cu.CUtensorMapFloatOOBfill, tensormap.OOB_FILL)
    assert len(cu.CUtensorMap().opaque) == 16


def test_the_cuda_seam_calls_the_driver_api_in_order():
    """CudaTensorMaps over a stand-in cuda.bindings module: what each call receives (no GPU)."""
    calls = []

    class Enum:
        def __init__(self, kind):
            self.kind = kind

        def __getattr__(self, name):
            return (self.kind, name)

    def rec(name, *out):
        def call(*args):
            calls.append((name, args))
            return (0, *out)
        return call

    words = list(range(16))
    tmap = types.SimpleNamespace(opaque=[w + 0x100 for w in words])
    cu = types.SimpleNamespace(
        CUtensorMapDataType=Enum("dt"), CUtensorMapInterleave=Enum("il"), CUtensorMapSwizzle=Enum("sw"),
        CUtensorMapL2promotion=Enum("l2"), CUtensorMapFloatOOBfill=Enum("oob"),
        CUstream_flags=types.SimpleNamespace(CU_STREAM_NON_BLOCKING=1), CU_MEMHOSTALLOC_PORTABLE=1,
        cuTensorMapEncodeTiled=rec("encode", tmap), cuMemAlloc=rec("alloc", 0x9000), cuMemFree=rec("free"),
        cuMemHostAlloc=rec("hostalloc", 0), cuStreamCreate=rec("stream", 0x55), cuCtxGetDevice=rec("device", 3),
        cuMemcpyHtoDAsync=rec("copy"), cuStreamSynchronize=rec("sync"), cuCtxSynchronize=rec("ctxsync"),
        cuuint64_t=lambda x: ("u64", x), cuuint32_t=lambda x: ("u32", x))

    class Driver:
        def __init__(self):
            self.cu = cu

        def check(self, call, result, detail=""):
            assert result[0] == 0
            return result[1] if len(result) == 2 else None

    seam = CudaTensorMaps(Driver())
    data = seam.tensor_map_encode_tiled(*encode_args("fp16", 0x1000, (4, 64), (64, 1), (4, 64), 128))
    assert data == b"".join((w + 0x100).to_bytes(8, "little") for w in words)
    u64, u32 = (lambda *xs: [("u64", x) for x in xs]), (lambda *xs: [("u32", x) for x in xs])
    assert calls[0] == ("encode", (("dt", "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"), 2, 0x1000, u64(64, 4), u64(128), u32(64, 4),
                                   u32(1, 1), ("il", "CU_TENSOR_MAP_INTERLEAVE_NONE"), ("sw", "CU_TENSOR_MAP_SWIZZLE_128B"),
                                   ("l2", "CU_TENSOR_MAP_L2_PROMOTION_L2_128B"),
                                   ("oob", "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")))
    assert seam.tensor_map_alloc(4096) == 0x9000 and calls[-1] == ("alloc", (4096,))
    staging = bytearray(128)  # the pinned buffer: a host bytearray's address stands in for cuMemHostAlloc's
    holder = (ctypes.c_char * 128).from_buffer(staging)
    seam._staging = ctypes.addressof(holder)
    seam.tensor_map_upload(0x9000, data)
    assert bytes(staging) == data
    assert [c[0] for c in calls[-4:]] == ["device", "stream", "copy", "sync"]
    assert calls[-2] == ("copy", (0x9000, seam._staging, 128, 0x55)) and calls[-1] == ("sync", (0x55,))
    seam.tensor_map_upload(0x9080, data)
    assert [c[0] for c in calls[-3:]] == ["device", "copy", "sync"]  # the stream is made once per device
    seam.tensor_map_synchronize()
    seam.tensor_map_free(0x9000)
    assert calls[-2:] == [("ctxsync", ()), ("free", (0x9000,))]
    del holder


# ---------------------------------------------------------------- the C expansion (claunch.c)


@pytest.fixture
def c_module():
    module = cext.load()
    if module is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    return module


class Recorder:
    def __init__(self, name, result=None):
        self.name, self.calls, self.result = name, [], result

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.name if self.result is None else self.result


class Base:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


def test_desc_expand_puts_the_map_address_in_front_of_base(c_module):
    inner, fallback, tmap = Recorder("inner"), Recorder("fallback"), Recorder("tm", 0xABC00)
    launch = c_module.DescExpand(bytes([2, 0, 2]), (2, 0, 4), ((64, 32), None, (8, 16)), inner, fallback,
                                 tensormaps=(tmap, None, None))
    a, c = Base(0x1000), Base(0x2000)
    d = rt.TensorDescriptor(a, [128, 96], [96, 1], [64, 32])
    assert launch(d, 7, rt.TensorDescriptor(c, (4, 16), (16, 1), (8, 16))) == "inner"
    (args, _), = inner.calls
    assert args == (0xABC00, a, 128, 96, 96, 7, c, 4, 16, 16) and not fallback.calls
    (targs, _), = tmap.calls
    assert targs[0] is a and targs[1:] == (0x1000, [128, 96], [96, 1])


class EpochMaps:
    """TensorMaps' epoch counter as the C path reads it (at epoch_address)."""

    def __init__(self):
        self.counter = ctypes.c_uint64(0)
        self.epoch_address = ctypes.addressof(self.counter)


def test_desc_expand_reuses_a_map_address_until_the_key_or_the_epoch_changes(c_module):
    """The C one-entry cache per TMA position: a repeated (address, shape, strides) calls no
    Python while the epoch counter of `tmap.maps` (at its epoch_address) holds; a new address, shape or epoch asks again; a mapper with
    no maps yet (first launch) is always asked."""
    class Mapper:
        def __init__(self):
            self.maps, self.calls = None, 0

        def __call__(self, base, address, shape, strides):
            self.calls += 1
            if self.maps is None:
                self.maps = EpochMaps()
            return 0x10000 + address + 128 * self.calls

    inner, fallback, tmap = Recorder("inner"), Recorder("fallback"), Mapper()
    launch = c_module.DescExpand(bytes([2]), (2,), ((64, 32),), inner, fallback, tensormaps=(tmap,))
    a = Base(0x1000)
    d = rt.TensorDescriptor(a, [128, 96], [96, 1], [64, 32])
    for _ in range(3):
        launch(d)
    assert tmap.calls == 1 and {c[0][0] for c in inner.calls} == {0x11080}
    launch(rt.TensorDescriptor(a, [64, 96], [96, 1], [64, 32]))  # another shape
    launch(rt.TensorDescriptor(Base(0x2000), [64, 96], [96, 1], [64, 32]))  # another address
    assert tmap.calls == 3
    launch(rt.TensorDescriptor(Base(0x2000), [64, 96], [96, 1], [64, 32]))
    assert tmap.calls == 3
    tmap.maps.counter.value = 1  # maps forgotten: the cached address may be freed
    launch(rt.TensorDescriptor(Base(0x2000), [64, 96], [96, 1], [64, 32]))
    assert tmap.calls == 4 and inner.calls[-1][0][0] == 0x10000 + 0x2000 + 128 * 4
    # the same shape and strides tuples (immutable): only the address and the epoch are compared
    shape, strides = (32, 64), (64, 1)
    for ptr, calls in ((0x3000, 5), (0x3000, 5), (0x4000, 6), (0x3000, 7)):
        launch(rt.TensorDescriptor(Base(ptr), shape, strides, [64, 32]))
        assert tmap.calls == calls and inner.calls[-1][0][:4] == (0x10000 + ptr + 128 * calls, inner.calls[-1][0][1], 32, 64)
    launch(rt.TensorDescriptor(Base(0x3000), (32, 64), (48, 1), [64, 32]))  # other strides
    assert tmap.calls == 8 and inner.calls[-1][0][4] == 48
    assert not fallback.calls


def test_desc_expand_keys_its_map_cache_on_the_base_device(c_module):
    """The same address, shape and strides on another device is another map (each device has
    its own maps): the one-entry cache holds the base's get_device() too."""
    class Mapper:
        def __init__(self):
            self.maps, self.calls = EpochMaps(), []

        def __call__(self, base, address, shape, strides):
            self.calls.append(base.get_device())
            return 0x10000 + 128 * base.get_device()

    class DevBase(Base):
        def __init__(self, ptr, dev):
            super().__init__(ptr)
            self.dev = dev

        def get_device(self):
            return self.dev

    inner, fallback, tmap = Recorder("inner"), Recorder("fallback"), Mapper()
    launch = c_module.DescExpand(bytes([2]), (2,), ((64, 32),), inner, fallback, tensormaps=(tmap,))
    shape, strides = (128, 96), (96, 1)
    for dev in (0, 0, 1, 1, 0):
        launch(rt.TensorDescriptor(DevBase(0x1000, dev), shape, strides, (64, 32)))
    assert tmap.calls == [0, 1, 0] and [c[0][0] for c in inner.calls] == [0x10000] * 2 + [0x10080] * 2 + [0x10000]
    assert not fallback.calls


def test_desc_expand_leaves_refused_descriptors_to_python_and_raises_what_the_map_raises(c_module):
    inner, fallback = Recorder("inner"), Recorder("fallback")

    def tmap(base, address, shape, strides):
        raise rt.DescriptorError("k: a: TMA needs every extent in [1, 2**32]")

    launch = c_module.DescExpand(bytes([2]), (2,), ((64, 32),), inner, fallback, tensormaps=(tmap,))
    bad = rt.TensorDescriptor(Base(0x1008), [128, 96], [96, 1], [64, 32])
    assert launch(bad) == "fallback"  # misaligned: the Python launch says why
    with pytest.raises(rt.DescriptorError, match="TMA needs every extent"):
        launch(rt.TensorDescriptor(Base(0x1000), [0, 96], [96, 1], [64, 32]))
    assert not inner.calls
    with pytest.raises(TypeError, match="tensormaps"):
        c_module.DescExpand(bytes([2, 0]), (2, 0), ((64, 32), None), inner, fallback, tensormaps=(None, tmap))
    with pytest.raises(TypeError, match="tensormaps"):
        c_module.DescExpand(bytes([2]), (2,), ((64, 32),), inner, fallback, tensormaps=(tmap, None))


@dataclass
class TritonDesc:  # triton.tools.tensor_descriptor.TensorDescriptor's fields, as from_tensor fills them
    base: object
    shape: object
    strides: object
    block_shape: list
    padding: str = "zero"


class Size(tuple):
    """torch.Size's part here: a tuple subclass."""


@pytest.mark.parametrize("form", ["ttbuild", "triton"])
@pytest.mark.parametrize("c_tensor", [False, True], ids=["python-tensors", "c-tensors"])
def test_the_c_and_python_expansions_launch_the_same_bytes(tmp_path, c_module, monkeypatch, form, c_tensor):
    """The C expansion (DescExpand handing what it read straight to the FastLaunch) and the
    Python one launch the same parameters, for ttbuild's and Triton-shaped descriptors, over
    Python-class tensors and C-typed ones (read through their C functions)."""
    torch = FakeTorch(monkeypatch, c_tensor=c_tensor)
    if c_tensor and torch.Tensor.__mro__[1] is object:
        pytest.skip("no C tensor stand-in here")

    def desc(t, shape, strides, block):
        if form == "ttbuild":
            return rt.TensorDescriptor(t, shape, strides, block)
        return TritonDesc(t, Size(shape), tuple(strides), list(block))

    outcomes = []
    for c in (True, False):
        if not c:
            monkeypatch.setenv("TTBUILD_C_LAUNCHER", "0")
        lib, drv = load(tmp_path / str(c), c=c)
        a = torch.Tensor(0x10000, "float16")
        a.shape, a._strides = (300, 512), (512, 1)
        a.stride = lambda a=a: a._strides
        b = desc(torch.Tensor(0x80000, "float32"), (8, 32), (32, 1), (8, 16))
        launch = lib.k[(3,)]
        assert (type(launch).__name__ == "DescExpand") == c
        for ptr in (0x10000, 0x10000, 0x20000, 0x10000):
            launch(desc(torch.Tensor(ptr, "float16"), (300, 512), (512, 1), (64, 64)), b, 5)
        launch(a, b, 5)  # a tensor: the Python expansion behind the C one
        outcomes.append(([c["raw"] for c in drv.launches], [e[1] for e in drv.encoded]))
        if c:
            assert drv.launches[-2]["path"] == "c"
    base = [u64(r[0]) for r in outcomes[0][0]]
    assert base[0] == base[1] == base[3] == base[4] and base[2] == base[0] + 128
    # slab addresses differ per driver; the rest of every launch, and what was encoded, do not
    assert [[r[1:] for r in rs] for rs in outcomes[0][0]] == [[r[1:] for r in rs] for rs in outcomes[1][0]]
    assert outcomes[0][1] == outcomes[1][1] and len(outcomes[0][1]) == 2


# ---------------------------------------------------------------- padding ("zero" / "nan", as Triton's)

NAN_FILL = "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"
ZERO_FILL = "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"


class NoPadding:
    """A duck-typed descriptor without `padding` (slotted, no instance dict): pads with zeros."""

    __slots__ = ("base", "shape", "strides", "block_shape")

    def __init__(self, base, shape, strides, block_shape):
        self.base, self.shape, self.strides, self.block_shape = base, shape, strides, block_shape


def _padded(form, t, shape, strides, block, padding):
    if form == "ttbuild":
        return rt.TensorDescriptor(t, shape, strides, block, padding)
    if form == "triton":
        return TritonDesc(t, Size(shape), tuple(strides), list(block), padding)
    assert padding == "zero"
    return NoPadding(t, tuple(shape), tuple(strides), tuple(block))


@pytest.mark.parametrize("c", [True, False], ids=["c-path", "python-path"])
@pytest.mark.parametrize("form", ["ttbuild", "triton"])
def test_padding_nan_encodes_the_nan_fill_and_differs_from_zero_in_every_cache(tmp_path, monkeypatch, torch, c, form):
    """padding="nan" encodes the map with CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    "zero" (and a descriptor without padding) with FILL_NONE; descriptors differing only in
    padding get different maps, on the C path's one-entry cache and on TensorMaps' table."""
    if c and cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    if not c:
        monkeypatch.setenv("TTBUILD_C_LAUNCHER", "0")
    lib, drv = load(tmp_path, c=c)
    launch = lib.k[(1,)]
    assert (type(launch).__name__ == "DescExpand") == c
    b = rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 32), (32, 1), (8, 16))

    def go(padding, form=form):
        launch(_padded(form, torch.Tensor(0x10000, "float16"), (300, 512), (512, 1), (64, 64), padding), b, 5)
        return u64(drv.launches[-1]["raw"][0])

    zero = go("zero")
    nan = go("nan")
    assert nan != zero and [a[-1] for _, a in drv.encoded] == [ZERO_FILL, NAN_FILL]
    # alternating: each hits its own map, nothing is encoded again (no mix-up in either cache)
    assert [go(p) for p in ("zero", "nan", "nan", "zero", "nan")] == [zero, nan, nan, zero, nan]
    assert go("zero", "plain") == zero and go("nan") == nan and len(drv.encoded) == 2
    if c:
        assert {x["path"] for x in drv.launches[1:]} == {"c"}  # nan and no padding stay in C
    assert [a[:-1] for _, a in drv.encoded][0] == [a[:-1] for _, a in drv.encoded][1]  # only the fill differs


def test_the_c_and_python_paths_launch_the_same_bytes_with_nan_padding(tmp_path, c_module, monkeypatch, torch):
    outcomes = []
    for c in (True, False):
        if not c:
            monkeypatch.setenv("TTBUILD_C_LAUNCHER", "0")
        lib, drv = load(tmp_path / str(c), c=c)
        b = TritonDesc(torch.Tensor(0x80000, "float32"), Size((8, 32)), (32, 1), [8, 16])
        for ptr, padding in ((0x10000, "nan"), (0x10000, "zero"), (0x20000, "nan"), (0x10000, "nan")):
            lib.k[(3,)](rt.TensorDescriptor(torch.Tensor(ptr, "float16"), (300, 512), (512, 1), (64, 64), padding), b, 5)
        outcomes.append(([x["raw"] for x in drv.launches], [e[1] for e in drv.encoded],
                         [drv.memory[u64(x["raw"][0])] for x in drv.launches]))
    base = [u64(r[0]) for r in outcomes[0][0]]
    assert len(set(base)) == 3 and base[0] == base[3]
    assert [[r[1:] for r in rs] for rs in outcomes[0][0]] == [[r[1:] for r in rs] for rs in outcomes[1][0]]
    assert outcomes[0][1] == outcomes[1][1] and [a[-1] for a in outcomes[0][1]] == [NAN_FILL, ZERO_FILL, NAN_FILL]
    assert outcomes[0][2] == outcomes[1][2]  # the map bytes each launch reads


def test_tensor_maps_key_on_padding():
    maps = TensorMaps(TMADriver())
    args = (0, "fp32", 0x10000, (64, 64), (64, 1), (32, 32), 128)
    zero, nan = maps.address(*args), maps.address(*args, "nan")
    assert zero != nan and maps.address(*args, "zero") == zero and maps.address(*args, "nan") == nan
    assert [a[-1] for _, a in maps.driver.encoded] == [ZERO_FILL, NAN_FILL]
    assert encode_args("bf16", 0x10000, (64, 64), (64, 1), (32, 32), 0, "nan")[-1] == NAN_FILL
    with pytest.raises(TensorMapError, match="Illegal value for padding"):
        encode_args("fp16", 0x10000, (64, 64), (64, 1), (32, 32), 0, "inf")
    for dtype in ("i32", "fp8e4nv"):  # 8-bit floats are UINT8 maps: the driver cannot NaN-fill them
        with pytest.raises(TensorMapError, match="Padding option `nan` is only supported for floating point"):
            encode_args(dtype, 0x10000, (64, 64), (64, 1), (32, 32), 0, "nan")


@pytest.mark.parametrize("c", [True, False], ids=["c-path", "python-path"])
def test_nan_padding_through_pointers_is_refused(tmp_path, monkeypatch, torch, c):
    """b_desc is read through pointers with other=0: NaN padding would silently read zeros."""
    if c and cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    if not c:
        monkeypatch.setenv("TTBUILD_C_LAUNCHER", "0")
    lib, drv = load(tmp_path, c=c)
    a = rt.TensorDescriptor(torch.Tensor(0x10000, "float16"), (300, 512), (512, 1), (64, 64), "nan")
    for b in (rt.TensorDescriptor(torch.Tensor(0x80000, "float32"), (8, 32), (32, 1), (8, 16), "nan"),
              TritonDesc(torch.Tensor(0x80000, "float32"), Size((8, 32)), (32, 1), [8, 16], "nan")):
        with pytest.raises(rt.DescriptorError, match=r"k: b_desc: padding=\"nan\" cannot be honoured: this variant "
                                                     r"reads b_desc through pointers, out-of-bounds elements zero-filled"):
            lib.k[(1,)](a, b, 5)
        with pytest.raises(rt.DescriptorError, match="reads b_desc through pointers"):
            lib.k[(1,)](a, b_desc=b, n=5)
        with pytest.raises(rt.DescriptorError, match="reads b_desc through pointers"):
            lib.k.select(a, b, 5)
    assert not drv.launches


def test_tritons_padding_checks():
    class Dtype:
        def __init__(self, floating):
            self.is_floating_point = floating

    class T(Base):
        def __init__(self, ptr, floating):
            super().__init__(ptr)
            self.dtype = Dtype(floating)

    assert rt.TensorDescriptor(T(0, True), (4,), (1,), (4,)).padding == "zero"
    assert rt.TensorDescriptor(T(0, True), (4,), (1,), (4,), "nan").padding == "nan"
    assert rt.TensorDescriptor.from_tensor(_FromTensor(), (4, 4), padding="nan").padding == "nan"
    with pytest.raises(rt.DescriptorError, match="Illegal value for padding"):
        rt.TensorDescriptor(T(0, True), (4,), (1,), (4,), "NaN")
    with pytest.raises(rt.DescriptorError, match="Padding option `nan` is only supported for floating point tensors"):
        rt.TensorDescriptor(T(0, False), (4,), (1,), (4,), "nan")
    # at launch (Triton's dataclass, or a base whose dtype says nothing): the kernel's descriptor dtype
    from ttbuild.runtime.tensordesc import expander

    spec = {"name": "x", "dtype": "i32", "block_shape": [4]}
    tm = Recorder("tm", 0x100)
    with pytest.raises(rt.DescriptorError, match="k: x: Padding option `nan` is only supported for floating point "
                                                 "tensors; the kernel's descriptor holds i32"):
        expander(spec, "k", tm)(TritonDesc(Base(0x1000), (4,), (1,), [4], "nan"))
    with pytest.raises(rt.DescriptorError, match="k: x: Illegal value for padding: 'zeros'"):
        expander(dict(spec, dtype="fp32"), "k", tm)(TritonDesc(Base(0x1000), (4,), (1,), [4], "zeros"))
    assert expander(dict(spec, dtype="fp32"), "k", tm)(TritonDesc(Base(0x1000), (4,), (1,), [4], "nan"))[0] == 0x100
    assert tm.calls[-1][0][4] == "nan" and not tm.calls[-1][1]


class _FromTensor(Base):
    shape = (4, 4)

    def __init__(self):
        super().__init__(0)
        self.dtype = types.SimpleNamespace(is_floating_point=True)

    def stride(self):
        return (4, 1)


def test_desc_expand_keys_its_map_cache_on_padding(c_module):
    """The C one-entry cache holds the fill: "zero" / "nan" alternating asks the mapper each
    time (padding passed only where "nan"); an illegal padding goes to the Python launch."""
    class Mapper:
        def __init__(self):
            self.maps, self.calls = EpochMaps(), []

        def __call__(self, base, address, shape, strides, *padding):
            self.calls.append(padding)
            return 0x10000 + 128 * len(padding)

    inner, fallback, tmap = Recorder("inner"), Recorder("fallback"), Mapper()
    launch = c_module.DescExpand(bytes([2, 2]), (2, 2), ((64, 32), (64, 32)), inner, fallback,
                                 tensormaps=(tmap, None))
    shape, strides, p = (128, 96), (96, 1), rt.TensorDescriptor(Base(0x2000), (128, 96), (96, 1), (64, 32))
    for padding in ("zero", "zero", "nan", "nan", "zero"):
        launch(rt.TensorDescriptor(Base(0x1000), shape, strides, (64, 32), padding), p)
    assert tmap.calls == [(), ("nan",), ()] and [x[0][0] for x in inner.calls] == [0x10000] * 2 + [0x10080] * 2 + [0x10000]
    assert not fallback.calls
    launch(TritonDesc(Base(0x1000), shape, strides, [64, 32], "bogus"), p)  # Python says why
    launch(rt.TensorDescriptor(Base(0x1000), shape, strides, (64, 32)),
           rt.TensorDescriptor(Base(0x2000), (128, 96), (96, 1), (64, 32), "nan"))  # pointer form: refused there
    assert len(fallback.calls) == 2 and len(inner.calls) == 5
