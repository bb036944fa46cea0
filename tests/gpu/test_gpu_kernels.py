"""Every built variant against torch on a real GPU: poisoned outputs, fresh random inputs, sizes off the block, tuple and callable grids."""

from __future__ import annotations

import pytest

import ttbuild.runtime as rt

pytestmark = pytest.mark.gpu

SIZES = [1, 1000, 2**20 + 3, 2**24]
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# Relative tolerances: fp32 add is exact; axpy may fuse a*x+y into one FMA (one rounding) where
# torch rounds twice; fp16 outputs carry 2**-11 relative rounding.
RTOL = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 1.6e-2}
ATOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.6e-2}


def _cdiv(a, b):
    return -(-a // b)


def _reference(torch, kernel, args, out_dtype):
    """Triton semantics in float64: pointers' values, scalars as given, cast to out's dtype."""
    if kernel == "add_kernel":
        x, y = args[0], args[1]
        return (x.double() + y.double()).to(out_dtype)
    if kernel == "axpy_kernel":
        x, y, a = args[0], args[1], args[3]
        # a (fp32 scalar) * x promotes x to fp32, as Triton does; fp32 FMA is exact enough in fp64
        return (a * x.double() + y.double()).to(out_dtype)
    pytest.skip(f"no torch reference for {kernel} in this test yet")


def _make_args(torch, variant, n, gen):
    dt = getattr(torch, TORCH_DTYPES[variant.launch_params[0].dtype])
    args, out = [], None
    for p in variant.launch_params:
        if p.kind == "pointer":
            if p.name.startswith("out"):
                out = torch.full((n,), float("nan"), device="cuda", dtype=dt)  # poison
                args.append(out)
            else:
                args.append(torch.randn(n, device="cuda", dtype=torch.float32, generator=gen).to(dt))
        elif p.name.startswith("n"):
            args.append(n)
        elif p.dtype.startswith("fp"):
            args.append(float(torch.randn(1, device="cuda", generator=gen).item() * 3))
        else:
            pytest.skip(f"no argument recipe for scalar {p.name}:{p.dtype}")
    return args, out


def _check(torch, lib, variant, args, out):
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), f"{variant.variant}: some outputs were never written"
    ref = _reference(torch, variant.kernel, args, out.dtype)
    rtol = RTOL[variant.launch_params[0].dtype]
    atol = ATOL[variant.launch_params[0].dtype]
    torch.testing.assert_close(out.double(), ref.double(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", SIZES)
def test_variant_matches_torch_tuple_grid(torch, lib, variant_name, n):
    launcher = lib.variant(variant_name)
    variant = launcher.variants[0]
    gen = torch.Generator(device="cuda").manual_seed(n * 7 + 1)
    args, out = _make_args(torch, variant, n, gen)
    block = variant.constexprs["BLOCK_SIZE"]
    launcher[(_cdiv(n, block),)](*args)
    _check(torch, lib, variant, args, out)


@pytest.mark.parametrize("n", [1000, 2**20 + 3])
def test_variant_matches_torch_callable_grid(torch, lib, variant_name, n):
    launcher = lib.variant(variant_name)
    variant = launcher.variants[0]
    gen = torch.Generator(device="cuda").manual_seed(n * 13 + 5)
    args, out = _make_args(torch, variant, n, gen)
    launcher[lambda meta: (_cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)](*args)
    _check(torch, lib, variant, args, out)


def test_kernel_dispatch_picks_each_variant_by_dtype_and_num_warps(torch, lib, variant_name):
    """The kernel-level launcher (no variant named) reaches this variant from the arguments."""
    variant = lib.variant(variant_name).variants[0]
    launcher = getattr(lib, variant.kernel)
    gen = torch.Generator(device="cuda").manual_seed(3)
    n = 5000
    args, out = _make_args(torch, variant, n, gen)
    picked = launcher.select(*args, num_warps=variant.num_warps, **variant.constexprs)
    assert picked.variant == variant.variant or (picked.signature, picked.num_warps, picked.constexprs) == \
        (variant.signature, variant.num_warps, variant.constexprs)
    launcher[lambda m: (_cdiv(n, m["BLOCK_SIZE"]),)](*args, num_warps=variant.num_warps,
                                                     **variant.constexprs)
    _check(torch, lib, variant, args, out)


def test_runs_on_torch_current_stream(torch, lib):
    if "add_kernel" not in lib:
        pytest.skip("no add_kernel built")
    n = 2**22
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        lib.add_kernel[lambda m: (_cdiv(n, m["BLOCK_SIZE"]),)](x, y, out, n)
        done = torch.cuda.Event()
        done.record(s)
    done.synchronize()  # only our stream was waited for: the launch must have been on it
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_cuda_array_interface_argument(torch, lib):
    if "add_kernel" not in lib:
        pytest.skip("no add_kernel built")

    class Dev:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    n = 4099
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    lib.add_kernel[(_cdiv(n, 1024),)](Dev(x), Dev(y), Dev(out), n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_misaligned_view_is_rejected_before_launch(torch, lib):
    if "add_kernel" not in lib:
        pytest.skip("no add_kernel built")
    x = torch.randn(1025, device="cuda")
    with pytest.raises(rt.NoMatchingVariant, match="16"):
        lib.add_kernel[(1,)](x[1:], x[1:], x[1:], 1024)


def test_ctypes_driver_launches_the_same(torch, lib):
    if "add_kernel" not in lib:
        pytest.skip("no add_kernel built")
    fast = rt.load(lib.lib_dir, driver=rt.CtypesCudaDriver())
    n = 3 * 2**20 + 5
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    fast.add_kernel[lambda m: (_cdiv(n, m["BLOCK_SIZE"]),)](x, y, out, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_bad_cubin_raises_cuda_error_with_result_name(torch, lib, tmp_path):
    import hashlib
    import json
    import shutil

    src = next(v for v in lib.variants)
    doc = json.loads(open(src.json_path).read())
    (tmp_path / "lib").mkdir()
    junk = b"\x7fELF not really a cubin" * 8
    (tmp_path / "lib" / doc["cubin"]).write_bytes(junk)
    # metadata that describes these bytes, so the driver (not the runtime's hash check) judges them
    doc["cubin_sha256"] = hashlib.sha256(junk).hexdigest()
    (tmp_path / "lib" / f"{doc['variant']}.json").write_text(json.dumps(doc))
    bad = rt.load(str(tmp_path))
    launcher = bad.variant(doc["variant"])
    v = launcher.variants[0]
    args, _ = _make_args(torch, v, 16, torch.Generator(device="cuda").manual_seed(0))
    with pytest.raises(rt.CudaError, match=r"cuModuleLoadData failed: CUDA_ERROR_\w+") as e:
        launcher[(1,)](*args)
    assert e.value.result.startswith("CUDA_ERROR_")
    shutil.rmtree(tmp_path / "lib")
