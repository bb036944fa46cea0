"""CPU tests of ttbuild.runtime: metadata loading, variant selection, grids, parameter packing, all up to the driver seam."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_fakes import add_params, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime.args import dtype_name, typestr_name
from ttbuild.runtime.driver import CudaDriver, CudaError

# ---------------------------------------------------------------- fakes

class FakeDriver:
    """Records loads and launches; reads the packed parameter bytes back through params_address."""

    def __init__(self, capability=(9, 0), ctx=1):
        self.capability = capability
        self.ctx = ctx
        self.loads = []
        self.launches = []

    def context(self, device_hint):
        return self.ctx, self.capability

    def load_function(self, image, entry, shared):
        self.loads.append((self.ctx, image, entry, shared))
        return ("fn", entry, self.ctx)

    def launch(self, function, grid, block_x, shared, stream, params_address, values):
        n = len(values)
        ptrs = (ctypes.c_void_p * n).from_address(params_address)
        raw = [ctypes.string_at(ptrs[i], 8) for i in range(n)]
        self.launches.append(dict(function=function, grid=grid, block_x=block_x, shared=shared,
                                  stream=stream, raw=raw, values=values))


class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class FakeTensor:
    """Anything with data_ptr() and a torch-style dtype."""

    def __init__(self, ptr, dtype="torch.float32"):
        self.ptr = ptr
        self.dtype = Dtype(dtype)

    def data_ptr(self):
        return self.ptr


class FakeCAI:
    """A cupy/numba-style device array exposing __cuda_array_interface__."""

    def __init__(self, ptr, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": typestr,
                                         "shape": (4,), "version": 3}


def axpy_params(dt, block):
    return ([{"name": n, "kind": "pointer", "dtype": dt, "divisibility": 16}
             for n in ("x_ptr", "y_ptr", "out_ptr")]
            + [{"name": "a", "kind": "scalar", "dtype": "fp32", "divisibility": 1},
               {"name": "n_elements", "kind": "scalar", "dtype": "i32", "divisibility": 1},
               {"name": "BLOCK_SIZE", "kind": "constexpr", "value": block}])


STANDARD = [
    meta("add_kernel_fp32", "add_kernel", add_params("fp32")),
    meta("add_kernel_fp32_w8", "add_kernel", add_params("fp32"), num_warps=8),
    meta("add_kernel_fp16", "add_kernel", add_params("fp16")),
    meta("axpy_fp32", "axpy_kernel", axpy_params("fp32", 1024)),
    meta("axpy_fp16", "axpy_kernel", axpy_params("fp16", 2048), num_warps=8),
]


@pytest.fixture
def lib_dir(tmp_path):
    return write_lib(tmp_path / "artifacts", STANDARD)


@pytest.fixture
def drv():
    return FakeDriver()


@pytest.fixture
def lib(lib_dir, drv):
    return rt.load(str(lib_dir), driver=drv)


def f32(ptr=0x1000):
    return FakeTensor(ptr, "torch.float32")


def f16(ptr=0x2000):
    return FakeTensor(ptr, "torch.float16")


# ---------------------------------------------------------------- import hygiene

def test_import_pulls_in_no_compiler_and_no_cuda():
    code = ("import sys, ttbuild.runtime as r; r.load; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('mlir','llvmlite','doit','rich','triton','torch','xxhash','cuda','numpy') "
            "or m.startswith(('ttbuild.graph','ttbuild.frontend','ttbuild.backend','ttbuild.stages'))]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_loading_a_library_imports_no_cuda(lib_dir):
    code = (f"import sys, ttbuild.runtime as r; lib = r.load({str(lib_dir)!r}); lib.add_kernel; "
            "print(','.join(m for m in sys.modules if m.startswith('cuda')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------- metadata

def test_load_groups_variants_by_kernel_in_file_order(lib):
    assert lib.kernels == ["add_kernel", "axpy_kernel"]
    assert [v.variant for v in lib.add_kernel.variants] == [
        "add_kernel_fp16", "add_kernel_fp32", "add_kernel_fp32_w8"]
    assert lib.add_kernel.param_names == ("x_ptr", "y_ptr", "output_ptr", "n_elements", "BLOCK_SIZE")
    assert lib.axpy_kernel.runtime_names == ("x_ptr", "y_ptr", "out_ptr", "a", "n_elements")
    assert "add_kernel" in lib and "nope" not in lib


def test_load_accepts_the_lib_folder_itself(lib_dir, drv):
    lib = rt.load(str(lib_dir / "lib"), driver=drv)
    assert lib.kernels == ["add_kernel", "axpy_kernel"]


def test_unknown_kernel_lists_kernels(lib):
    with pytest.raises(AttributeError, match="no kernel 'mul_kernel'.*add_kernel, axpy_kernel"):
        _ = lib.mul_kernel


def test_missing_artifacts_dir(tmp_path):
    with pytest.raises(rt.MetadataError, match="no such directory"):
        rt.load(str(tmp_path / "nothing"))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="ttbuild.kernel/0"), "schema"),
    (lambda d: d.pop("num_warps"), "missing field 'num_warps'"),
    (lambda d: d.update(num_warps="4"), "'num_warps' should be int"),
    (lambda d: d["params"][0].update(dtype="fp33"), "unknown dtype 'fp33'"),
    (lambda d: d["params"][0].update(kind="tensor"), "unknown kind 'tensor'"),
    (lambda d: d["params"][0].update(divisibility=8), "divisibility must be 1 or 16"),
    (lambda d: d.update(target="rocm:942"), "not 'cuda:<cc>'"),
    (lambda d: d.update(cubin="../x.cubin"), "file name beside the JSON"),
    (lambda d: d.update(constexprs={"BLOCK_SIZE": 512}), "512"),
])
def test_bad_metadata_is_rejected_with_file_and_field(tmp_path, mutate, message):
    doc = meta("add_kernel_fp32", "add_kernel", add_params("fp32"))
    write_lib(tmp_path, [doc])
    mutate(doc)
    (tmp_path / "lib" / "add_kernel_fp32.json").write_text(json.dumps(doc))
    with pytest.raises(rt.MetadataError, match=message) as exc:
        rt.load(str(tmp_path))
    assert "add_kernel_fp32.json" in str(exc.value)


def test_missing_cubin(tmp_path):
    write_lib(tmp_path, [STANDARD[0]])
    (tmp_path / "lib" / "add_kernel_fp32.cubin").unlink()
    with pytest.raises(rt.MetadataError, match="cubin .* does not exist"):
        rt.load(str(tmp_path))


def test_inconsistent_params_for_one_kernel(tmp_path):
    """Variants of one kernel (same file and name) that disagree on its parameters: that kernel
    is refused when asked for, naming both files; the rest of the library loads."""
    other = meta("add_kernel_other", "add_kernel", add_params("fp32"))
    other["params"][3]["name"] = "n"
    write_lib(tmp_path, [STANDARD[0], other, meta("axpy", "axpy_kernel", add_params("fp32"))])
    lib = rt.load(str(tmp_path))
    assert "axpy_kernel" in lib.kernels and lib.axpy_kernel is not None
    with pytest.raises(rt.MetadataError, match="parameters differ"):
        _ = lib.add_kernel


def test_kernels_of_the_same_name_in_two_files(tmp_path):
    """Issue 12: two files each define `add_kernel` with different parameters. Both load; each
    is reachable as lib["file.py:add_kernel"] (".py" optional); the short name is ambiguous and
    says which names to use; a unique short name keeps working."""
    a = meta("add_a", "add_kernel", add_params("fp32"), file="a.py")
    b_params = add_params("fp16")
    b_params[3]["name"] = "n"
    b = meta("add_b", "add_kernel", b_params, file="sub/b.py")
    c = meta("axpy", "axpy_kernel", add_params("fp32"), file="a.py")
    write_lib(tmp_path, [a, b, c])
    lib = rt.load(str(tmp_path))
    assert lib.kernels == ["a.py:add_kernel", "axpy_kernel", "sub/b.py:add_kernel"]
    assert [v.variant for v in lib["a.py:add_kernel"].variants] == ["add_a"]
    assert [v.variant for v in lib["sub/b:add_kernel"].variants] == ["add_b"]
    assert lib["sub/b.py:add_kernel"].runtime_names[3] == "n"
    assert lib.axpy_kernel.variants[0].variant == "axpy" and "axpy_kernel" in lib
    with pytest.raises(AttributeError, match=r"kernel 'add_kernel' is defined in 2 files of .*"
                                             r"lib\['a.py:add_kernel'\] or lib\['sub/b.py:add_kernel'\]"):
        _ = lib.add_kernel
    with pytest.raises(KeyError, match="defined in 2 files"):
        lib["add_kernel"]
    assert "add_kernel" not in lib and "a.py:add_kernel" in lib
    with pytest.raises(KeyError, match="no kernel 'c.py:add_kernel'"):
        lib["c.py:add_kernel"]


# ---------------------------------------------------------------- selection

def test_fp32_tensors_pick_fp32_and_pack_parameters(lib, drv):
    x, y, out = f32(0x7000_0000), f32(0x7000_1000), f32(0x7000_2000)
    lib.add_kernel[(4,)](x, y, out, 4000)
    (call,) = drv.launches
    assert call["function"] == ("fn", "add_kernel", 1)
    assert call["grid"] == (4, 1, 1) and call["block_x"] == 128 and call["shared"] == 0
    assert call["stream"] == 0
    assert [struct.unpack("<Q", r)[0] for r in call["raw"][:3]] == [0x7000_0000, 0x7000_1000, 0x7000_2000]
    assert struct.unpack("<i", call["raw"][3][:4])[0] == 4000
    assert drv.loads == [(1, b"CUBIN:add_kernel_fp32", "add_kernel", 0)]


def test_fp16_and_num_warps_select(lib, drv):
    lib.add_kernel[(1,)](f16(), f16(), f16(), 10)
    lib.add_kernel[(1,)](f32(), f32(), f32(), 10, num_warps=8)
    assert [l[1] for l in drv.loads] == [b"CUBIN:add_kernel_fp16", b"CUBIN:add_kernel_fp32_w8"]
    assert [c["block_x"] for c in drv.launches] == [128, 256]


def test_constexpr_kwarg_must_match(lib, drv):
    lib.add_kernel[(1,)](f32(), f32(), f32(), 10, BLOCK_SIZE=1024)
    assert len(drv.launches) == 1
    with pytest.raises(rt.NoMatchingVariant) as exc:
        lib.add_kernel[(1,)](f32(), f32(), f32(), 10, BLOCK_SIZE=512)
    msg = str(exc.value)
    assert "BLOCK_SIZE=512 passed, variant has BLOCK_SIZE=1024" in msg
    assert all(v in msg for v in ("add_kernel_fp32", "add_kernel_fp32_w8", "add_kernel_fp16"))
    assert isinstance(exc.value, TypeError) and isinstance(exc.value, LookupError)
    assert len(drv.launches) == 1


def test_constexpr_may_be_positional(lib, drv):
    lib.axpy_kernel[(1,)](f16(), f16(), f16(), 2.0, 10, 2048)
    assert drv.loads[-1][1] == b"CUBIN:axpy_fp16"


def test_no_match_lists_every_variant_with_reasons(lib, drv):
    bf = FakeTensor(0x3000, "torch.bfloat16")
    with pytest.raises(rt.NoMatchingVariant) as exc:
        lib.add_kernel[(1,)](bf, bf, bf, 10)
    msg = str(exc.value)
    assert "no compiled variant of add_kernel accepts this call" in msg
    assert "x_ptr=bf16 pointer 0x3000" in msg
    assert msg.count("rejected: x_ptr: expects *fp32, got a bf16 tensor") == 2
    assert "rejected: x_ptr: expects *fp16, got a bf16 tensor" in msg
    assert "available variants (3)" in msg
    assert not drv.launches


def test_misaligned_pointer_rejected_by_divisibility(lib, drv):
    with pytest.raises(rt.NoMatchingVariant, match=r"y_ptr: expects \*fp32:16") as exc:
        lib.add_kernel[(1,)](f32(0x1000), f32(0x1004), f32(0x2000), 10)
    assert "not 16-byte aligned" in str(exc.value)


def test_divisible_scalar_variant_preferred_only_when_value_divides(tmp_path, drv):
    div = meta("k_div", "k", [{"name": "p", "kind": "pointer", "dtype": "fp32", "divisibility": 16},
                              {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 16}])
    any_ = meta("k_plain", "k", [{"name": "p", "kind": "pointer", "dtype": "fp32", "divisibility": 1},
                                 {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1}])
    lib = rt.load(str(write_lib(tmp_path, [div, any_])), driver=drv)
    lib.k[(1,)](f32(0x1000), 64)
    lib.k[(1,)](f32(0x1000), 65)
    lib.k[(1,)](f32(0x1004), 64)
    assert [l[1] for l in drv.loads] == [b"CUBIN:k_div", b"CUBIN:k_plain"]
    assert [c["function"] for c in drv.launches] == [("fn", "k", 1)] * 3
    assert len(lib.k._dispatch) == 3


def test_cuda_array_interface_objects(lib, drv):
    lib.add_kernel[(2,)](FakeCAI(0x4000), FakeCAI(0x4100), FakeCAI(0x4200), 5)
    lib.add_kernel[(2,)](FakeCAI(0x4000, "<f2"), FakeCAI(0x4100, "<f2"), FakeCAI(0x4200, "<f2"), 5)
    assert [l[1] for l in drv.loads] == [b"CUBIN:add_kernel_fp32", b"CUBIN:add_kernel_fp16"]
    with pytest.raises(rt.NoMatchingVariant, match="got a fp64 tensor"):
        lib.add_kernel[(2,)](FakeCAI(0x4000, "<f8"), FakeCAI(0x4000), FakeCAI(0x4000), 5)


def test_unsupported_argument_type(lib):
    with pytest.raises(TypeError, match="argument 'x_ptr': cannot pass a builtins.str"):
        lib.add_kernel[(1,)]("x", f32(), f32(), 3)


def test_int_out_of_i32_range_is_rejected(lib):
    with pytest.raises(rt.NoMatchingVariant, match="n_elements: expects i32, value out of range"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 2**31)


def test_float_scalar_and_int_promotion_for_fp32_param(lib, drv):
    lib.axpy_kernel[(1,)](f32(), f32(), f32(), 2.5, 7)
    lib.axpy_kernel[(1,)](f32(), f32(), f32(), 3, 7)  # an int where fp32 is wanted is converted
    a = [struct.unpack("<f", c["raw"][3][:4])[0] for c in drv.launches]
    assert a == [2.5, 3.0]
    with pytest.raises(rt.NoMatchingVariant, match="a: expects a scalar fp32, got a pointer"):
        lib.axpy_kernel[(1,)](f32(), f32(), f32(), f32(), 7)


def test_arch_mismatch_is_explained(lib_dir):
    lib = rt.load(str(lib_dir), driver=FakeDriver(capability=(8, 0)))
    with pytest.raises(rt.NoMatchingVariant, match=r"compiled for cuda:90 \(sm_90a\), device is compute capability 8.0"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3)
    lib = rt.load(str(lib_dir), driver=FakeDriver(capability=(10, 0)))
    with pytest.raises(rt.NoMatchingVariant, match="compute capability 10.0"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3)


def test_plain_arch_runs_on_newer_minor(tmp_path):
    doc = meta("k80", "add_kernel", add_params("fp32"), target="cuda:80", arch="sm_80")
    drv = FakeDriver(capability=(8, 6))
    lib = rt.load(str(write_lib(tmp_path, [doc])), driver=drv)
    lib.add_kernel[(1,)](f32(), f32(), f32(), 3)
    assert len(drv.launches) == 1


def test_variant_launcher_forces_one_variant(lib, drv):
    lib.variant("add_kernel_fp32_w8")[(1,)](f32(), f32(), f32(), 3)
    assert drv.launches[0]["block_x"] == 256
    with pytest.raises(KeyError, match="no variant 'zz'"):
        lib.variant("zz")
    with pytest.raises(rt.NoMatchingVariant, match="available variants \\(1\\)"):
        lib.variant("add_kernel_fp32_w8")[(1,)](f16(), f16(), f16(), 3)


def test_warp_specialized_kernel_launches_its_total_warps(tmp_path):
    """A warp-specialized variant (ttg.total-num-warps in its TTGIR) launches total_num_warps * 32
    threads: the kernel's num_warps, which a keyword num_warps is matched against, plus the
    producer partition's warps."""
    doc = meta("k_ws", "add_kernel", add_params("fp32"), num_warps=4, total_num_warps=5)
    drv = FakeDriver()
    lib = rt.load(str(write_lib(tmp_path, [doc])), driver=drv)
    lib.add_kernel[(1,)](f32(), f32(), f32(), 3, num_warps=4)
    assert drv.launches[0]["block_x"] == 160
    for bad, why in ((2, "total_num_warps 2 is below num_warps 4"), (40, "field 'total_num_warps' must be")):
        write_lib(tmp_path / str(bad), [meta("k_ws", "add_kernel", add_params("fp32"), total_num_warps=bad)])
        with pytest.raises(rt.MetadataError, match=why):
            rt.load(str(tmp_path / str(bad)), driver=FakeDriver()).add_kernel[(1,)](f32(), f32(), f32(), 3)


def test_select_reports_without_launching(lib, drv):
    assert lib.add_kernel.select(f16(), f16(), f16(), 3).variant == "add_kernel_fp16"
    assert not drv.launches and not drv.loads


# ---------------------------------------------------------------- binding, grids, streams

def test_arguments_by_name_and_binding_errors(lib, drv):
    lib.add_kernel[(1,)](f32(), f32(), output_ptr=f32(), n_elements=9)
    assert struct.unpack("<i", drv.launches[0]["raw"][3][:4])[0] == 9
    with pytest.raises(rt.LaunchError, match="missing argument\\(s\\) n_elements"):
        lib.add_kernel[(1,)](f32(), f32(), f32())
    with pytest.raises(rt.LaunchError, match="unknown argument\\(s\\) BLOCK"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3, BLOCK=4)
    with pytest.raises(rt.LaunchError, match="given twice"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3, n_elements=3)
    with pytest.raises(rt.LaunchError, match="takes 5 arguments"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3, 1024, 7)


def test_grid_callable_sees_args_constexprs_and_options(lib, drv):
    seen = {}

    def grid(m):
        seen.update(m)
        return (-(-m["n_elements"] // m["BLOCK_SIZE"]),)

    x = f32()
    lib.add_kernel[grid](x, f32(), f32(), 5000)
    assert drv.launches[0]["grid"] == (5, 1, 1)
    assert seen["x_ptr"] is x and seen["n_elements"] == 5000 and seen["BLOCK_SIZE"] == 1024
    assert seen["num_warps"] == 4
    lib.axpy_kernel[lambda m: (m["BLOCK_SIZE"] // 1024, 3)](f16(), f16(), f16(), 1.0, 3)
    assert drv.launches[1]["grid"] == (2, 3, 1)


@pytest.mark.parametrize("grid, expect", [((3,), (3, 1, 1)), ((3, 4), (3, 4, 1)),
                                          ((3, 4, 5), (3, 4, 5)), (7, (7, 1, 1)), ([2, 2], (2, 2, 1))])
def test_grid_forms(lib, drv, grid, expect):
    lib.add_kernel[grid](f32(), f32(), f32(), 3)
    assert drv.launches[0]["grid"] == expect


@pytest.mark.parametrize("grid, message", [((), "1 to 3"), ((1, 1, 1, 1), "1 to 3"),
                                           ((1.5,), "ints"), ((-1,), ">= 0"), ("abc", "ints"),
                                           (None, "tuple of 1-3 ints")])
def test_bad_grids(lib, grid, message):
    with pytest.raises(rt.LaunchError, match=message):
        lib.add_kernel[grid](f32(), f32(), f32(), 3)


def test_empty_grid_launches_nothing(lib, drv):
    lib.add_kernel[(0,)](f32(), f32(), f32(), 0)
    assert drv.launches == []


def test_stream_kwarg(lib, drv):
    class TorchStream:
        cuda_stream = 0xBEEF

    lib.add_kernel[(1,)](f32(), f32(), f32(), 3, stream=0x1234)
    lib.add_kernel[(1,)](f32(), f32(), f32(), 3, stream=TorchStream())
    assert [c["stream"] for c in drv.launches] == [0x1234, 0xBEEF]


def test_cubin_loads_lazily_once_per_context(lib, drv):
    assert drv.loads == []
    for _ in range(3):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3)
    assert len(drv.loads) == 1
    drv.ctx = 2  # another CUDA context (device) becomes current
    lib.add_kernel[(1,)](f32(), f32(), f32(), 3)
    assert [l[0] for l in drv.loads] == [1, 2]
    assert drv.launches[-1]["function"] == ("fn", "add_kernel", 2)


def test_large_shared_memory_passed_to_driver(tmp_path, drv):
    doc = meta("big", "add_kernel", add_params("fp32"), shared=100_000)
    lib = rt.load(str(write_lib(tmp_path, [doc])), driver=drv)
    lib.add_kernel[(1,)](f32(), f32(), f32(), 3)
    assert drv.loads[0][3] == 100_000 and drv.launches[0]["shared"] == 100_000


# ---------------------------------------------------------------- packing of scalar dtypes

def scalar_kernel(tmp_path, dtype, div=1):
    doc = meta(f"s_{dtype}", "s", [{"name": "v", "kind": "scalar", "dtype": dtype, "divisibility": div}])
    return rt.load(str(write_lib(tmp_path, [doc])), driver=FakeDriver())


@pytest.mark.parametrize("dtype, value, fmt", [
    ("i64", -(2**40), "<q"), ("u32", 2**32 - 1, "<I"), ("u64", 2**64 - 1, "<Q"), ("fp64", 0.1, "<d"),
    ("i16", -300, "<h"), ("u8", 255, "<B"), ("fp16", 1.5, "<e"), ("i1", True, "<b")])
def test_scalar_packing(tmp_path, dtype, value, fmt):
    lib = scalar_kernel(tmp_path, dtype)
    lib.s[(1,)](value)
    raw = lib.s._driver.launches[0]["raw"][0]
    assert struct.unpack(fmt, raw[:struct.calcsize(fmt)])[0] == value


def test_bf16_packing_rounds_to_nearest_even(tmp_path):
    lib = scalar_kernel(tmp_path, "bf16")
    for x in (1.0, -2.5, 3.140625, 1.00390625):  # the last is a tie: rounds to even (1.0)
        lib.s[(1,)](x)
    got = [struct.unpack("<H", c["raw"][0][:2])[0] for c in lib.s._driver.launches]
    assert got == [0x3F80, 0xC020, 0x4049, 0x3F80]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**65), max_value=2**65))
def test_int_scalar_accepted_iff_in_range_and_round_trips(tmp_path_factory, v):
    for dtype, lo, hi, fmt in (("i32", -(2**31), 2**31 - 1, "<i"), ("u32", 0, 2**32 - 1, "<I"),
                               ("i64", -(2**63), 2**63 - 1, "<q")):
        lib = scalar_kernel(tmp_path_factory.mktemp(dtype), dtype)
        if lo <= v <= hi:
            lib.s[(1,)](v)
            raw = lib.s._driver.launches[0]["raw"][0]
            assert struct.unpack(fmt, raw[:struct.calcsize(fmt)])[0] == v
        else:
            with pytest.raises(rt.NoMatchingVariant, match="out of range"):
                lib.s[(1,)](v)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_i32_div16_matches_iff_multiple_of_16(tmp_path_factory, v):
    lib = scalar_kernel(tmp_path_factory.mktemp("d"), "i32", div=16)
    if v % 16 == 0:
        lib.s[(1,)](v)
    else:
        with pytest.raises(rt.NoMatchingVariant, match="multiple of 16"):
            lib.s[(1,)](v)


# ---------------------------------------------------------------- dtype names and CUDA errors

@pytest.mark.parametrize("text, name", [("torch.float32", "fp32"), ("torch.bfloat16", "bf16"),
                                        ("float16", "fp16"), ("torch.int64", "i64"),
                                        ("torch.bool", "i1"), ("torch.float8_e4m3fn", "fp8e4nv"),
                                        ("torch.complex64", None)])
def test_dtype_names(text, name):
    assert dtype_name(Dtype(text)) == name


@pytest.mark.parametrize("ts, name", [("<f4", "fp32"), ("<f2", "fp16"), ("|u1", "u8"), ("|b1", "i1"),
                                      ("<i8", "i64"), (">f4", None), ("<c8", None)])
def test_typestr_names(ts, name):
    assert typestr_name(ts) == name


def test_numpy_scalars_are_scalars(lib, drv):
    np = pytest.importorskip("numpy")
    lib.axpy_kernel[(1,)](f32(), f32(), f32(), np.float32(0.5), np.int32(12))
    raw = drv.launches[0]["raw"]
    assert struct.unpack("<f", raw[3][:4])[0] == 0.5 and struct.unpack("<i", raw[4][:4])[0] == 12


def test_cuda_error_names_the_result():
    pytest.importorskip("cuda.bindings.driver")
    from cuda.bindings import driver as cu

    d = CudaDriver()
    assert d.check("cuX", (cu.CUresult.CUDA_SUCCESS, 7)) == 7
    with pytest.raises(CudaError, match="cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU") as e:
        d.check("cuModuleLoadData", (cu.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU, None), "loading x")
    assert e.value.result == "CUDA_ERROR_NO_BINARY_FOR_GPU" and "loading x" in str(e.value)


def test_no_cuda_driver_gives_cuda_error(lib_dir):
    pytest.importorskip("cuda.bindings.driver")
    if ctypes.util.find_library("cuda"):
        pytest.skip("a CUDA driver is installed here")
    lib = rt.load(str(lib_dir), driver=CudaDriver())
    with pytest.raises(CudaError, match="CUDA driver library not available"):
        lib.add_kernel[(1,)](f32(), f32(), f32(), 3)


def test_torch_tensors_use_torchs_device_and_current_stream(lib, monkeypatch):
    import types

    calls = []
    fake_torch = types.ModuleType("torch")
    fake_torch._C = types.SimpleNamespace(
        _cuda_getDevice=lambda: 3,
        _cuda_getCurrentRawStream=lambda dev: calls.append(dev) or 0x5000 + dev)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    Tensor = type("Tensor", (FakeTensor,), {"__module__": "torch"})

    class HintDriver(FakeDriver):
        def context(self, device_hint):
            self.hints = getattr(self, "hints", []) + [device_hint]
            return super().context(device_hint)

    drv = HintDriver()
    lib = rt.load(lib.lib_dir, driver=drv)
    t = Tensor(0x1000, "torch.float16")
    lib.add_kernel[(1,)](t, t, t, 8)
    lib.add_kernel[(1,)](t, t, t, 8, stream=0x77)  # an explicit stream wins
    lib.add_kernel[(1,)](f16(), f16(), f16(), 8)  # no torch tensor: legacy default stream
    assert [c["stream"] for c in drv.launches] == [0x5003, 0x77, 0]
    assert drv.hints == [3, 3, None] and calls == [3]
    assert drv.loads[0][1] == b"CUBIN:add_kernel_fp16"


def test_a_thread_without_a_current_context_gets_the_devices_primary_context():
    """Autograd's backward thread has no current CUDA context until something makes one current:
    its first launch on a device (with torch's device as the hint) makes the primary context
    current there, even after another thread found the context (CUDA_ERROR_INVALID_CONTEXT on
    a Liger layer-norm backward otherwise). Driver calls are faked: no GPU is needed."""
    import threading

    d = CudaDriver()
    current: dict = {}  # thread id -> the context current there
    made: list = []

    class Cu:
        CUdevice_attribute = d.cu.CUdevice_attribute
        CUresult = d.cu.CUresult

        def cuInit(self, flags):
            return (d._success,)

        def cuDeviceGet(self, n):
            return (d._success, n)

        def cuDevicePrimaryCtxRetain(self, dev):
            return (d._success, 0x7000 + dev)

        def cuCtxSetCurrent(self, ctx):
            current[threading.get_ident()] = ctx
            made.append(threading.get_ident())
            return (d._success,)

        def cuCtxGetDevice(self):
            return (d._success, current[threading.get_ident()] - 0x7000)

        def cuDeviceGetAttribute(self, attr, dev):
            return (d._success, 9 if attr == self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR else 0)

    d.cu = Cu()
    d._get_current = lambda: (d._success, current.get(threading.get_ident(), 0))
    current[threading.get_ident()] = 0x7001  # the main thread: torch made device 1's context current
    assert d.context(1) == (0x7001, (9, 0)) and made == []
    seen = []
    worker = threading.Thread(target=lambda: seen.append(d.context(1)))
    worker.start()
    worker.join()
    assert seen == [(0x7001, (9, 0))] and made == [worker.ident]  # made current in the worker itself
