"""CPU tests of `ttbuild tune --recorded` (ttbuild.runtime.retune): which recorded keys and configs it would time, through which variants, and how it rewrites the table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from runtime_fakes import FakeTorch, meta, write_lib
from test_serve import VariantDriver, _p

import ttbuild.runtime as rt
from ttbuild.record.tuning import tables
from ttbuild.runtime import retune

CFG = [{"kwargs": {"BLOCK": 64}, "num_warps": 2, "num_stages": 3, "num_ctas": 1, "maxnreg": None},
       {"kwargs": {"BLOCK": 256}, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None},
       {"kwargs": {"BLOCK": 512}, "num_warps": 8, "num_stages": 3, "num_ctas": 1, "maxnreg": None}]
ARGS = {"x_ptr": {"tensor": {"shape": [64, 100], "stride": [100, 1], "dtype": "fp32", "align": 0}},
        "out_ptr": {"tensor": {"shape": [64], "stride": [1], "dtype": "fp32", "align": 0}},
        "n_cols": {"value": 100}, "row_stride": {"value": 100}}


def _row(variant, block, warps, div=16):
    params = [_p("x_ptr", "pointer", "fp32", div), _p("out_ptr", "pointer", "fp32", div), _p("n_cols", "scalar", "i32"),
              _p("row_stride", "scalar", "i32"), _p("BLOCK", "constexpr", value=block)]
    return meta(variant, "rowsum_kernel", params, num_warps=warps, file="pkg/ops.py")


def _event(n_cols, config, args=True):
    ev = {"event": "autotune", "kernel": "rowsum_kernel", "path": "/proj/pkg/ops.py", "key_names": ["n_cols"],
          "key": [n_cols, "fp32", "fp32"], "config": CFG[config], "capability": [9, 0],
          "timings": [[CFG[0], 0.2], [CFG[1], 0.1]]}
    if args:
        ev.update(args=dict(ARGS, n_cols={"value": n_cols}), reset_to_zero=["out_ptr"],
                  per_config=[[c, {"grid": [64], "constexprs": {}}] for c in CFG])
    return ev


@pytest.fixture
def library(tmp_path):
    docs = [_row("b64", 64, 2), _row("b256", 256, 4), _row("b64_any", 64, 2, div=1), _row("b256_any", 256, 4, div=1)]
    write_lib(tmp_path / "art", docs)
    drv = VariantDriver(raw=False)
    drv.params_of = {"rowsum_kernel": 4}
    return rt.load(str(tmp_path / "art"), driver=drv), drv


def test_recorded_calls_reach_the_table(tmp_path):
    (doc,) = tables([_event(100, 1), _event(2048, 1, args=False)], "/proj").values()
    with_args, without = sorted(doc["entries"], key=lambda e: e["key"][0])
    assert with_args["args"]["n_cols"] == {"value": 100} and with_args["grids"] == {"0": [64], "1": [64], "2": [64]}
    assert "args" not in without and doc["reset_to_zero"] == ["out_ptr"]
    assert doc["configs"]["2"]["kwargs"] == {"BLOCK": 512}  # an untimed (pruned) config keeps its grid's index


def test_plan_times_the_built_configs_of_keys_recorded_with_their_arguments(library):
    lib, _ = library
    events = [_event(100, 1), _event(2048, 0, args=False), _event(4096, 0)]
    events[2]["args"]["x_ptr"] = {"value": {"repr": "<object>"}}
    (doc,) = tables(events, "/proj").values()
    jobs, notes = retune.plan_table("rowsum_kernel", doc, lib.variants)
    assert [(j.key, sorted(j.configs)) for j in jobs] == [([100, "fp32", "fp32"], ["0", "1"])]
    assert any("config 2 {'BLOCK': 512} num_warps=8 has no built variant" in n for n in notes)
    assert any("[2048, 'fp32', 'fp32']: recorded without its arguments" in n for n in notes)
    assert any("[4096, 'fp32', 'fp32']: cannot make argument(s) x_ptr" in n for n in notes)
    assert retune.plan_table("other", dict(doc, kernel="other_kernel"), lib.variants)[0] == []


def test_timing_goes_through_the_variant_serve_would_pick_and_rewrites_the_winner(library, monkeypatch):
    lib, drv = library
    torch = FakeTorch(monkeypatch)
    (doc,) = tables([_event(100, 1)], "/proj").values()
    (job,), _ = retune.plan_table("rowsum_kernel", doc, lib.variants)
    launchers = retune.groups(retune.kernel_variants(lib.variants, doc), drv)
    timed = []

    def bench(call, zero, restore, **kw):
        call()
        timed.append((drv.launches[-1]["function"][3], len(zero), kw))
        return {"b64": 0.05, "b256": 0.09, "b64_any": 0.5}[drv.launches[-1]["function"][3]]

    values = {"x_ptr": torch.Tensor(0x1000), "out_ptr": torch.Tensor(0x2000), "n_cols": 100, "row_stride": 100}
    times = retune.time_job(job, launchers, values, bench, zero=["out_ptr"], warmup_ms=1.0)
    assert timed == [("b64", 1, {"warmup_ms": 1.0}), ("b256", 1, {"warmup_ms": 1.0})]
    assert drv.launches[-1]["grid"] == (64, 1, 1) and times == {"0": 0.05, "1": 0.09}
    values["x_ptr"] = torch.Tensor(0x1004)                  # a misaligned recorded tensor: the general variants
    assert retune.time_job(job, launchers, values, bench)["0"] == 0.5
    new = retune.rewrite(doc, {0: times}, "cuda:90", warmup_ms=1.0)
    (e,) = new["entries"]
    assert e["config"] == 0 and e["times_ms"] == {"0": 0.05, "1": 0.09} and doc["entries"][0]["config"] == 1
    assert new["configs"] == doc["configs"] and new["retuned"]["entries"] == 1 and new["timing"]["warmup_ms"] == 1.0
    assert retune.rewrite(doc, {0: {"0": None, "1": None}}, "cuda:90")["entries"] == doc["entries"]  # nothing ran: kept


def test_tune_recorded_dry_run_prints_the_plan(library, tmp_path):
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "host-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in (_event(100, 1), _event(2048, 0, args=False))))
    out = subprocess.run([sys.executable, "-m", "ttbuild", "tune", "-o", str(tmp_path / "art"), "--recorded", str(rec),
                          "--root", "/proj", "--dry-run"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["rowsum_kernel key [100, 'fp32', 'fp32']: config 0 {'BLOCK': 64} num_warps=2 grid (64,); "
                                       "config 1 {'BLOCK': 256} num_warps=4 grid (64,)"]
    assert "recorded without its arguments" in out.stderr
    (tmp_path / "t.json").write_text(json.dumps(next(iter(tables([_event(2048, 0, args=False)], "/proj").values()))))
    out = subprocess.run([sys.executable, "-m", "ttbuild", "tune", "-o", str(tmp_path / "art"), "--recorded",
                          str(tmp_path / "t.json"), "--dry-run"], capture_output=True, text=True)
    assert out.returncode == 2 and "nothing in" in out.stderr


def test_made_arguments_span_the_recorded_strides_at_the_recorded_alignment():
    """make_args over a stand-in of the torch calls it makes: buffer length, storage offset (the
    address mod 16 in elements), random floats, zero integers; values passed through."""
    import types

    calls = []

    class DT:
        def __init__(self, name, size, floating):
            self.name, self.size, self.is_floating_point = name, size, floating

    f16, i32 = DT("float16", 2, True), DT("int32", 4, False)

    class Buf:
        def __init__(self, how, n, dtype=None):
            self.how, self.n, self.dtype = how, n, dtype

        def to(self, dtype):
            return Buf(self.how, self.n, dtype)

        def element_size(self):
            return self.dtype.size

    torch = types.SimpleNamespace(
        float16=f16, int32=i32,
        empty=lambda shape, dtype: Buf("empty", 0, dtype),
        randn=lambda n, device: Buf("randn", n),
        zeros=lambda n, device, dtype: Buf("zeros", n, dtype),
        as_strided=lambda buf, shape, stride, offset: calls.append((buf.how, buf.n, buf.dtype.name, shape, stride, offset)) or buf)
    args = {"x": {"tensor": {"shape": [64, 100], "stride": [200, 2], "dtype": "fp16", "align": 6}},
            "idx": {"tensor": {"shape": [0], "stride": [1], "dtype": "i32", "align": 0}}, "n": {"value": 7}}
    out = retune.make_args(args, torch)
    assert calls == [("randn", 1 + 63 * 200 + 99 * 2 + 3, "float16", [64, 100], [200, 2], 3),
                     ("zeros", 0, "int32", [0], [1], 0)]
    assert out["n"] == 7 and sorted(out) == ["idx", "n", "x"]
