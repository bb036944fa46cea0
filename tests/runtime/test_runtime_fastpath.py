"""The fast launch paths against the generic one: same variant, same parameter bytes, same checks, on fake torch tensors and a recording driver.

Every test runs twice: on the generated Python path (ttbuild.runtime.fastpath) and on the C path
(claunch.c, through ttbuild.runtime.cext) with a recording C-callable cuLaunchKernel.
"""

from __future__ import annotations

import struct
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from runtime_fakes import FakeTorch, RecordingDriver, add_params, attach, c_tensor_base, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime import cext, fastpath
from ttbuild.runtime.interop import InteropError

LIBRARY = [
    meta("add_fp32", "add_kernel", add_params("fp32")),
    meta("add_fp32_any", "add_kernel", add_params("fp32", div=1)),
    meta("add_fp16", "add_kernel", add_params("fp16")),
    meta("axpy_fp32", "axpy_kernel",
         [{"name": n, "kind": "pointer", "dtype": "fp32", "divisibility": 16} for n in ("x", "y", "o")]
         + [{"name": "a", "kind": "scalar", "dtype": "bf16", "divisibility": 1},
            {"name": "n", "kind": "scalar", "dtype": "i64", "divisibility": 16},
            {"name": "BLOCK", "kind": "constexpr", "value": 256}]),
    meta("axpy_fp32_i32", "axpy_kernel",
         [{"name": n, "kind": "pointer", "dtype": "fp32", "divisibility": 16} for n in ("x", "y", "o")]
         + [{"name": "a", "kind": "scalar", "dtype": "fp32", "divisibility": 1},
            {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1},
            {"name": "BLOCK", "kind": "constexpr", "value": 256}]),
]


@pytest.fixture(params=["py_tensor", "c_tensor"])
def torch(request, monkeypatch):
    """A fake torch whose Tensor is a Python class or, as torch's, a Python subclass of a C type
    (the C launch path reads those through the C type's functions: both routes are tested)."""
    c = request.param == "c_tensor"
    if c and c_tensor_base() is None:
        pytest.skip(f"no C compiler here: {cext.status()}")
    return FakeTorch(monkeypatch, c_tensor=c)


@pytest.fixture
def lib_dir(tmp_path):
    return write_lib(tmp_path, LIBRARY)


@pytest.fixture(params=["python", "c"])
def load(request):
    """`load(lib_dir) -> (library, driver)` on the parametrized fast path."""
    c = request.param == "c"
    if c and cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")

    def loader(lib_dir, **kw):
        drv = RecordingDriver(c=c, **kw)
        return attach(rt.load(str(lib_dir), driver=drv), drv), drv

    return loader


def test_torch_tensors_take_the_generated_path_after_the_first_launch(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    t = [torch.Tensor(0x1000 * (i + 1)) for i in range(3)]
    for _ in range(3):
        lib.add_kernel[(2,)](*t, 77)
    assert [c["path"] for c in drv.launches] == ["launch", drv.fast, drv.fast]
    assert all(c["stream"] == 0x5000 and c["grid"] == (2, 1, 1) for c in drv.launches)
    assert all(c["raw"] == drv.launches[0]["raw"] for c in drv.launches)
    assert struct.unpack("<QQQi", b"".join(r[:8] for r in drv.launches[0]["raw"][:3])
                         + drv.launches[0]["raw"][3][:4]) == (0x1000, 0x2000, 0x3000, 77)
    assert len(drv.loads) == 1


def test_dtype_alignment_and_int_class_change_the_variant(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    T = torch.Tensor
    lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000), 5)
    lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000), 5)  # generated path, same variant
    lib.add_kernel[(1,)](T(0x1004), T(0x2000), T(0x3000), 5)  # misaligned: the :1 variant
    lib.add_kernel[(1,)](T(0x1000, "float16"), T(0x2000, "float16"), T(0x3000, "float16"), 5)
    assert len(drv.launches) == 4 and set(drv.contexts) == {0}  # torch's current device
    assert [l[1] for l in drv.loads] == [b"CUBIN:add_fp32", b"CUBIN:add_fp32_any", b"CUBIN:add_fp16"]
    with pytest.raises(rt.NoMatchingVariant, match="value out of range"):
        lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000), 2**31)
    with pytest.raises(rt.NoMatchingVariant, match="got a float64 tensor|got a None tensor|fp64"):
        lib.add_kernel[(1,)](T(0x1000, "float64"), T(0x2000), T(0x3000), 5)


def test_alternating_keys_each_launch_their_own_variant(tmp_path, torch, load):
    """The C path's one-entry cache in front of the key dict must never serve the previous
    launch's variant: alternate dtype, alignment and int class on one grid (the variants differ
    in num_warps, so each launch's block size names the variant it ran)."""
    write_lib(tmp_path, [meta("add_fp32", "add_kernel", add_params("fp32"), num_warps=1),
                         meta("add_fp32_any", "add_kernel", add_params("fp32", div=1), num_warps=2),
                         meta("add_fp16", "add_kernel", add_params("fp16"), num_warps=8)])
    lib, drv = load(tmp_path)
    T = torch.Tensor
    half = [T(0x1000 * k, "float16") for k in (1, 2, 3)]
    calls = [((T(0x1000), T(0x2000), T(0x3000), 5), 32),
             ((T(0x1004), T(0x2000), T(0x3000), 6), 64),
             ((*half, 7), 256),
             ((T(0x1000), T(0x2000), T(0x3000), -8), 32),
             ((T(0x1000), T(0x2000), T(0x3008), 9), 64)]
    fn = lib.add_kernel[(3,)]
    order = [0, 1, 0, 2, 2, 3, 0, 1, 1, 4, 2, 0, 3, 4] * 3
    for i in order:
        fn(*calls[i][0])
    assert [c["block_x"] for c in drv.launches] == [calls[i][1] for i in order]
    got = [struct.unpack("<QQi", c["raw"][0] + c["raw"][2] + c["raw"][3][:4]) for c in drv.launches]
    assert got == [(calls[i][0][0].ptr, calls[i][0][2].ptr, calls[i][0][3]) for i in order]
    assert {c["path"] for c in drv.launches[3:]} == {drv.fast}


def test_int_and_float_scalars_pick_and_pack_like_the_generic_path(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    T = torch.Tensor
    x, y, o = T(0x1000), T(0x2000), T(0x3000)
    lib.axpy_kernel[(1,)](x, y, o, 2.5, 7)        # i32 fits, 7 % 16 != 0: the i32 variant
    lib.axpy_kernel[(1,)](x, y, o, 2.5, 32)       # i64:16 exactly? no: i32 is exact for small ints
    lib.axpy_kernel[(1,)](x, y, o, 1.00390625, 2**33)  # only i64:16 holds it; bf16 rounds to even
    names = [drv.loads[i][1] for i in range(len(drv.loads))]
    assert names == [b"CUBIN:axpy_fp32_i32", b"CUBIN:axpy_fp32"]
    assert struct.unpack("<f", drv.launches[0]["raw"][3][:4])[0] == 2.5
    assert struct.unpack("<H", drv.launches[2]["raw"][3][:2])[0] == 0x3F80
    assert struct.unpack("<q", drv.launches[2]["raw"][4])[0] == 2**33
    with pytest.raises(rt.NoMatchingVariant, match="multiple of 16"):
        lib.axpy_kernel[(1,)](x, y, o, 1.0, 2**33 + 1)


def test_generated_and_generic_paths_agree(lib_dir, torch, load):
    """Property: for any dtypes, alignments and scalars the generated path launches the
    variant and bytes that the generic path (the same call by keyword) launches."""
    lib, drv = load(lib_dir)
    T = torch.Tensor

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.sampled_from(["float32", "float16"]), min_size=3, max_size=3),
           st.lists(st.sampled_from([0, 4, 8, 16]), min_size=3, max_size=3),
           st.one_of(st.integers(-(2**64), 2**64), st.floats(allow_nan=False, width=32)))
    def check(dtypes, offsets, n):
        args = [T(0x10000 * (i + 1) + off, dt) for i, (dt, off) in enumerate(zip(dtypes, offsets))]
        outcomes = []
        for call in (lambda: lib.add_kernel[(1,)](*args, n),
                     lambda: lib.add_kernel[(1,)](*args, n_elements=n)):
            before = len(drv.launches)
            try:
                call()
                got = drv.launches[before]
                outcomes.append((got["function"], got["raw"]))
            except (rt.NoMatchingVariant, TypeError) as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1]

    check()


def test_float_parameters_pack_the_same_bytes_on_both_paths(lib_dir, torch, load):
    """Property: an int or a float for axpy's float `alpha` (fp32 or bf16 by variant) packs the
    same parameter bytes on the generated path (struct packs Python numbers into fp32 itself;
    only bf16 converts) as on the generic path (which converts every float parameter)."""
    lib, drv = load(lib_dir)
    T = torch.Tensor
    x, y, o = T(0x1000), T(0x2000), T(0x3000)

    @settings(max_examples=150, deadline=None)
    @given(st.one_of(st.integers(-(2**60), 2**60), st.floats(allow_nan=False, allow_infinity=False, width=32)),
           st.sampled_from([7, 2**33]))
    def check(alpha, n):
        outcomes = []
        for call in (lambda: lib.axpy_kernel[(1,)](x, y, o, alpha, n),
                     lambda: lib.axpy_kernel[(1,)](x, y, o, a=alpha, n=n)):
            before = len(drv.launches)
            try:
                call()
                got = drv.launches[before]
                outcomes.append((got["function"], got["raw"]))
            except (rt.NoMatchingVariant, TypeError, OverflowError) as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1]

    check()


def test_callable_grid_on_the_generated_path(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    T = torch.Tensor
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (-(-meta["n_elements"] // meta["BLOCK_SIZE"]), 2)

    for _ in range(2):
        lib.add_kernel[grid](T(0x1000), T(0x2000), T(0x3000), 3000)
    lib.add_kernel[lambda m: (0,)](T(0x1000), T(0x2000), T(0x3000), 3000)  # empty: no launch
    assert [c["grid"] for c in drv.launches] == [(3, 2, 1)] * 2
    assert [c["path"] for c in drv.launches] == ["launch", "cu_launch"]
    assert seen[1]["num_warps"] == 4 and seen[1]["x_ptr"].ptr == 0x1000


def test_explicit_stream_and_a_failed_launch(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    T = torch.Tensor
    args = (T(0x1000), T(0x2000), T(0x3000), 3)
    lib.add_kernel[(1,)](*args)

    class Stream:
        cuda_stream = 0xABC

    lib.add_kernel[(1,)](*args, stream=0x77)
    lib.add_kernel[(1,)](*args, stream=Stream())
    assert [c["stream"] for c in drv.launches] == [0x5000, 0x77, 0xABC]
    drv.result = 700
    with pytest.raises(rt.CudaError, match="cuLaunchKernel failed: CUDA_ERROR_700"):
        lib.add_kernel[(1,)](*args)
    drv.result = 0
    lib.add_kernel[(1,)](*args)  # the parameter buffer went back to the pool either way


def test_binding_errors_on_the_generated_path(lib_dir, torch, load):
    lib, _ = load(lib_dir)
    T = torch.Tensor
    with pytest.raises(rt.LaunchError, match="missing argument\\(s\\) n_elements"):
        lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000))
    with pytest.raises(rt.LaunchError, match="takes 5 arguments"):
        lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000), 3, 1024, 7)
    with pytest.raises(rt.NoMatchingVariant, match="BLOCK_SIZE=7 passed"):
        lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000), 3, BLOCK_SIZE=7)


def test_tensors_on_another_device_launch_there(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    T = torch.Tensor
    lib.add_kernel[(1,)](T(0x1000, device=1), T(0x2000, device=1), T(0x3000, device=1), 3)
    assert drv.launches[0]["stream"] == 0x5001 and drv.contexts[-1] == 1
    assert torch.device == 0  # the device guard put the current device back
    lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000), 3)
    assert drv.launches[1]["stream"] == 0x5000 and drv.contexts[-1] == 0


def test_tensors_on_different_devices_or_in_host_memory_are_refused(lib_dir, torch, load):
    lib, drv = load(lib_dir)
    T = torch.Tensor
    with pytest.raises(InteropError, match="different devices: 'x_ptr' on cuda:0, 'output_ptr' on cuda:2"):
        lib.add_kernel[(1,)](T(0x1000), T(0x2000), T(0x3000, device=2), 3)
    with pytest.raises(InteropError, match="'y_ptr': tensor is in host memory"):
        lib.add_kernel[(1,)](T(0x1000), T(0x2000, device=-1), T(0x3000), 3)
    assert drv.launches == []


def test_parameter_buffers_are_not_shared_between_threads(lib_dir, torch, load):
    """Every launch reads back exactly its own arguments while 4 threads launch at once."""
    lib, drv = load(lib_dir)
    T = torch.Tensor
    errors = []

    def worker(k):
        x = T(0x100000 * (k + 1))
        for i in range(300):
            lib.add_kernel[(1,)](x, x, x, k * 1000 + i)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for c in drv.launches:
        ptr = struct.unpack("<Q", c["raw"][0])[0]
        n = struct.unpack("<i", c["raw"][3][:4])[0]
        if ptr != 0x100000 * (n // 1000 + 1):
            errors.append((hex(ptr), n))
    assert len(drv.launches) == 1200 and not errors


def test_generated_source_is_straight_line_per_kernel():
    text = fastpath.source(("ptr", "ptr", "int", "float", "any"), raw_launch=True)
    assert "type(_ttb_a2) is int" in text and "type(_ttb_a3) is float" in text
    hot = text.split("dev = getdev()")[1].split("return None")[0]
    assert "tok(_ttb_a4, 4)" in hot and " for " not in hot and "while" not in hot
    compile(fastpath.source(("ptr",), raw_launch=False), "<t>", "exec")


SCALARS = [("a8", "i8"), ("b16", "u16"), ("c32", "u32"), ("d64", "u64"), ("h", "fp16"), ("z", "bf16"),
           ("f", "fp32"), ("flag", "i1")]


def test_c_and_python_paths_pack_every_scalar_dtype_alike(tmp_path, torch):
    """Property: for any Python int or float per parameter, the C path (claunch.c's packing of
    i8/u16/u32/u64/fp16/bf16/fp32/i1) launches the same bytes, or refuses with the same error,
    as the generated Python path (struct)."""
    if cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    params = ([{"name": "x", "kind": "pointer", "dtype": "fp32", "divisibility": 16}]
              + [{"name": n, "kind": "scalar", "dtype": dt, "divisibility": 1} for n, dt in SCALARS])
    write_lib(tmp_path, [meta("mixed", "mixed_kernel", params)])
    libs = []
    for c in (False, True):
        drv = RecordingDriver(c=c)
        libs.append((attach(rt.load(str(tmp_path), driver=drv), drv), drv))
    x = torch.Tensor(0x1000)
    for lib, _ in libs:  # first launches take the generic path on both
        lib.mixed_kernel[(1,)](x, 1, 2, 3, 4, 0.5, 0.5, 0.5, True)
    ranges = {"i8": (-128, 127), "u16": (0, 2**16 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1),
              "i1": (0, 1)}

    def fits(dt):  # values each parameter takes: ranges' edges, float rounding and overflow edges
        if dt in ranges:
            lo, hi = ranges[dt]
            return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi]))
        return st.one_of(st.floats(-7e4, 7e4), st.floats(width=16), st.integers(-(2**17), 2**17),
                         st.sampled_from([65504.0, 65519.99, -65520.0, 3.4e38, float("inf"), float("nan")]))

    anything = st.one_of(st.integers(-(2**65), 2**65), st.floats(width=64), st.booleans())
    in_range = st.tuples(*[fits(dt) for _, dt in SCALARS])
    mixed = st.tuples(*[st.one_of(fits(dt), anything) for _, dt in SCALARS])

    @settings(max_examples=400, deadline=None)
    @given(st.one_of(in_range, mixed))
    def check(values):
        outcomes = []
        for lib, drv in libs:
            before = len(drv.launches)
            try:
                lib.mixed_kernel[(1,)](x, *values)
                got = drv.launches[before]
                outcomes.append(got["raw"])
            except (rt.NoMatchingVariant, TypeError, OverflowError, ValueError) as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1]

    check()
    c_launches = [c for c in libs[1][1].launches if c["path"] == "c"]
    assert len(c_launches) >= 20  # the C path packed a share of the examples (most launch)


def test_c_launcher_compiles_once_and_reports_what_failed(tmp_path, monkeypatch):
    if cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    module = cext.compile_module(tmp_path)
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and built[0].name.startswith("ttbuild_claunch-")
    stamp = built[0].stat().st_mtime_ns
    assert cext.compile_module(tmp_path).noop_launch_address() == module.noop_launch_address()
    assert built[0].stat().st_mtime_ns == stamp  # the cached build, not a second compile
    monkeypatch.setenv("CC", "false")
    with pytest.raises(cext.CLauncherError, match=r"compiling the C launcher failed \(false -O2 .*claunch.c"):
        cext.compile_module(tmp_path / "other")
    assert not list((tmp_path / "other").iterdir())  # no half-written module left behind


def test_c_launcher_can_be_turned_off(lib_dir, torch, monkeypatch):
    monkeypatch.setenv("TTBUILD_C_LAUNCHER", "0")
    assert cext.load() is None and "TTBUILD_C_LAUNCHER=0" in cext.status()
    drv = RecordingDriver(c=True)
    lib = attach(rt.load(str(lib_dir), driver=drv), drv)
    for _ in range(2):
        lib.add_kernel[(1,)](*[torch.Tensor(0x1000 * (i + 1)) for i in range(3)], 5)
    assert [c["path"] for c in drv.launches] == ["launch", "cu_launch"]


def test_launch_pdl_goes_through_the_drivers_launch_pdl(lib_dir, torch, load):
    """launch_pdl=True (Triton's launch option for programmatic dependent launch) takes the
    generic path to the driver's launch_pdl (cuLaunchKernelEx with the attribute), with the
    same parameter bytes; a driver without it refuses with a LaunchError."""
    lib, drv = load(lib_dir)
    T = torch.Tensor
    args = (T(0x1000), T(0x2000), T(0x3000), 9)
    with pytest.raises(rt.LaunchError, match="launch_pdl=True needs a driver that launches with cuLaunchKernelEx"):
        lib.add_kernel[(2,)](*args, launch_pdl=True)
    drv.launch_pdl = lambda fn, grid, bx, sh, stream, addr, values: drv._record(
        fn, grid, bx, sh, stream, addr, len(values), "pdl")
    lib.add_kernel[(2,)](*args, launch_pdl=True)
    lib.add_kernel[(2,)](*args)
    assert [c["path"] for c in drv.launches] == ["pdl", drv.fast]
    assert drv.launches[0]["raw"] == drv.launches[1]["raw"] and drv.launches[0]["grid"] == (2, 1, 1)


def test_c_path_reads_c_typed_tensors_through_their_c_functions(lib_dir, monkeypatch):
    """claunch.c calls a tensor type's own C get_device/data_ptr/dtype (torch.Tensor's shape:
    fake_ctensor.c) directly, and reads by name what is not such a function: a Python-class
    tensor, or a method replaced on the class after launches (looked up again per launch: the
    replacement's answer picks the variant, here a misaligned address)."""
    if cext.load() is None or c_tensor_base() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    module = cext.load()
    assert module.direct_reads(FakeTorch(monkeypatch).Tensor) == (False, False, False)
    T = FakeTorch(monkeypatch, c_tensor=True).Tensor  # installed last: the torch module now
    assert module.direct_reads(T) == (True, True, True)
    drv = RecordingDriver(c=True)
    lib = attach(rt.load(str(lib_dir), driver=drv), drv)
    t = [T(0x1000 * (i + 1)) for i in range(3)]
    fn = lib.add_kernel[(1,)]
    for _ in range(2):
        fn(*t, 5)
    monkeypatch.setattr(T, "data_ptr", lambda self: self.ptr + 4, raising=False)
    assert module.direct_reads(T) == (True, False, True)
    fn(*t, 5)
    assert [c["path"] for c in drv.launches] == ["launch", "c", "c"]
    assert [l[1] for l in drv.loads] == [b"CUBIN:add_fp32", b"CUBIN:add_fp32_any"]
    assert struct.unpack("<Q", drv.launches[2]["raw"][0])[0] == 0x1004
    with pytest.raises(rt.NoMatchingVariant, match="got a float64 tensor|fp64"):
        fn(T(0x1000, "float64"), T(0x2000, "float64"), T(0x3000, "float64"), 5)


def test_kernel_grid_lookup_answers_as_runtime_call(lib_dir, torch, load):
    """kernel[grid] answers a grid bound before in its own frame: the same callable as
    runtime_call(grid) for tuple and int grids; other grids still bind as before."""
    lib, _ = load(lib_dir)
    k = lib.add_kernel
    for grid in ((2,), 3, (2, 2)):
        first = k[grid]
        assert k[grid] is first is k.runtime_call(grid)
    k[lambda meta: (1,)](*[torch.Tensor(0x1000 * (i + 1)) for i in range(3)], 5)


def test_parameters_take_a_fast_path_as_tensors_do(lib_dir, torch, load):
    """nn.Parameter (a layer's weights: a Tensor subclass keeping data_ptr, dtype, get_device)
    launches on a fast path after the first call, not on the generic one, with the same bytes."""
    import types

    class Parameter(torch.Tensor):
        pass

    sys.modules["torch"].nn = types.SimpleNamespace(Parameter=Parameter)
    lib, drv = load(lib_dir)
    t = [torch.Tensor(0x1000), Parameter(0x2000), torch.Tensor(0x3000)]
    for _ in range(3):
        lib.add_kernel[(2,)](*t, 77)
    paths = [c["path"] for c in drv.launches]
    assert paths[0] == "launch" and "launch" not in paths[1:]
    assert all(c["raw"] == drv.launches[0]["raw"] for c in drv.launches)


@pytest.mark.parametrize("kinds", ["TTP", "PPP"])
def test_a_parameter_read_last_still_enables_the_fast_path(lib_dir, torch, load, kinds):
    """The generic path enables the generated one from the type of the tensors it read, which
    is the last tensor's: a layer's weight passed last (a norm's bias, every argument a
    Parameter) must enable it as torch.Tensor would, not leave every launch on the generic path."""
    import types

    class Parameter(torch.Tensor):
        pass

    Parameter.__module__ = "torch.nn.parameter"  # as torch's
    sys.modules["torch"].nn = types.SimpleNamespace(Parameter=Parameter)
    lib, drv = load(lib_dir)
    t = [(torch.Tensor if k == "T" else Parameter)(0x1000 * (i + 1)) for i, k in enumerate(kinds)]
    for _ in range(3):
        lib.add_kernel[(2,)](*t, 77)
    paths = [c["path"] for c in drv.launches]
    assert paths[0] == "launch" and "launch" not in paths[1:], paths
