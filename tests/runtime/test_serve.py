"""CPU tests of ttbuild.runtime.serve through the triton façade: call forms, the most specialised variant, `== 1` groups, miss messages and log, the device check, autotune tables."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest
from runtime_fakes import FakeTorch, RecordingDriver, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.record.store import read_records
from ttbuild.runtime import facade
from ttbuild.runtime.serve import DeviceNotCovered, ServeMiss, active, serve

KERNEL_SRC = '''
import triton
import triton.language as tl

SCALE = tl.constexpr(2)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr = 128):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs * stride, tl.load(x_ptr + offs * stride, mask=offs < n) * SCALE, mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8)], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def norm_kernel(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, w_ptr=None):
    pass


@triton.jit
def warps_kernel(x_ptr, n, BLOCK: tl.constexpr, num_warps: tl.constexpr):
    pass
'''


class VariantDriver(RecordingDriver):
    """Function handles name the variant whose image was loaded."""

    def load_function(self, image, entry, shared):
        super().load_function(image, entry, shared)
        return ("fn", entry, self.ctx, bytes(image).decode().split(":", 1)[1])


def _p(name, kind, dtype=None, div=1, value=None):
    if kind == "constexpr":
        return {"name": name, "kind": kind, "value": value}
    return {"name": name, "kind": kind, "dtype": dtype, "divisibility": div}


def _scale(variant, div, stride_one, block=128):
    stride = _p("stride", "constexpr", value=1) if stride_one else _p("stride", "scalar", "i32")
    params = [_p("x_ptr", "pointer", "fp32", div), _p("out_ptr", "pointer", "fp32", div), _p("n", "scalar", "i32", div),
              stride, _p("BLOCK", "constexpr", value=block)]
    return meta(variant, "scale_kernel", params, file="pkg/ops.py")


def _tuned(variant, block, warps):
    params = [_p("x_ptr", "pointer", "fp32", 16), _p("n", "scalar", "i32"), _p("BLOCK", "constexpr", value=block)]
    return meta(variant, "tuned_kernel", params, num_warps=warps, file="pkg/ops.py")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project root with pkg/ops.py written against `triton`, the façade enabled, cleaned up after."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(KERNEL_SRC)
    monkeypatch.syspath_prepend(str(root))
    torch = FakeTorch(monkeypatch)
    saved = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith(("triton.", "pkg"))}
    for k in saved:
        del sys.modules[k]
    yield root, torch
    for k in [k for k in sys.modules if k == "triton" or k.startswith(("triton.", "pkg"))]:
        del sys.modules[k]
    sys.modules.update(saved)
    if facade.PKG in sys.path:
        sys.path.remove(facade.PKG)


def _serve(tmp_path, docs, capability=(9, 0), **kw):
    write_lib(tmp_path / "art", docs)
    drv = VariantDriver(raw=False, capability=capability)
    lib = rt.load(str(tmp_path / "art"), driver=drv)
    drv.params_of = {"scale_kernel": 4, "tuned_kernel": 2}
    return serve(lib, facade=True, **kw), drv


ALL = [_scale("generic", 1, False), _scale("aligned", 16, False), _scale("aligned_one", 16, True)]


def test_facade_only_without_real_triton(project):
    assert not facade.real_triton_installed()
    assert facade.enable()
    triton = importlib.import_module("triton")
    assert triton.__ttbuild_facade__ and triton.cdiv(10, 4) == 3 and triton.next_power_of_2(33) == 64
    assert triton.language.float16.name == "fp16" and triton.language.constexpr(3) == 3
    from triton.language.extra.cuda.libdevice import rsqrt  # the forms projects import device math in
    from triton.language.extra.libdevice import tanh
    from triton.language.math import exp2

    for fn in (rsqrt, tanh, exp2):
        with pytest.raises(RuntimeError, match="only inside a kernel"):
            fn(1.0)


def test_facade_never_shadows_a_real_triton(tmp_path):
    fake = tmp_path / "site" / "triton"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    code = ("import sys; from ttbuild.runtime import facade; print(facade.enable()); import triton; "
            "print(getattr(triton, 'REAL', False))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": ":".join([str(tmp_path / "site")] + sys.path)})
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_call_sites_pick_the_most_specialised_variant(project, tmp_path):
    root, torch = project
    server, drv = _serve(tmp_path, ALL)
    ops = importlib.import_module("pkg.ops")
    x, out = torch.Tensor(0x1000), torch.Tensor(0x2000)
    ops.scale_kernel[(4,)](x, out, 512, 1)                       # everything Triton would specialise
    ops.scale_kernel[lambda meta: (meta["n"] // 128,)](x, out, 512, stride=2)  # grid callable, kwargs
    ops.scale_kernel.run(torch.Tensor(0x1004), out, 500, 3, grid=(1,), warmup=False)        # misaligned: the fallback
    assert [launch["function"][3] for launch in drv.launches] == ["aligned_one", "aligned", "generic"]
    assert drv.launches[1]["grid"] == (4, 1, 1)
    assert ops.scale_kernel.warmup(x, out, 512, 1, grid=(1,)).variant == "aligned_one"
    assert len(drv.launches) == 3  # warmup launches nothing
    ops.scale_kernel[(2,)](x, out, 512, 1, BLOCK=128)   # the cached path: same choices
    ops.scale_kernel[(2,)](torch.Tensor(0x1004), out, 512, 1, BLOCK=128)
    assert [launch["function"][3] for launch in drv.launches[3:]] == ["aligned_one", "generic"]
    ops.scale_kernel[(2,)](x, out, 512, 3, BLOCK=128, num_warps=4, maxnreg=None)  # as an Autotuner passes them
    assert drv.launches[-1]["function"][3] == "aligned"
    with pytest.raises(ServeMiss, match="num_warps=8"):
        ops.scale_kernel[(2,)](x, out, 512, 3, BLOCK=128, num_warps=8)  # no variant with 8 warps
    with pytest.raises(ServeMiss, match="BLOCK = 64"):
        ops.scale_kernel[(2,)](x, out, 512, 1, BLOCK=64)  # a constexpr value no variant has


def test_miss_error_names_the_row_and_logs_it(project, tmp_path):
    root, torch = project
    log = tmp_path / "miss.jsonl"
    server, drv = _serve(tmp_path, [_scale("aligned", 16, False)], miss_log=str(log))
    ops = importlib.import_module("pkg.ops")
    with pytest.raises(ServeMiss) as err:
        ops.scale_kernel[(1,)](torch.Tensor(0x1004), torch.Tensor(0x2000), 100, 2, BLOCK=128)
    text = str(err.value)
    assert "pkg.ops.scale_kernel" in text and "x_ptr: *fp32," in text and "out_ptr: *fp32:16" in text
    assert 'signature = "*fp32,*fp32:16,i32,i32"' in text and 'file = "pkg/ops.py"' in text
    assert not drv.launches
    (event,) = read_records(str(log))
    assert event["signature"]["x_ptr"] == "*fp32" and event["div16"] == ["out_ptr"]
    out = subprocess.run([sys.executable, "-m", "ttbuild", "record", "--root", str(root), "-o", str(tmp_path / "v.toml"),
                          "--from", str(log)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert 'signature = "*fp32,*fp32:16,i32,i32"' in (tmp_path / "v.toml").read_text()


def test_miss_warn_falls_back_once_per_key(project, tmp_path):
    """Every miss falls back and is counted; the warning and the miss log's line come once per
    specialization, so a call site that misses on every call does not grow the log; a repeated
    specialization goes to the fallback without trying the variants again."""
    root, torch = project
    log = tmp_path / "miss.jsonl"
    server, drv = _serve(tmp_path, [_scale("aligned", 16, False)], miss="warn", miss_log=str(log))
    ops = importlib.import_module("pkg.ops")
    calls, tried = [], []
    sk = server.served(ops.scale_kernel.fn)
    for _, launcher in sk.groups:
        launcher.run = (lambda run: lambda *a, **k: tried.append(1) or run(*a, **k))(launcher.run)
    args = (torch.Tensor(0x1004), torch.Tensor(0x2000), 100, 2)
    with pytest.warns(UserWarning, match="falling back to Triton's JIT") as record:
        for _ in range(3):
            sk.launch(args, {}, (1,), False, fallback=lambda jit, *a, **k: calls.append(a), jit_self=None)
    assert len(calls) == 3 and len(record) == 1 and len(tried) == len(sk.groups)  # tried on the first call only
    assert server.misses == 3 and len(read_records(str(log))) == 1
    sk.launch((torch.Tensor(0x1004), torch.Tensor(0x2000), 100, 16), {}, (1,), False,
              fallback=lambda jit, *a, **k: calls.append(a), jit_self=None)  # another key: a second line
    assert server.misses == 4 and len(read_records(str(log))) == 2


def test_device_not_covered_before_the_first_launch(project, tmp_path):
    root, torch = project
    server, drv = _serve(tmp_path, ALL, capability=(8, 0))
    ops = importlib.import_module("pkg.ops")
    with pytest.raises(DeviceNotCovered, match="cuda:90.*compute capability 8.0"):
        ops.scale_kernel[(1,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 1)
    assert not drv.launches and not drv.loads


def test_autotuner_takes_the_recorded_config(project, tmp_path):
    root, torch = project
    docs = [_tuned("t64", 64, 4), _tuned("t128", 128, 8)]
    server, drv = _serve(tmp_path, docs)
    table = {"schema": "ttbuild.tuning/1", "kernel": "tuned_kernel", "key": ["n"],
             "configs": {"0": {"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3, "num_ctas": 1},
                         "1": {"kwargs": {"BLOCK": 128}, "num_warps": 8, "num_stages": 3, "num_ctas": 1}},
             "entries": [{"key": [4096, "fp32"], "config": 1, "times_ms": {"0": 0.2, "1": 0.1}}]}
    (tmp_path / "art" / "tuning").mkdir()
    (tmp_path / "art" / "tuning" / "tuned_kernel.json").write_text(json.dumps(table))
    ops = importlib.import_module("pkg.ops")
    from ttbuild.runtime.servetune import patch_autotuner

    patch_autotuner(type(ops.tuned_kernel), rt.serve.__globals__["active"])
    ops.tuned_kernel[(1,)](torch.Tensor(0x1000), 4096)
    ops.tuned_kernel[(1,)](torch.Tensor(0x1000), 3000)   # nearest recorded key
    assert [launch["function"][3] for launch in drv.launches] == ["t128", "t128"]


def test_facade_import_in_a_runtime_only_process(tmp_path):
    """A project module that imports triton loads with no Triton installed, after serve()."""
    (tmp_path / "mod.py").write_text(KERNEL_SRC)
    (tmp_path / "art" / "lib").mkdir(parents=True)
    code = textwrap.dedent("""
        import ttbuild.runtime as rt
        rt.serve(rt.load("art"), facade=True)
        import mod
        print(type(mod.scale_kernel).__name__, type(mod.tuned_kernel).__name__)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": ":".join([str(tmp_path)] + sys.path)})
    assert out.stdout.split() == ["JITFunction", "Autotuner"], out.stderr


def test_serve_command_serves_the_processes_it_starts(tmp_path):
    """`ttbuild serve ART --miss warn --facade -- CMD`: the child is served through the startup hook."""
    (tmp_path / "mod.py").write_text(KERNEL_SRC)
    (tmp_path / "art" / "lib").mkdir(parents=True)
    code = ("from ttbuild.runtime.serve import active; import mod, triton; "
            "print(active().policy, active().library.lib_dir.endswith('lib'), triton.__ttbuild_facade__)")
    out = subprocess.run([sys.executable, "-m", "ttbuild", "serve", "art", "--miss", "warn", "--facade", "--",
                          sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": ":".join([str(tmp_path)] + sys.path)})
    assert out.stdout.split() == ["warn", "True", "True"], out.stderr


def test_a_loaded_library_launches_recorded_kernels_through_their_widest_rows(tmp_path):
    """Rows fixing `stride = 1` beside rows taking it at run time: `lib.kernel` takes every call."""
    write_lib(tmp_path / "art", ALL)
    drv = VariantDriver(raw=False)
    lib = rt.load(str(tmp_path / "art"), driver=drv)
    drv.params_of = {"scale_kernel": 4}
    assert sorted(v.variant for v in lib.scale_kernel.variants) == ["aligned", "generic"]


def serve_stand_in(monkeypatch, root, tmp_path, modules: dict):
    """serve() of the ALL library while `modules` (name -> module: a stand-in for an installed
    Triton) are in sys.modules: (server, driver, a plain `scale_kernel` function compiled as if
    it were pkg/ops.py's, for the stand-in's JITFunction to wrap)."""
    for name, mod in modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    write_lib(tmp_path / "art", ALL)
    drv = VariantDriver(raw=False)
    lib = rt.load(str(tmp_path / "art"), driver=drv)
    drv.params_of = {"scale_kernel": 4}
    server = serve(lib)
    src = {}
    exec(compile("def scale_kernel(x_ptr, out_ptr, n, stride, BLOCK: 'tl.constexpr' = 128): pass",
                 str(root / "pkg" / "ops.py"), "exec"), src)
    return server, drv, src["scale_kernel"]


def test_with_triton_installed_jitfunction_run_is_replaced(project, tmp_path, monkeypatch):
    """The patch serve() applies to an installed Triton (here a stand-in with Triton 3.6's class
    layout): JITFunction.run launches the library, pre-run hooks run, Autotuner.run is wrapped."""
    import types

    calls = []

    class KernelInterface:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    class JITFunction(KernelInterface):
        def __init__(self, fn):
            self.fn, self.pre_run_hooks = fn, [lambda *a, **k: calls.append("hook")]

        def run(self, *args, grid, warmup, **kwargs):
            calls.append("triton")  # Triton's own run: it would compile

    class Autotuner(KernelInterface):
        def run(self, *args, **kwargs):
            raise AssertionError("not reached here")

    jit_mod = types.ModuleType("triton.runtime.jit")
    jit_mod.JITFunction = JITFunction
    tuner_mod = types.ModuleType("triton.runtime.autotuner")
    tuner_mod.Autotuner = Autotuner
    root, torch = project
    _, drv, scale_kernel = serve_stand_in(monkeypatch, root, tmp_path, {
        "triton": types.ModuleType("triton"), "triton.runtime.jit": jit_mod, "triton.runtime.autotuner": tuner_mod})
    assert JITFunction.run._ttbuild_served and Autotuner.run._ttbuild_served
    kernel = JITFunction(scale_kernel)
    kernel[(3,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 1)
    assert calls == ["hook"] and [launch["function"][3] for launch in drv.launches] == ["aligned_one"]
    active().paused = True  # benchmarks/bench_served.py times Triton's JIT this way
    kernel[(3,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 1)
    assert calls == ["hook", "triton"] and len(drv.launches) == 1


def _norm(variant, out_dtype, w_none):
    w = _p("w_ptr", "constexpr", value=None) if w_none else _p("w_ptr", "pointer", "fp32", 16)
    params = [_p("x_ptr", "pointer", "fp32", 16), _p("out_ptr", "pointer", "fp32", 16), _p("n", "scalar", "i32"),
              _p("OUT_DTYPE", "constexpr", value={"dtype": out_dtype}), w]
    return meta(variant, "norm_kernel", params, file="pkg/ops.py")


def test_none_arguments_and_dtype_constexprs_pick_their_variant(project, tmp_path):
    """Variants built with `w_ptr` a constexpr None or a pointer, OUT_DTYPE a dtype ({"dtype": ...}
    in the metadata): a call passing None by position, by name or by default, and the façade's
    tl.float32 / tl.float16, launches the matching one; what none covers is a ServeMiss naming the
    specialization, never a TypeError."""
    root, torch = project
    log = tmp_path / "miss.jsonl"
    docs = [_norm("w_fp32", "fp32", False), _norm("none_fp32", "fp32", True), _norm("none_fp16", "fp16", True)]
    server, drv = _serve(tmp_path, docs, miss_log=str(log))
    ops = importlib.import_module("pkg.ops")
    tl = importlib.import_module("triton.language")
    x, out, w = torch.Tensor(0x1000), torch.Tensor(0x2000), torch.Tensor(0x3000)
    ops.norm_kernel[(1,)](x, out, 100, tl.float32, w)
    ops.norm_kernel[(1,)](x, out, 100, tl.float32, None)
    ops.norm_kernel[(1,)](x, out, 100, OUT_DTYPE=tl.float32, w_ptr=None)
    ops.norm_kernel[(1,)](x, out, 100, OUT_DTYPE=tl.float16)                 # w_ptr's default None
    ops.norm_kernel.run(x, out, 100, tl.float32, w_ptr=w, grid=(1,), warmup=False)
    ops.norm_kernel[(1,)](x, out, 100, tl.constexpr(tl.float16))              # a constexpr around the dtype
    assert [launch["function"][3] for launch in drv.launches] == ["w_fp32", "none_fp32", "none_fp32", "none_fp16",
                                                                  "w_fp32", "none_fp16"]
    for args in ((x, out, 100, tl.float16, w), (x, out, 100, "fp32", None), (x, out, 100, tl.bfloat16)):
        with pytest.raises(ServeMiss) as err:
            ops.norm_kernel[(1,)](*args)
        assert "pkg.ops.norm_kernel" in str(err.value) and "OUT_DTYPE: constexpr=" in str(err.value)
    assert 'constexprs = { OUT_DTYPE = { dtype = "bf16" }, w_ptr = { none = true } }' in str(err.value)  # the row to add
    events = read_records(str(log))
    assert [e["constants"]["OUT_DTYPE"] for e in events] == [{"dtype": "fp16"}, "fp32", {"dtype": "bf16"}]
    assert events[2]["constants"]["w_ptr"] is None and events[0]["signature"]["w_ptr"] == "*fp32"


def test_a_grid_callable_gets_dtype_constexprs_as_tl_dtypes(project, tmp_path):
    """META holds what Triton's JITFunction.run gives a grid callable (its bound arguments): a
    dtype constexpr as the `tl.dtype` object, not the metadata's {"dtype": name}; the same
    through the launch hooks' path (ttbuild.runtime.servehooks)."""
    root, torch = project
    server, drv = _serve(tmp_path, [_norm("none_fp16", "fp16", True), _norm("none_fp32", "fp32", True)])
    ops = importlib.import_module("pkg.ops")
    tl = importlib.import_module("triton.language")
    seen = []

    def grid(meta):
        seen.append(meta["OUT_DTYPE"])
        return (1,)

    x, out = torch.Tensor(0x1000), torch.Tensor(0x2000)
    ops.norm_kernel[grid](x, out, 100, tl.float16)
    ops.norm_kernel[grid](x, out, 100, OUT_DTYPE=tl.float32)
    from triton import knobs

    knobs.runtime.launch_enter_hook.add(lambda md: None)
    ops.norm_kernel[grid](x, out, 100, tl.float16)
    assert seen == [tl.float16, tl.float32, tl.float16]
    assert all(isinstance(d, tl.dtype) for d in seen) and seen[0] is tl.float16
    assert [launch["function"][3] for launch in drv.launches] == ["none_fp16", "none_fp32", "none_fp16"]


@pytest.mark.parametrize("raw", [False, True])
def test_a_library_kernel_grid_gets_ttbuild_dtypes_without_triton(tmp_path, monkeypatch, raw):
    """Without any `triton.language` loaded, a library kernel's grid callable gets ttbuild.language's
    dtype for a dtype constexpr (the dtype kernels written against ttbuild.language use), on the
    generic path and on the generated one (raw: the driver offers cuLaunchKernel's seam)."""
    import ttbuild.language as ttl

    monkeypatch.delitem(sys.modules, "triton.language", raising=False)
    write_lib(tmp_path / "art", [_norm("none_bf16", "bf16", True)])
    drv = VariantDriver(raw=raw)
    drv.params_of = {"norm_kernel": 3}
    torch = FakeTorch(monkeypatch)
    seen = []
    kernel = rt.load(str(tmp_path / "art"), driver=drv).norm_kernel
    for _ in range(2):  # the second launch takes the bound (generated, with raw) launch function
        kernel[lambda args: seen.append(args) or (1,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 100)
    assert [launch["path"] for launch in drv.launches] == ["launch", "cu_launch" if raw else "launch"]
    for args in seen:
        assert args["OUT_DTYPE"] is ttl.bfloat16 and args["w_ptr"] is None and args["n"] == 100


def _warps(variant, warps):
    params = [_p("x_ptr", "pointer", "fp32", 16), _p("n", "scalar", "i32"), _p("BLOCK", "constexpr", value=128),
              _p("num_warps", "constexpr", value=warps)]
    return meta(variant, "warps_kernel", params, num_warps=warps, file="pkg/ops.py")


def test_a_parameter_named_num_warps_is_bound_and_is_the_launch_option(project, tmp_path):
    """`num_warps: tl.constexpr` passed as `num_warps=8` (a softmax-style kernel): Triton 3.6 binds
    the parameter and takes the launch option from the same keyword; both pick the variant."""
    root, torch = project
    server, drv = _serve(tmp_path, [_warps("w4", 4), _warps("w8", 8)])
    drv.params_of["warps_kernel"] = 2
    ops = importlib.import_module("pkg.ops")
    x = torch.Tensor(0x1000)
    ops.warps_kernel[(1,)](x, 100, BLOCK=128, num_warps=8)
    ops.warps_kernel[(1,)](x, 100, BLOCK=128, num_warps=4)
    ops.warps_kernel[(1,)](x, 100, 128, 8)
    ops.warps_kernel.run(x, 100, BLOCK=128, num_warps=4, grid=(1,), warmup=False, stream=None)
    assert [launch["function"][3] for launch in drv.launches] == ["w8", "w4", "w8", "w4"]
