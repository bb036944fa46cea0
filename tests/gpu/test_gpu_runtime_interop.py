"""GPU: the runtime with other frameworks' tensors and torch's machinery: DLPack, CAI v3 streams, explicit streams, devices, CUDA graph capture and replay, torch.compile through a custom op."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

N = 5000  # not a multiple of the block


def grid(meta):
    return ((meta["n_elements"] + meta["BLOCK_SIZE"] - 1) // meta["BLOCK_SIZE"],)


class DLPackOnly:
    """Exposes a torch tensor through DLPack alone (no data_ptr, no CAI)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


class CAIOnly:
    """A torch tensor's __cuda_array_interface__ with the producer stream given explicitly."""

    def __init__(self, t, stream):
        cai = dict(t.__cuda_array_interface__)
        cai["stream"] = stream
        self.__cuda_array_interface__ = cai


def inputs(torch):
    x = torch.rand(N, device="cuda")
    y = torch.rand(N, device="cuda")
    return x, y, torch.full_like(x, float("nan"))


def test_fast_path_result_and_repeat(lib, torch):
    x, y, out = inputs(torch)
    for _ in range(3):
        lib.add_kernel[grid](x, y, out, N)
        lib.add_kernel[(5,)](x, y, out, N)
    torch.testing.assert_close(out, x + y)


def test_c_launch_path_is_taken_and_agrees_with_the_python_path(lib, torch):
    """On a GPU machine with a C compiler the default launch is claunch.c's; the generated Python
    path (a driver without the C seam) writes the same result; a failed C launch raises the
    driver's error (a grid x of 2**31 is past cuLaunchKernel's limit)."""
    import ttbuild.runtime as rt
    from ttbuild.runtime import cext

    x, y, out = inputs(torch)
    fn = lib.add_kernel[(5,)]
    fn(x, y, out, N)
    fn(x, y, out, N)
    assert cext.status().startswith("c ("), cext.status()
    assert type(fn).__name__ == "FastLaunch"
    torch.testing.assert_close(out, x + y)

    class PythonPathDriver(rt.CudaDriver):
        c_launch_address = None

    with pytest.raises(rt.CudaError, match="cuLaunchKernel"):
        lib.add_kernel[(2**31,)](x, y, out, N)

    py = rt.load(lib.lib_dir, driver=PythonPathDriver()).add_kernel[(5,)]
    out2 = torch.full_like(out, float("nan"))
    py(x, y, out2, N)
    py(x, y, out2, N)
    assert type(py).__name__ == "function"
    torch.testing.assert_close(out2, out, rtol=0, atol=0)


def test_c_launch_path_reads_torch_tensors_directly_and_keeps_its_checks(lib, torch):
    """claunch.c reads torch.Tensor through torch._C.TensorBase's C functions (get_device,
    data_ptr, dtype); after launches that hit its one-entry cache, a wrong dtype, a misaligned
    view and a host tensor on the same bound grid still raise the errors they raise anywhere."""
    import ttbuild.runtime as rt
    from ttbuild.runtime import cext

    module = cext.load()
    if module is None:
        pytest.skip(cext.status())
    assert module.direct_reads(torch.Tensor) == (True, True, True)
    x, y, out = inputs(torch)
    fn = lib.add_kernel[(5,)]
    for _ in range(3):
        fn(x, y, out, N)
    torch.testing.assert_close(out, x + y)
    with pytest.raises(rt.NoMatchingVariant, match="got a float64 tensor|fp64"):
        fn(x.double(), y.double(), out.double(), N)
    with pytest.raises(rt.NoMatchingVariant, match="16"):
        fn(x[1:], y[1:], out[1:], N - 1)
    with pytest.raises(rt.InteropError, match="host memory"):
        fn(x, y.cpu(), out, N)
    out.fill_(float("nan"))
    fn(x, y, out, N)
    torch.testing.assert_close(out, x + y)


def test_dlpack_arguments(lib, torch):
    x, y, out = inputs(torch)
    lib.add_kernel[grid](DLPackOnly(x), DLPackOnly(y), DLPackOnly(out), N)
    torch.testing.assert_close(out, x + y)


def test_cai_producer_stream_is_waited_on(lib, torch):
    """x is written on a producer stream behind a long sleep; the launch on another stream must
    wait for it (CAI v3), else it reads the old values."""
    x, y, out = inputs(torch)
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)
        x.fill_(3.0)
    lib.add_kernel[grid](CAIOnly(x, producer.cuda_stream), CAIOnly(y, None), CAIOnly(out, None), N,
                         stream=consumer)
    consumer.synchronize()
    torch.testing.assert_close(out, 3.0 + y)


def test_explicit_stream_and_torch_current_stream(lib, torch):
    x, y, out = inputs(torch)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    lib.add_kernel[grid](x, y, out, N, stream=side)
    side.synchronize()
    torch.testing.assert_close(out, x + y)
    out2 = torch.empty_like(out)
    with torch.cuda.stream(side):
        lib.add_kernel[grid](x, y, out2, N)  # torch's current stream is the side stream here
    side.synchronize()
    torch.testing.assert_close(out2, x + y)


def test_host_tensor_is_refused(lib, torch):
    import ttbuild.runtime as rt

    x, y, out = inputs(torch)
    with pytest.raises(rt.InteropError, match="host memory"):
        lib.add_kernel[grid](x, y.cpu(), out, N)


def test_tensors_on_two_devices(lib, torch):
    import ttbuild.runtime as rt

    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x, y, out = (t.to("cuda:1") for t in inputs(torch))
    lib.add_kernel[grid](x, y, out, N)  # current device is 0: launches on device 1
    torch.testing.assert_close(out, x + y)
    with pytest.raises(rt.InteropError, match="different devices"):
        lib.add_kernel[grid](x, y.to("cuda:0"), out, N)


def test_cuda_graph_capture_and_replay(lib, torch):
    x, y, out = inputs(torch)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside capture: module load, variant selection
        lib.add_kernel[grid](x, y, out, N)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        lib.add_kernel[grid](x, y, out, N)
        lib.add_kernel[grid](out, y, out, N)  # out = x + 2y
    for _ in range(3):
        x.copy_(torch.rand_like(x))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + 2 * y)


def test_torch_compile_without_graph_break(lib, torch):
    import ttbuild.runtime as rt

    op = rt.torch_op(lib.add_kernel, "ttbuild_test::add", grid, mutates_args=("output_ptr",))

    def f(x, y):
        out = torch.empty_like(x)
        op(x, y, out, x.numel())
        return out * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")  # fullgraph: a break raises
    x, y, _ = inputs(torch)
    torch.testing.assert_close(compiled(x, y), (x + y) * 2)
    out = torch.empty_like(x)
    op(x, y, out, N)  # eager call of the op
    torch.testing.assert_close(out, x + y)
    with pytest.raises(rt.TorchOpError, match="not a pointer"):
        rt.torch_op(lib.add_kernel, "ttbuild_test::add2", grid, mutates_args=("n_elements",))
