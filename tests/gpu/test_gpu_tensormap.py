"""The runtime's CUtensorMaps on a real GPU (ttbuild.runtime.tensormap over CudaDriver): what lands in the device slot is what cuTensorMapEncodeTiled encodes, on the tensor's device, 64-byte aligned; repeated descriptors reuse their slot; a new generation frees only the one before."""

from __future__ import annotations

import ctypes

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda(torch):
    from ttbuild.runtime.driver import CudaDriver

    driver = CudaDriver()
    torch.zeros(1, device="cuda")  # torch's primary context current
    return driver


def _read(driver, address):
    buf = ctypes.create_string_buffer(128)
    driver.check("cuMemcpyDtoH", driver.cu.cuMemcpyDtoH(ctypes.addressof(buf), address, 128))
    return buf.raw


def _direct(driver, args):
    from ttbuild.runtime.tensormap import CudaTensorMaps

    return CudaTensorMaps(driver).tensor_map_encode_tiled(*args)


@pytest.mark.parametrize("dtype, tdt, shape, box, swizzle", [
    ("fp16", "float16", (300, 520), (64, 64), 128), ("bf16", "bfloat16", (64, 64), (64, 32), 64),
    ("fp32", "float32", (1000, 96), (128, 8), 32), ("fp32", "float32", (17, 40), (16, 16), 0),
])
def test_the_slot_holds_the_encoded_map(torch, cuda, dtype, tdt, shape, box, swizzle):
    from ttbuild.runtime.tensormap import CudaTensorMaps, TensorMaps, encode_args, small_tensor_fix

    maps = TensorMaps(CudaTensorMaps(cuda))
    t = torch.empty(shape, device="cuda", dtype=getattr(torch, tdt))
    key = (t.get_device(), dtype, t.data_ptr(), tuple(t.shape), tuple(t.stride()), box, swizzle)
    slot = maps.address(*key)
    assert slot % 64 == 0 and maps.address(*key) == slot and maps.encodes == 1
    want = small_tensor_fix(_direct(cuda, encode_args(dtype, t.data_ptr(), t.shape, t.stride(), box, swizzle)),
                            dtype, t.shape, t.stride(), cuda.driver_version())
    assert _read(cuda, slot) == want
    other = maps.address(key[0], dtype, t.data_ptr() + 16 * 64, tuple(t.shape), tuple(t.stride()), box, swizzle)
    assert other == slot + 128 and _read(cuda, other) != want


def test_maps_live_on_the_tensors_device(torch, cuda):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from ttbuild.runtime.tensormap import CudaTensorMaps, TensorMaps

    maps = TensorMaps(CudaTensorMaps(cuda))
    t = torch.empty((128, 128), device="cuda:1", dtype=torch.float16)
    slot = maps.address(1, "fp16", t.data_ptr(), (128, 128), (128, 1), (64, 64), 128)
    attr = cuda.cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    assert int(cuda.check("cuPointerGetAttribute", cuda.cu.cuPointerGetAttribute(attr, slot))) == 1


def test_a_new_generation_synchronizes_and_frees_the_one_before(torch, cuda):
    from ttbuild.runtime.tensormap import CudaTensorMaps, TensorMaps, encode_args, small_tensor_fix

    maps = TensorMaps(CudaTensorMaps(cuda), max_slots=2, slab_slots=2)
    t = torch.empty((256, 256), device="cuda", dtype=torch.float16)
    dev = t.get_device()
    for i in range(7):  # 2-slot generations: the slabs of two generations back are freed (and reused)
        base = t.data_ptr() + 16 * i
        slot = maps.address(dev, "fp16", base, (128, 128), (256, 1), (64, 64), 128)
        want = small_tensor_fix(_direct(cuda, encode_args("fp16", base, (128, 128), (256, 1), (64, 64), 128)),
                                "fp16", (128, 128), (256, 1), cuda.driver_version())
        assert _read(cuda, slot) == want  # a reused slot holds the new map, never a stale one
    assert maps.encodes == 7
    torch.cuda.synchronize()
