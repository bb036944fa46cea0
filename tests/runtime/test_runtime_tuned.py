"""CPU tests of autotuned launches (ttbuild.runtime.tuned): the tuning table's lookup rule (exact, nearest, default), heuristics choosing among the built variants, named arguments, bad tables, and the tuner's pure parts."""

from __future__ import annotations

import json

import pytest
from runtime_fakes import FakeTorch, RecordingDriver, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime.tuned import TunedLauncher
from ttbuild.runtime.tuner import winner
from ttbuild.runtime.tuningtable import RULE, TABLE_SCHEMA, TuningTable, distance

CONFIGS = {0: {"BLOCK": 32, "w": 4}, 1: {"BLOCK": 64, "w": 8}}


class VariantDriver(RecordingDriver):
    """A RecordingDriver whose function handles name the image loaded, so a launch says which
    variant ran."""

    def load_function(self, image, entry, shared):
        super().load_function(image, entry, shared)
        return ("fn", entry, self.ctx, bytes(image).decode().split(":", 1)[1])


def _mm_params(block, even):
    return ([{"name": "a_ptr", "kind": "pointer", "dtype": "fp16", "divisibility": 16}]
            + [{"name": n, "kind": "scalar", "dtype": "i32", "divisibility": 1} for n in ("M", "N", "K")]
            + [{"name": "BLOCK", "kind": "constexpr", "value": block},
               {"name": "EVEN", "kind": "constexpr", "value": even}])


def _library(tmp_path, table=None, heuristics=True, extra_docs=(), tune=None):
    docs = list(extra_docs)
    for c, cfg in CONFIGS.items():
        for even in ((False, True) if heuristics else (False,)):
            name = f"mm.c{c}" + (f".EVEN-{int(even)}" if heuristics else "")
            rec = {"group": "mm", "key": ["M", "N", "K"], "config": c, "configs": 2,
                   "kwargs": {"BLOCK": cfg["BLOCK"]}, "num_warps": cfg["w"], "num_stages": 3,
                   "reset_to_zero": [], "restore_value": []}
            if tune is not None:
                rec["tune"] = tune
            extra = {"autotune": rec, "file": "mm.py"}
            if heuristics:
                extra["heuristics"] = {"EVEN": "args['K'] % args['BLOCK'] == 0"}
            docs.append(meta(name, "mm", _mm_params(cfg["BLOCK"], even), num_warps=cfg["w"], **extra))
    write_lib(tmp_path, docs)
    if table is not None:
        (tmp_path / "tuning").mkdir()
        (tmp_path / "tuning" / "mm.json").write_text(json.dumps(table))
    drv = VariantDriver(raw=False)
    lib = rt.load(str(tmp_path), driver=drv)
    drv.params_of = {"mm": 4}
    return lib, drv


def _table(*entries):
    return {"schema": TABLE_SCHEMA, "kernel": "mm", "key": ["M", "N", "K"], "rule": RULE,
            "entries": [{"group": "mm", "key": list(k), "config": c, "times_ms": {}} for k, c in entries]}


def _ran(drv):
    return drv.launches[-1]["function"][3]


def test_an_autotuned_kernel_loads_as_a_tuned_launcher(tmp_path):
    lib, _ = _library(tmp_path)
    assert isinstance(lib.mm, TunedLauncher)
    assert lib.mm.configs == [0, 1] and lib.mm.key_names == ("M", "N", "K")


def test_without_a_table_the_first_config_runs_and_heuristics_pick_the_variant(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _library(tmp_path)
    a = torch.Tensor(0x1000, "float16")
    lib.mm[(1,)](a, 100, 100, 64)          # 64 % 32 == 0
    assert _ran(drv) == "mm.c0.EVEN-1"
    lib.mm[(1,)](a, 100, 100, 70)
    assert _ran(drv) == "mm.c0.EVEN-0"
    assert lib.mm.config_for(a, 100, 100, 64)["how"] == "default"


def test_the_table_picks_exact_then_nearest_then_default(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    table = _table(((512, 512, 512, "fp16"), 1), ((8192, 8192, 8192, "fp16"), 0))
    lib, drv = _library(tmp_path, table)
    a = torch.Tensor(0x1000, "float16")
    lib.mm[(4,)](a, 512, 512, 512)
    assert _ran(drv) == "mm.c1.EVEN-1" and drv.launches[-1]["block_x"] == 8 * 32
    assert lib.mm.config_for(a, 512, 512, 512)["how"] == "exact"
    # 600 is nearer 512 than 8192 in log2; 600 % 64 != 0 so EVEN is False
    lib.mm[(4,)](a, 600, 600, 600)
    assert _ran(drv) == "mm.c1.EVEN-0"
    assert lib.mm.config_for(a, 600, 600, 600) == {"config": 1, "how": "nearest", "key": (600, 600, 600, "fp16"),
                                                    "kwargs": {"BLOCK": 64}}
    lib.mm[(4,)](a, 6000, 6000, 6400)
    assert _ran(drv) == "mm.c0.EVEN-1"
    # another dtype shares no recorded key: the default config
    b = torch.Tensor(0x2000, "float32")
    assert lib.mm.config_for(b, 512, 512, 512)["how"] == "default"


def test_named_arguments_take_the_same_choice(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _library(tmp_path, _table(((512, 512, 512, "fp16"), 1)))
    a = torch.Tensor(0x1000, "float16")
    lib.mm[(4,)](a, 512, N=512, K=512)
    assert _ran(drv) == "mm.c1.EVEN-1"
    lib.mm.run(a, 512, 512, 512, grid=(2,))
    assert _ran(drv) == "mm.c1.EVEN-1" and drv.launches[-1]["grid"] == (2, 1, 1)


def test_a_config_kwarg_given_by_name_bypasses_the_table(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _library(tmp_path, _table(((512, 512, 512, "fp16"), 1)))
    a = torch.Tensor(0x1000, "float16")
    lib.mm[(4,)](a, 512, 512, 512, BLOCK=32, EVEN=True)
    assert _ran(drv) == "mm.c0.EVEN-1"


def test_a_grid_function_sees_the_chosen_config(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _library(tmp_path, _table(((512, 512, 512, "fp16"), 1)))
    a = torch.Tensor(0x1000, "float16")
    seen = []

    def grid(meta):
        seen.append(meta["BLOCK"])
        return (512 // meta["BLOCK"],)

    lib.mm[grid](a, 512, 512, 512)
    assert seen == [64] and drv.launches[-1]["grid"] == (8, 1, 1)


def test_a_heuristic_value_that_was_not_built_is_named(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    docs = []
    rec = {"group": "mm", "key": ["M"], "config": 0, "kwargs": {"BLOCK": 32}}
    docs.append(meta("mm.c0", "mm", _mm_params(32, True), autotune=rec,
                     heuristics={"EVEN": "args['K'] % args['BLOCK'] == 0"}))
    write_lib(tmp_path, docs)
    drv = VariantDriver(raw=False)
    lib = rt.load(str(tmp_path), driver=drv)
    drv.params_of = {"mm": 4}
    with pytest.raises(LookupError, match=r"EVEN.*False.*no variant was built"):
        lib.mm[(1,)](torch.Tensor(0x1000, "float16"), 1, 1, 70)


def test_a_bad_table_warns_and_the_default_config_runs(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _library(tmp_path, {"schema": "something else"})
    with pytest.warns(UserWarning, match="ignoring the tuning table"):  # read when the kernel is first asked for
        lib.mm[(1,)](torch.Tensor(0x1000, "float16"), 512, 512, 512)
    assert _ran(drv) == "mm.c0.EVEN-1"


def test_a_key_that_names_no_runtime_parameter_is_refused(tmp_path):
    rec = {"group": "mm", "key": ["BLOCK"], "config": 0, "kwargs": {}}
    write_lib(tmp_path, [meta("mm.c0", "mm", _mm_params(32, True), autotune=rec)])
    lib = rt.load(str(tmp_path), driver=VariantDriver(raw=False))
    with pytest.raises(rt.MetadataError, match="autotune key 'BLOCK' is not a runtime parameter"):
        lib.mm  # noqa: B018 (the lookup raises)


def test_distance_is_log2_over_numbers_and_none_across_dtypes():
    assert distance((512, "fp16"), (1024, "fp16")) == 1.0
    assert distance((512, 512), (2048, 256)) == 3.0
    assert distance((512, "fp16"), (512, "fp32")) is None
    assert distance((512,), (512, 1)) is None
    t = TuningTable(_table(((512, "fp16"), 1), ((2048, "fp16"), 0)))
    assert t.lookup((512, "fp16")) == (1, "exact")
    assert t.lookup((1000, "fp16")) == (1, "nearest")   # log2: 0.97 from 512, 1.03 from 2048
    assert t.lookup((1100, "fp16")) == (0, "nearest")
    assert t.lookup((1100, "bf16")) == (None, "default")


def test_the_winner_is_the_fastest_config_that_ran():
    assert winner({0: 0.5, 1: 0.25, 2: None}) == 1
    assert winner({0: 0.25, 1: 0.25}) == 0
    assert winner({0: None}) is None


def _interleaved_library(tmp_path):
    """A kernel called as Triton calls it: (a_ptr, M, STRIDE, K) with STRIDE a constexpr (a unit
    stride specialised away) between runtime parameters, BLOCK from the configs, EVEN computed."""
    docs = []
    for c, cfg in CONFIGS.items():
        for even in (False, True):
            params = [{"name": "a_ptr", "kind": "pointer", "dtype": "fp16", "divisibility": 16},
                      {"name": "M", "kind": "scalar", "dtype": "i32", "divisibility": 1},
                      {"name": "STRIDE", "kind": "constexpr", "value": 1},
                      {"name": "K", "kind": "scalar", "dtype": "i32", "divisibility": 1},
                      {"name": "BLOCK", "kind": "constexpr", "value": cfg["BLOCK"]},
                      {"name": "EVEN", "kind": "constexpr", "value": even}]
            rec = {"group": "mm", "key": ["M", "K"], "config": c, "kwargs": {"BLOCK": cfg["BLOCK"]}}
            docs.append(meta(f"mm.c{c}.EVEN-{int(even)}", "mm", params, num_warps=cfg["w"], autotune=rec,
                             heuristics={"EVEN": "args['K'] % args['BLOCK'] == 0"}))
    write_lib(tmp_path, docs)
    (tmp_path / "tuning").mkdir()
    (tmp_path / "tuning" / "mm.json").write_text(json.dumps(
        {"schema": TABLE_SCHEMA, "entries": [{"key": [512, 512, "fp16"], "config": 1}]}))
    drv = VariantDriver(raw=True)
    lib = rt.load(str(tmp_path), driver=drv)
    drv.params_of = {"mm": 3}
    return lib, drv


def test_a_triton_style_call_with_constexprs_among_the_arguments_takes_the_generated_path(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _interleaved_library(tmp_path)
    a = torch.Tensor(0x1000, "float16")
    for _ in range(3):
        lib.mm[(2,)](a, 512, 1, 512)
    assert [x["function"][3] for x in drv.launches] == ["mm.c1.EVEN-1"] * 3
    # after the first launch fills it, the generated cuLaunchKernel path serves the call
    assert [x["path"] for x in drv.launches] == ["launch", "cu_launch", "cu_launch"]
    assert drv.launches[-1]["raw"][1][:4] == (512).to_bytes(4, "little")
    assert drv.launches[-1]["raw"][2][:4] == (512).to_bytes(4, "little")   # K, STRIDE left out
    lib.mm[(2,)](a, 512, 1, 500)
    assert drv.launches[-1]["function"][3] == "mm.c1.EVEN-0"
    assert lib.mm.select(a, 512, 1, 500).variant == "mm.c1.EVEN-0"


def test_a_constexpr_value_no_variant_has_is_refused_by_name(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    lib, drv = _interleaved_library(tmp_path)
    with pytest.raises(LookupError, match=r"no variant of config 1 has STRIDE=2"):
        lib.mm[(2,)](torch.Tensor(0x1000, "float16"), 512, 2, 512)
    assert drv.launches == []


def test_a_plain_kernel_called_triton_style_with_constexprs_among_its_parameters(tmp_path, monkeypatch):
    """Launcher's Triton call (every parameter in order, a specialised stride among them): the
    constexpr values pick the variant and the generated path serves the repeats."""
    torch = FakeTorch(monkeypatch)
    docs = []
    for stride in (1, 2):
        params = [{"name": "a_ptr", "kind": "pointer", "dtype": "fp16", "divisibility": 16},
                  {"name": "M", "kind": "scalar", "dtype": "i32", "divisibility": 1},
                  {"name": "STRIDE", "kind": "constexpr", "value": stride},
                  {"name": "K", "kind": "scalar", "dtype": "i32", "divisibility": 1}]
        docs.append(meta(f"k_s{stride}", "k", params))
    write_lib(tmp_path, docs)
    drv = VariantDriver(raw=True)
    lib = rt.load(str(tmp_path), driver=drv)
    drv.params_of = {"k": 3}
    a = torch.Tensor(0x1000, "float16")
    for stride in (2, 2, 1, 2):
        lib.k[(1,)](a, 5, stride, 7)
    assert [x["function"][3] for x in drv.launches] == ["k_s2", "k_s2", "k_s1", "k_s2"]
    assert [x["path"] for x in drv.launches] == ["launch", "cu_launch", "launch", "cu_launch"]
    with pytest.raises(rt.NoMatchingVariant, match="STRIDE=3 passed"):
        lib.k[(1,)](a, 5, 3, 7)
    lib.k[(1,)](a, 5, K=7, STRIDE=1)   # keywords: the generic path
    assert drv.launches[-1]["function"][3] == "k_s1"


def test_ttbuild_tune_says_what_it_needs(tmp_path):
    """Without an autotuned kernel that has a plan there is nothing to tune (exit 2, said why); a
    shapes file must give each row's args and shapes."""
    import subprocess
    import sys

    _library(tmp_path)
    run = subprocess.run([sys.executable, "-m", "ttbuild", "tune", "-o", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and "no autotuned kernel with a tune plan" in run.stderr
    bad = tmp_path / "shapes.toml"
    bad.write_text('[mm]\nargs = "h.py"\n')
    run = subprocess.run([sys.executable, "-m", "ttbuild", "tune", "-o", str(tmp_path), "--shapes", str(bad)],
                         capture_output=True, text=True)
    assert run.returncode == 1 and '[mm] needs args = "file.py:function"' in run.stderr


def test_tune_kernel_caches_its_timings_per_gpu_and_cubins(tmp_path, monkeypatch):
    """ttbuild tune's core with the timing stubbed (tests/gpu times for real): the table holds the
    fastest config of each shape, and a second tune of the same library on the same GPU takes
    every shape from the cache; another GPU times again."""
    from ttbuild.cache import DirCache
    from ttbuild.runtime import tuner

    torch = FakeTorch(monkeypatch)
    lib, _ = _library(tmp_path / "a")
    timed = []

    def fake_times(launcher, args, grid, configs=None, **kw):
        timed.append(args[1])
        return {c: (1.0 if c == (args[1] >= 1024) else 2.0) for c in configs}

    device = {"name": "GPU A", "capability": [9, 0], "cuda": "12.8"}
    monkeypatch.setattr(tuner, "time_configs", fake_times)
    monkeypatch.setattr(tuner, "device_info", lambda: dict(device))
    (tmp_path / "k").mkdir()
    monkeypatch.setattr(tuner, "load_harness", lambda d, spec: lambda M: ((torch.Tensor(0x1000, "float16"), M, M, 64), (1,)))
    plan = {"mm": {"args": "h.py:make", "shapes": [{"M": 512}, {"M": 4096}]}}
    cache = DirCache(tmp_path / "cache")
    doc = tuner.tune_kernel(lib.mm, str(tmp_path / "k"), str(tmp_path / "t"), "mm", only=plan, cache=cache)
    assert [(e["key"], e["config"]) for e in doc["entries"]] == [([512, 512, 64, "fp16"], 0), ([4096, 4096, 64, "fp16"], 1)]
    assert timed == [512, 4096]
    again = tuner.tune_kernel(lib.mm, str(tmp_path / "k"), str(tmp_path / "t"), "mm", only=plan, cache=cache)
    assert timed == [512, 4096] and again["entries"] == doc["entries"]
    table = TuningTable.read(str(tmp_path / "t" / "mm.json"))
    assert table.lookup((4096, 4096, 64, "fp16")) == (1, "exact")
    device["name"] = "GPU B"
    tuner.tune_kernel(lib.mm, str(tmp_path / "k"), str(tmp_path / "t"), "mm", only=plan, cache=cache)
    assert timed == [512, 4096, 512, 4096]


def test_a_call_no_variant_takes_leaves_no_choice_behind(tmp_path, monkeypatch):
    """The launch key leaves out the dtypes every variant fixes; a tensor of another dtype is
    refused by name and does not make later calls of the same sizes take its (default) config."""
    torch = FakeTorch(monkeypatch)
    lib, drv = _library(tmp_path, _table(((512, 512, 512, "fp16"), 1)))
    launch = lib.mm[(4,)]
    with pytest.raises(rt.NoMatchingVariant, match="expects \\*fp16"):
        launch(torch.Tensor(0x1000, "float32"), 512, 512, 512)
    launch(torch.Tensor(0x1000, "float16"), 512, 512, 512)
    assert _ran(drv) == "mm.c1.EVEN-1"


def test_ttbuild_tune_never_looks_up_a_kernel_it_does_not_tune(tmp_path, monkeypatch, capsys):
    """Issue 32 item 6: a TMA kernel whose variants encode a descriptor differently (this
    repository's _attn_fwd_desc, matmul_tma_persistent_kernel) cannot be launched by name; tune
    must still tune the autotuned kernel beside it, with and without --kernel (timing stubbed)."""
    import types

    from test_runtime_tma import tma_doc

    from ttbuild.runtime import tunecli

    plan = {"args": "h.py:make", "shapes": [{"M": 512}]}
    bad_tma = [tma_doc("k_a", num_warps=4), tma_doc("k_b", num_warps=8, swizzle=64, box=(64, 32))]
    _library(tmp_path, extra_docs=bad_tma, tune=plan)
    tuned = []
    monkeypatch.setenv("TTBUILD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tunecli, "_torch", lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True)))
    monkeypatch.setattr(tunecli, "tune_kernel", lambda launcher, *a, **kw: tuned.append(launcher.kernel) or {"entries": []})
    assert tunecli.main(["-o", str(tmp_path), "--kernel", "mm"]) == 0 and tuned == ["mm"]
    assert tunecli.main(["-o", str(tmp_path)]) == 0 and tuned == ["mm", "mm"]
    assert tunecli.main(["-o", str(tmp_path), "--kernel", "nope"]) == 2
    assert "no kernel nope" in capsys.readouterr().err
