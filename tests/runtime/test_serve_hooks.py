"""CPU tests of served launches calling Triton's launch hooks (ttbuild.runtime.servehooks), through the triton façade's knobs."""

from __future__ import annotations

import importlib

import pytest
from test_serve import ALL, KERNEL_SRC, _serve, project, serve_stand_in  # noqa: F401  (project: test_serve's fixture, used by name)

HOOKED_SRC = KERNEL_SRC.replace(
    "@triton.jit\ndef scale_kernel",
    "def _meta(grid, metadata, args):\n"
    "    return {'name': f\"{metadata.name} [n={args['n']}]\", 'grid': grid, 'warps': metadata.num_warps,\n"
    "            'block': args['BLOCK']}\n\n\n"
    "@triton.jit(launch_metadata=_meta)\ndef scale_kernel")


def test_enter_and_exit_hooks_get_tritons_lazy_metadata(project, tmp_path):  # noqa: F811
    root, torch = project
    (root / "pkg" / "ops.py").write_text(HOOKED_SRC)
    server, drv = _serve(tmp_path, ALL)
    ops = importlib.import_module("pkg.ops")
    from triton import knobs

    seen = []

    def enter(md):
        seen.append(("enter", len(drv.launches), md.get()))

    def leave(md):
        seen.append(("exit", len(drv.launches), md))

    x, out = torch.Tensor(0x1000), torch.Tensor(0x2000)
    ops.scale_kernel[(4,)](x, out, 512, 1)          # no hook set: the plain path
    assert seen == [] and len(drv.launches) == 1
    knobs.runtime.launch_enter_hook.add(enter)
    knobs.runtime.launch_exit_hook.add(leave)
    ops.scale_kernel[lambda meta: (meta["n"] // meta["BLOCK"],)](x, out, 512, 3)
    (_, n_enter, data), (_, n_exit, md) = seen
    assert (n_enter, n_exit) == (1, 2)   # enter before the launch, exit after it
    assert data["name"] == "scale_kernel [n=512]" and data["grid"] == (4,) and data["warps"] == 4
    assert data["block"] == 128 and data["stream"] == 0x5000 and data["function"] == drv.launches[-1]["function"]
    assert md.get() is data                      # the same object for both hooks
    assert drv.launches[-1]["function"][3] == "aligned" and drv.launches[-1]["grid"] == (4, 1, 1)
    knobs.runtime.launch_enter_hook.remove(enter)
    ops.scale_kernel[(2,)](x, out, 512, 1)
    assert seen[-1][0] == "exit" and len(seen) == 3 and drv.launches[-1]["function"][3] == "aligned_one"
    knobs.runtime.launch_exit_hook.remove(leave)
    ops.scale_kernel.warmup(x, out, 512, 1, grid=(1,))   # warmup launches nothing and calls no hook
    assert len(seen) == 3 and len(drv.launches) == 3 and server.calls == 3


def test_a_hook_assigned_as_a_function_and_a_raising_enter_hook(project, tmp_path):  # noqa: F811
    """Triton's older form `knobs.runtime.launch_enter_hook = fn`; an enter hook that raises
    stops the launch, as Triton's launcher returns before cuLaunchKernel."""
    root, torch = project
    server, drv = _serve(tmp_path, ALL)
    ops = importlib.import_module("pkg.ops")
    from triton import knobs

    names = []
    knobs.runtime.launch_enter_hook = lambda md: names.append(md.get()["name"])
    ops.scale_kernel[(1,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 2)
    assert names == ["scale_kernel"] and len(drv.launches) == 1

    def boom(md):
        raise KeyError("hook")

    knobs.runtime.launch_enter_hook = boom
    with pytest.raises(KeyError):
        ops.scale_kernel[(1,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 2)
    assert len(drv.launches) == 1


def test_summary_counts_launches_misses_and_tritons_compiles(project, tmp_path, monkeypatch):  # noqa: F811
    import sys
    import types

    from ttbuild.runtime import servestats
    from ttbuild.runtime.serve import ServeMiss

    root, torch = project
    monkeypatch.setattr(servestats, "_registered", [True])  # no line at this test process's exit
    server, drv = _serve(tmp_path, ALL, summary=True)
    assert servestats.summary_line(server).endswith("Triton not loaded (none compiled)")
    ops = importlib.import_module("pkg.ops")
    x, out = torch.Tensor(0x1000), torch.Tensor(0x2000)
    ops.scale_kernel[(4,)](x, out, 512, 1)
    ops.scale_kernel[(4,)](x, out, 512, 3)
    with pytest.raises(ServeMiss):
        ops.scale_kernel[(4,)](x, out, 512, 3, BLOCK=64)
    with pytest.raises(ServeMiss):
        ops.scale_kernel.warmup(x, out, 512, 3, BLOCK=64, grid=(1,))   # a miss, not a launch
    # a real Triton's knobs.compilation.listener (compiler.compile calls it per kernel), chained
    calls = []
    knobs = types.SimpleNamespace(compilation=types.SimpleNamespace(listener=lambda **kw: calls.append(kw["cache_hit"])))
    monkeypatch.setitem(sys.modules, "fake_triton.knobs", knobs)
    servestats.count_compiles(server, types.SimpleNamespace(__name__="fake_triton"))
    for hit in (False, True, False):
        knobs.compilation.listener(src=None, metadata={}, metadata_group={}, times=None, cache_hit=hit)
    assert calls == [False, True, False]
    assert servestats.summary_line(server) == ("ttbuild serve: 2 launches served, 2 missed (policy error); "
                                               "Triton compiled 2 kernels (1 more from its cache)")


def test_serve_summary_flag_prints_one_line_at_exit(tmp_path):
    import subprocess
    import sys

    (tmp_path / "art" / "lib").mkdir(parents=True)
    out = subprocess.run([sys.executable, "-m", "ttbuild", "serve", "art", "--facade", "--summary", "--",
                          sys.executable, "-c", "import triton"], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0 and out.stderr.splitlines() == [
        "ttbuild serve: 0 launches served, 0 missed (policy error); Triton not loaded (none compiled)"], out.stderr


def test_a_kernel_without_a_variant_for_this_gpu_is_named_before_the_first_launch(project, tmp_path):  # noqa: F811
    """A library covering this GPU for some kernels only: the first launch warns, naming the
    others (the whole library uncovered raises DeviceNotCovered: test_serve)."""
    from runtime_fakes import meta
    from test_serve import _p

    root, torch = project
    tuned80 = meta("t80", "tuned_kernel", [_p("x_ptr", "pointer", "fp32", 16), _p("n", "scalar", "i32"),
                                           _p("BLOCK", "constexpr", value=64)], file="pkg/ops.py",
                   target="cuda:80", arch="sm_80")
    server, drv = _serve(tmp_path, ALL + [tuned80], capability=(9, 0))
    ops = importlib.import_module("pkg.ops")
    with pytest.warns(UserWarning, match=r"no variant of pkg/ops.py:tuned_kernel runs on compute capability 9\.0"):
        ops.scale_kernel[(1,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 1)
    assert len(drv.launches) == 1   # the covered kernel still launches


def test_with_triton_installed_its_knobs_and_lazydict_are_used(project, tmp_path, monkeypatch):  # noqa: F811
    """A stand-in with Triton 3.6's module layout (triton.knobs.runtime's HookChains,
    triton.compiler.compiler.LazyDict): serve() reads the hooks there and passes Triton's class."""
    import types

    from ttbuild.runtime.facade.pkg.triton.knobs import HookChain

    class JITFunction:
        def __init__(self, fn):
            self.fn, self.pre_run_hooks, self.launch_metadata = fn, [], None

        def __getitem__(self, grid):
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

        def run(self, *args, grid, warmup, **kwargs):
            raise AssertionError("Triton's own run (it would compile)")

    class LazyDict(dict):  # stands for Triton's: a served launch must build this class
        def __init__(self, data):
            super().__init__(data)
            self.extras = []

        def get(self):
            return dict(self)

    mods = {"triton": types.ModuleType("triton"), "triton.runtime.jit": types.ModuleType("triton.runtime.jit"),
            "triton.runtime.autotuner": types.ModuleType("triton.runtime.autotuner"),
            "triton.knobs": types.ModuleType("triton.knobs"),
            "triton.compiler.compiler": types.ModuleType("triton.compiler.compiler")}
    mods["triton.runtime.jit"].JITFunction = JITFunction
    mods["triton.runtime.autotuner"].Autotuner = type("Autotuner", (), {"run": lambda self: None})
    mods["triton.knobs"].runtime = types.SimpleNamespace(launch_enter_hook=HookChain(), launch_exit_hook=HookChain(True))
    mods["triton.compiler.compiler"].LazyDict = LazyDict
    root, torch = project
    server, drv, scale_kernel = serve_stand_in(monkeypatch, root, tmp_path, mods)
    assert server.launch_knobs is mods["triton.knobs"].runtime
    seen = []
    mods["triton.knobs"].runtime.launch_enter_hook.add(seen.append)
    JITFunction(scale_kernel)[(3,)](torch.Tensor(0x1000), torch.Tensor(0x2000), 512, 1)
    (md,) = seen
    assert type(md) is LazyDict and md.get()["name"] == "scale_kernel" and len(drv.launches) == 1
