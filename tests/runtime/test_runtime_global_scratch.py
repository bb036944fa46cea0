"""Global scratch (metadata "global_scratch", ttbuild.runtime.scratch): a kernel that takes it gets the u64 address of its launch stream's buffer after its parameters on every launch path, from one buffer per (context, stream) that grows through the driver's mem_alloc; kernels without it launch as before. CPU only: a recording driver with a fake allocator."""

from __future__ import annotations

import struct
import sys
import threading
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runtime_fakes import FakeTorch, RecordingDriver, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.frontend import abi
from ttbuild.graph.meta import MetaError, build_metadata
from ttbuild.runtime import cext, fastpath, scratch
from ttbuild.runtime.driver import CudaDriver, CudaError
from ttbuild.runtime.metadata import parse_variant
from ttbuild.runtime.scratch import GlobalScratch, GlobalScratchError

SIZE = 256  # bytes per program (two device-built tensormaps)


def params(dt="fp32"):
    return [{"name": "x", "kind": "pointer", "dtype": dt, "divisibility": 16},
            {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1},
            {"name": "BLOCK", "kind": "constexpr", "value": 64}]


def scratch_doc(variant="k_fp32", dt="fp32", size=SIZE, align=128, **kw):
    return meta(variant, "k", params(dt), global_scratch={"size": size, "align": align}, **kw)


class ScratchDriver(RecordingDriver):
    """RecordingDriver plus the scratch seam: allocations from a counter (256-byte aligned, or
    `offset` past that), frees and synchronizes recorded, `capturing` streams."""

    def __init__(self, offset=0, **kw):
        super().__init__(**kw)
        self.allocs, self.frees, self.syncs, self.pdl = [], [], [], []
        self.capturing: set = set()
        self.offset = offset
        self._next = 0x7E00_0000_0000

    def mem_alloc(self, ctx, nbytes):
        addr = self._next + self.offset
        self._next += (nbytes + 0x10000) // 0x1000 * 0x1000
        self.allocs.append((ctx, addr, nbytes))
        return addr

    def mem_free(self, ctx, address):
        self.frees.append((ctx, address))

    def ctx_synchronize(self, ctx):
        self.syncs.append((ctx, len(self.frees)))

    def stream_is_capturing(self, stream):
        return stream in self.capturing

    def load_function(self, image, entry, shared):
        self.loads.append((self.ctx, image, entry, shared))
        return ("fn", entry, self.ctx, image)

    def n_params(self, fn):
        return self.params_by_image[fn[3]]

    def launch_pdl(self, function, grid, block_x, shared, stream, params_address, values):
        self.pdl.append(values)
        self._record(function, grid, block_x, shared, stream, params_address, len(values), "pdl")


def setup(tmp_path, docs, path="c", **kw):
    """(library, driver) with `docs` on the launch path `path`: "c" (claunch.c), "python"
    (generated, cu_launch) or "generic" (the caller passes arguments by name)."""
    c = path == "c"
    if c and cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    write_lib(tmp_path, docs)
    drv = ScratchDriver(c=c, **kw)
    lib = rt.load(str(tmp_path), driver=drv)
    drv.params_by_image = {b"CUBIN:" + v.variant.encode(): len(v.launch_params) + (v.global_scratch is not None)
                           for v in lib.variants}
    return lib, drv


def u64(raw):
    return struct.unpack("<Q", raw)[0]


def launch(lib, grid, x, n, path, **kw):
    if path == "generic":
        lib.k[grid](x=x, n=n, **kw)
    else:
        lib.k[grid](x, n, **kw)


@pytest.fixture
def torch(monkeypatch):
    return FakeTorch(monkeypatch)


PATHS = ["generic", "python", "c"]


# ---------------------------------------------------------------- metadata


def _ttgir(extra=""):
    attrs = '"ttg.num-warps" = 4 : i32, ttg.shared = 0 : i32' + extra
    return f"module attributes {{{attrs}}} {{\n  tt.func public @k() {{\n    tt.return\n  }}\n}}\n".encode()


def _build(ttgir):
    variant = {"name": "k_v", "kernel": "k", "file": "k.py", "constexprs": {"BLOCK": 64}, "signature": "*fp32:16,i32",
               "num_warps": 4, "num_ctas": 1, "num_stages": 3, "target": "cuda:90", "arch": "sm_90a"}
    # the ttir stage's ABI record of k(x, n, BLOCK: tl.constexpr)
    params = [abi.entry("x", "pointer", "fp32", 16), abi.entry("n", "scalar", "i32"), abi.constexpr_param("BLOCK", 64, True)]
    blobs = {s: b"out" for s in ("parse", "ttir", "llir", "ptx", "cubin")}
    blobs.update(abi=abi.record(params, []), ttgir=ttgir)
    return build_metadata(variant, blobs, "k_v.cubin")


def test_the_metadata_records_global_scratch_only_where_the_ttgir_has_it(tmp_path):
    plain = _build(_ttgir())
    assert "global_scratch" not in plain
    with_zero = _build(_ttgir(", ttg.global_scratch_memory_size = 0 : i32"))
    assert "global_scratch" not in with_zero
    doc = _build(_ttgir(", ttg.global_scratch_memory_size = 384 : i32, ttg.global_scratch_memory_alignment = 128 : i32"))
    assert doc["global_scratch"] == {"size": 384, "align": 128}
    # no user parameter: the document is the plain one plus the record (and the TTGIR's hash)
    assert doc["params"] == plain["params"] and [p["name"] for p in doc["params"]] == ["x", "n", "BLOCK"]
    assert {k: v for k, v in doc.items() if k not in ("global_scratch", "hashes")} == \
        {k: v for k, v in plain.items() if k != "hashes"}
    assert _build(_ttgir(", ttg.global_scratch_memory_size = 128 : i32"))["global_scratch"] == {"size": 128, "align": 1}
    (tmp_path / "k_v.cubin").write_bytes(b"out")
    v = parse_variant(doc, str(tmp_path / "k_v.json"))
    assert v.global_scratch == (384, 128) and [p.name for p in v.launch_params] == ["x", "n"]
    assert parse_variant(plain, str(tmp_path / "k_v.json")).global_scratch is None


@pytest.mark.parametrize("extra, why", [
    (", ttg.global_scratch_memory_size = 128 : i32, ttg.global_scratch_memory_alignment = 96 : i32", "power of two"),
    (", ttg.global_scratch_memory_size = 128 : i32, ttg.global_scratch_memory_alignment = 0 : i32", "power of two"),
    (", ttg.global_scratch_memory_size = -128 : i32", "non-negative"),
])
def test_a_bad_scratch_attribute_is_a_build_error(extra, why):
    with pytest.raises(MetaError, match=why):
        _build(_ttgir(extra))


@pytest.mark.parametrize("record", [
    {"size": 0, "align": 128}, {"size": -256, "align": 128}, {"size": 256, "align": 0},
    {"size": 256, "align": 96}, {"size": 256}, {"size": "256", "align": 128}, {"size": True, "align": 128},
    {"size": 256, "align": 128.0}, [256, 128], 256,
])
def test_invalid_global_scratch_metadata_is_refused_at_load(tmp_path, record):
    doc = meta("k_bad", "k", params(), global_scratch=record)
    write_lib(tmp_path, [doc])
    with pytest.raises(rt.MetadataError, match=r"k_bad\.json: 'global_scratch' must be .*power of two"):
        rt.load(str(tmp_path), driver=ScratchDriver())


# ---------------------------------------------------------------- the launch paths


@pytest.mark.parametrize("path", PATHS)
def test_the_launch_packs_the_stream_buffer_after_the_parameters(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [scratch_doc()], path)
    x = torch.Tensor(0x1000)
    for _ in range(4):
        launch(lib, (3, 1, 2), x, 77, path)
    assert len(drv.launches) == 4 and len(drv.allocs) == 1
    if path != "generic":
        assert [c["path"] for c in drv.launches][1:] == [drv.fast] * 3
    ctx, addr, nbytes = drv.allocs[0]
    buf = scratch.global_scratch(drv).buffers[(ctx, 0x5000)]
    assert buf.address == addr and buf.capacity == nbytes >= SIZE * 6 and addr % 128 == 0
    for c in drv.launches:
        raw = c["raw"]
        assert len(raw) == 3 and u64(raw[0]) == 0x1000 and struct.unpack("<i", raw[1][:4])[0] == 77
        assert u64(raw[2]) == addr and c["stream"] == 0x5000 and c["grid"] == (3, 1, 2)


@pytest.mark.parametrize("path", PATHS)
def test_one_buffer_per_stream_and_growth_on_a_bigger_grid(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [scratch_doc()], path)
    x = torch.Tensor(0x1000)
    gs = scratch.global_scratch(drv)

    def addr():
        return u64(drv.launches[-1]["raw"][2])

    launch(lib, (4,), x, 1, path)
    a = addr()
    launch(lib, (4,), x, 1, path, stream=0x77)
    b = addr()
    launch(lib, (4,), x, 1, path)
    launch(lib, (2,), x, 1, path)  # a smaller grid: the same buffer
    assert a != b and addr() == a and len(drv.allocs) == 2
    launch(lib, (4,), x, 1, path, stream=0x77)
    assert addr() == b
    ctx = drv.allocs[0][0]
    assert set(gs.buffers) == {(ctx, 0x5000), (ctx, 0x77)}
    first_capacity = gs.buffers[(ctx, 0x5000)].capacity
    big = first_capacity // SIZE + 1  # more programs than the buffer holds
    launch(lib, (big,), x, 1, path)
    grown = addr()
    new = gs.buffers[(ctx, 0x5000)]
    assert grown not in (a, b) and new.address == grown and new.capacity >= max(SIZE * big, 2 * first_capacity)
    assert len(drv.allocs) == 3 and drv.frees == []  # the old buffer is retired, not freed
    assert [r.address for r in gs.retired] == [a]
    # every later launch on that stream moves to the new buffer, whatever its grid
    for grid in ((4,), (2,), (big,)):
        launch(lib, grid, x, 1, path)
        assert addr() == grown
    launch(lib, (4,), x, 1, path, stream=0x77)
    assert addr() == b and len(drv.allocs) == 3


@pytest.mark.parametrize("path", PATHS)
def test_a_callable_grid_sizes_the_buffer_by_the_grid_it_returns(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [scratch_doc()], path)
    x = torch.Tensor(0x1000)
    for n in (10, 10, 100):
        launch(lib, lambda m: (m["n"], 2), x, n, path)
        assert drv.launches[-1]["grid"] == (n, 2, 1)
    gs = scratch.global_scratch(drv)
    (buf,) = gs.buffers.values()
    assert buf.capacity >= SIZE * 200 and u64(drv.launches[-1]["raw"][2]) == buf.address
    assert u64(drv.launches[0]["raw"][2]) == u64(drv.launches[1]["raw"][2])


def test_the_c_path_calls_no_python_for_a_repeated_launch(tmp_path, torch, monkeypatch):
    lib, drv = setup(tmp_path, [scratch_doc()], "c")
    calls = []
    original = GlobalScratch.address

    def counted(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GlobalScratch, "address", counted)
    x = torch.Tensor(0x1000)
    launch = lib.k[(8,)]
    for _ in range(6):
        launch(x, 5)
    assert [c["path"] for c in drv.launches] == ["launch"] + ["c"] * 5
    assert len(calls) == 2  # the generic first launch and the C path's first
    launch(x, 5, stream=0x99)  # another stream: asked once, then cached again
    launch(x, 5, stream=0x99)
    assert len(calls) == 3
    old = u64(drv.launches[0]["raw"][2])
    lib.k[(100,)](x, 5)  # another grid grows the buffer of 0x5000 (one call): the epoch moves
    launch(x, 5)  # so this grid asks once more, and moves to the new buffer
    launch(x, 5)
    assert len(calls) == 5 and u64(drv.launches[-1]["raw"][2]) == u64(drv.launches[-3]["raw"][2]) != old
    assert [c["path"] for c in drv.launches[-3:]] == ["c"] * 3


def test_the_c_and_python_paths_pack_the_same_bytes(tmp_path, torch):
    if cext.load() is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    docs = [scratch_doc(), scratch_doc("k_fp16", "fp16", size=512, align=1024)]
    outcomes = []
    for path in ("c", "python"):
        lib, drv = setup(tmp_path / path, docs, path)
        x, h = torch.Tensor(0x1000), torch.Tensor(0x2000, "float16")
        for grid, t, stream in [((4,), x, None), ((4,), x, None), ((4,), h, None), ((4,), x, 0x77), ((64, 2), x, None),
                                ((4,), x, None), ((4,), h, 0x77), ((2, 2, 2), h, None), ((4,), x, 0x77)]:
            lib.k[grid](t, 3, stream=stream)
        outcomes.append(([c["raw"] for c in drv.launches], drv.allocs))
        if path == "c":
            assert sum(c["path"] == "c" for c in drv.launches) >= 6
    assert outcomes[0] == outcomes[1]
    raws = outcomes[0][0]
    assert all(len(r) == 3 for r in raws) and len({u64(r[2]) for r in raws}) >= 3
    assert all(u64(raws[i][2]) % 1024 == 0 for i in (2, 6, 7))  # the fp16 variant's alignment


@pytest.mark.parametrize("path", PATHS)
def test_a_kernel_without_global_scratch_launches_as_before(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [meta("k_plain", "k", params())], path)
    x = torch.Tensor(0x1000)
    for _ in range(3):
        launch(lib, (4,), x, 9, path)
    assert all(len(c["raw"]) == 2 for c in drv.launches) and drv.allocs == []
    assert scratch.global_scratch(drv).buffers == {}
    assert not lib.k._has_scratch
    if path != "generic":
        # its hits are the 9-tuples of before, its C launch data "<QIII" + codes
        (hit,) = lib.k._ns["D"].values()
        assert len(hit) == 9
        assert hit[8] is None if path == "python" else len(hit[8]) == 20 + 2
    # the generated source with scratch=False is what a kernel without it gets
    assert "scr" not in fastpath.source(("ptr", "int"), True, ("x", "n"))


@pytest.mark.parametrize("path", PATHS)
def test_a_kernel_mixing_variants_with_and_without_scratch(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [scratch_doc(), meta("k_fp16", "k", params("fp16"))], path)
    x, h = torch.Tensor(0x1000), torch.Tensor(0x2000, "float16")
    for t in (x, h, x, h):
        launch(lib, (4,), t, 1, path)
    assert [len(c["raw"]) for c in drv.launches] == [3, 2, 3, 2]
    assert len(drv.allocs) == 1 and u64(drv.launches[0]["raw"][2]) == u64(drv.launches[2]["raw"][2])


@pytest.mark.parametrize("path", PATHS)
def test_growing_during_graph_capture_is_refused_and_a_fitting_buffer_is_used(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [scratch_doc()], path)
    x = torch.Tensor(0x1000)
    launch(lib, (4,), x, 1, path)
    launch(lib, (4,), x, 1, path)
    addr = u64(drv.launches[-1]["raw"][2])
    drv.capturing.add(0x5000)
    launch(lib, (4,), x, 1, path)  # fits: captured with the stream's buffer
    assert u64(drv.launches[-1]["raw"][2]) == addr
    before = len(drv.launches)
    with pytest.raises(GlobalScratchError, match=r"stream 0x5000.*captured into a CUDA graph.*before capturing"):
        launch(lib, (10_000,), x, 1, path)
    drv.capturing.add(0x88)
    with pytest.raises(GlobalScratchError, match="captured into a CUDA graph"):
        launch(lib, (4,), x, 1, path, stream=0x88)  # a capturing stream without a buffer
    assert len(drv.launches) == before and len(drv.allocs) == 1  # nothing launched, nothing allocated
    drv.capturing.clear()
    launch(lib, (10_000,), x, 1, path)
    assert len(drv.allocs) == 2 and scratch.global_scratch(drv).buffers[(drv.allocs[0][0], 0x5000)].capacity >= SIZE * 10_000


def test_reserve_before_capture_makes_the_captured_launch_fit(tmp_path, torch):
    lib, drv = setup(tmp_path, [scratch_doc()], "python")
    x = torch.Tensor(0x1000)
    addr = scratch.reserve(SIZE * 1000, stream=0x66, device=0, driver=drv)
    drv.capturing.add(0x66)
    lib.k[(1000,)](x, 1, stream=0x66)
    assert u64(drv.launches[-1]["raw"][2]) == addr and len(drv.allocs) == 1


def test_an_allocation_failing_for_a_capture_elsewhere_says_so(tmp_path, torch):
    lib, drv = setup(tmp_path, [scratch_doc()], "python")

    def refuse(ctx, nbytes):
        raise CudaError("cuMemAlloc", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    drv.mem_alloc = refuse
    with pytest.raises(GlobalScratchError, match="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: a CUDA graph capture"):
        lib.k[(4,)](torch.Tensor(0x1000), 1)


def test_a_larger_alignment_than_the_allocation_gives_is_padded(tmp_path, torch):
    lib, drv = setup(tmp_path, [scratch_doc(align=4096)], "python", offset=0x100)
    lib.k[(4,)](torch.Tensor(0x1000), 1)
    (ctx, first, n1), (_, base, n2) = drv.allocs
    addr = u64(drv.launches[-1]["raw"][2])
    assert first % 4096 and drv.frees == [(ctx, first)]  # the misaligned one given back at once
    assert n2 == n1 + 4095 and addr % 4096 == 0 and base <= addr < base + 4096 and addr + SIZE * 4 <= base + n2


def test_the_minimum_alignment_is_128(tmp_path, torch):
    lib, drv = setup(tmp_path, [scratch_doc(align=1)], "python", offset=0x40)
    lib.k[(4,)](torch.Tensor(0x1000), 1)
    assert u64(drv.launches[-1]["raw"][2]) % 128 == 0 and len(drv.allocs) == 2


@pytest.mark.parametrize("path", ["python", "c"])
def test_release_synchronizes_then_frees_everything_and_launches_allocate_anew(tmp_path, torch, path):
    lib, drv = setup(tmp_path, [scratch_doc()], path)
    x = torch.Tensor(0x1000)
    launch(lib, (4,), x, 1, path)
    launch(lib, (4,), x, 1, path, stream=0x77)
    launch(lib, (10_000,), x, 1, path)  # retires the first buffer
    gs = scratch.global_scratch(drv)
    held = sorted(a for _, a, _ in drv.allocs)
    epoch = gs.epoch
    scratch.release(drv)
    assert gs.epoch > epoch and gs.buffers == {} and gs.retired == []
    assert sorted(a for _, a in drv.frees) == held and drv.syncs == [(drv.allocs[0][0], 0)]  # synced before any free
    launch(lib, (4,), x, 1, path)
    launch(lib, (4,), x, 1, path)
    assert len(drv.allocs) == 4 and u64(drv.launches[-1]["raw"][2]) == drv.allocs[-1][1]


def test_each_device_and_each_threads_per_thread_stream_has_its_own_buffer(tmp_path, torch):
    lib, drv = setup(tmp_path, [scratch_doc()], "python")
    lib.k[(4,)](torch.Tensor(0x1000, device=0), 1)
    lib.k[(4,)](torch.Tensor(0x1000, device=1), 1)
    assert len(drv.allocs) == 2 and drv.allocs[0][0] != drv.allocs[1][0]
    seen = []

    def run():
        lib.k[(4,)](torch.Tensor(0x1000), 1, stream=2)
        seen.append(u64(drv.launches[-1]["raw"][2]))

    for _ in range(2):
        t = threading.Thread(target=run)
        t.start()
        t.join()
    assert len(set(seen)) == 2 and len(drv.allocs) == 4


def test_launch_pdl_passes_the_address_too(tmp_path, torch):
    lib, drv = setup(tmp_path, [scratch_doc()], "python")
    lib.k[(4,)](torch.Tensor(0x1000), 1, launch_pdl=True)
    (values,) = drv.pdl
    assert values == (0x1000, 1, drv.allocs[0][1]) and u64(drv.launches[-1]["raw"][2]) == drv.allocs[0][1]


def test_a_driver_without_the_allocation_seam_says_so(tmp_path, torch):
    write_lib(tmp_path, [scratch_doc()])
    drv = RecordingDriver()
    drv.params_of = {"k": 3}
    lib = rt.load(str(tmp_path), driver=drv)
    with pytest.raises(GlobalScratchError, match="needs global scratch memory and RecordingDriver cannot allocate"):
        lib.k[(4,)](FakeTorchTensor(), 1)
    assert drv.launches == []


class FakeTorchTensor:
    """A data_ptr() object that is not torch's: the generic path takes it."""

    dtype = "float32"

    def data_ptr(self):
        return 0x1000


# ---------------------------------------------------------------- the CUDA seam


def test_the_cuda_seam_calls_the_driver_api_in_the_right_context():
    """CudaDriver's mem_alloc / mem_free / ctx_synchronize / stream_is_capturing over a
    stand-in cuda.bindings module (no GPU): the context is pushed only when it is not current."""
    calls = []
    current = [0xC1]

    class Enum(int):
        pass

    def rec(name, *out):
        def call(*args):
            calls.append((name, args))
            return (0, *out)
        return call

    capture = types.SimpleNamespace(CU_STREAM_CAPTURE_STATUS_NONE=0, CU_STREAM_CAPTURE_STATUS_ACTIVE=1)
    statuses = {0x10: (0, 0), 0x11: (0, 1), 0: (906, 0)}
    cu = types.SimpleNamespace(
        cuMemAlloc=rec("alloc", 0xD000), cuMemFree=rec("free"), cuCtxSynchronize=rec("sync"),
        cuCtxPushCurrent=rec("push"), cuCtxPopCurrent=rec("pop", 0xC2), CUcontext=lambda c: ("ctx", c),
        cuStreamIsCapturing=lambda s: statuses[s], CUstreamCaptureStatus=capture,
        CUresult=types.SimpleNamespace(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT=906, CUDA_SUCCESS=0),
        cuGetErrorString=lambda e: (1, None))
    drv = object.__new__(CudaDriver)
    drv.cu, drv._success = cu, 0
    drv._get_current = lambda: (0, current[0])
    assert drv.mem_alloc(0xC1, 4096) == 0xD000 and calls == [("alloc", (4096,))]
    drv.mem_free(0xC2, 0xD000)
    assert calls[1:] == [("push", (("ctx", 0xC2),)), ("free", (0xD000,)), ("pop", ())]
    drv.ctx_synchronize(0xC1)
    assert calls[-1] == ("sync", ())
    assert [drv.stream_is_capturing(s) for s in (0x10, 0x11, 0)] == [False, True, True]
    statuses[0x12] = (1, 0)
    with pytest.raises(CudaError, match="cuStreamIsCapturing"):
        drv.stream_is_capturing(0x12)


def test_global_scratch_is_one_per_driver():
    d1, d2 = ScratchDriver(), ScratchDriver()
    assert scratch.global_scratch(d1) is scratch.global_scratch(d1) is not scratch.global_scratch(d2)
    gs = GlobalScratch(d1)
    a = gs.address("ctx", 5, 1000)
    assert gs.address("ctx", 5, 4096) == a and gs.allocs == 1 and gs.held() == 4096
    b = gs.address("ctx", 5, 4097)
    assert b != a and gs.buffers[("ctx", 5)].capacity == 8192 and gs.held() == 4096 + 8192
