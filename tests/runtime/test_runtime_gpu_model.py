"""A variant built for a GPU model (its modules read the SM count: a row's `gpu = ...`) runs only on a device with that model's SM count; the check reads the library index and happens before the first launch."""

from __future__ import annotations

import json

import pytest
from runtime_fakes import FakeTorch, RecordingDriver, add_params, attach, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.graph.meta import gpu_entry
from ttbuild.runtime import libindex
from ttbuild.runtime.driver import Capability
from ttbuild.runtime.select import NoMatchingVariant
from ttbuild.runtime.serve import DeviceNotCovered, check_coverage
from ttbuild.target import Target


def _lib(tmp_path, models: dict[str, str], index: bool = True):
    """One `add` variant per (variant name -> GPU model name, "" for none), the same specialization each."""
    docs = [meta(name, "add", add_params("fp16"), file="ops/add.py",
                 **({"gpu": gpu_entry(m, Target.parse("cuda:90"))} if m else {})) for name, m in models.items()]
    write_lib(tmp_path, docs)
    if index:
        libindex.write_index(str(tmp_path / "lib"))
    return tmp_path


def test_the_metadata_record_is_the_models_facts():
    assert gpu_entry("h20", Target.parse("cuda:90")) == {"model": "h20", "sm_count": 78, "device_name": "NVIDIA H20"}


def test_a_capability_is_still_the_tuple_it_was():
    cap = Capability(9, 0, 132)
    assert cap == (9, 0) and tuple(cap) >= (9, 0) and hash(cap) == hash((9, 0)) and cap.sm_count == 132
    assert Capability(9, 0).sm_count is None


@pytest.mark.parametrize("index", [True, False])
def test_a_variant_for_another_model_is_refused_by_name(tmp_path, monkeypatch, index):
    torch = FakeTorch(monkeypatch)
    root = _lib(tmp_path, {"add_h100": "h100-sxm"}, index)
    drv = RecordingDriver(capability=Capability(9, 0, 78))
    lib = attach(rt.load(str(root), driver=drv), drv)
    x, y, out = (torch.Tensor(p, "float16") for p in (0x1000, 0x2000, 0x3000))
    with pytest.raises(NoMatchingVariant, match=r"built for the GPU model h100-sxm \(132 SMs\).*this device has 78 SMs"):
        lib["add"][(2,)](x, y, out, 64)
    assert drv.launches == []
    with pytest.raises(DeviceNotCovered, match=r"GPU models h100-sxm.*compute capability 9.0 with 78 SMs"):
        check_coverage(lib, Capability(9, 0, 78))


def test_the_variant_of_the_devices_model_is_chosen(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    root = _lib(tmp_path, {"add_h100": "h100-sxm", "add_h20": "h20"})
    for sms, chosen in ((78, b"CUBIN:add_h20"), (132, b"CUBIN:add_h100")):
        drv = RecordingDriver(capability=Capability(9, 0, sms))
        lib = attach(rt.load(str(root), driver=drv), drv)
        check_coverage(lib, Capability(9, 0, sms))
        x, y, out = (torch.Tensor(p, "float16") for p in (0x1000, 0x2000, 0x3000))
        lib["add"][(2,)](x, y, out, 64)
        assert [image for _, image, _, _ in drv.loads] == [chosen]


def test_a_variant_without_a_model_runs_on_any_sm_count_and_the_index_reads_nothing(tmp_path, monkeypatch):
    root = _lib(tmp_path, {"add_any": "", "add_h100": "h100-sxm"})
    seen = []
    monkeypatch.setattr(libindex, "parse_variant", lambda doc, path: seen.append(path) or None)
    lib = rt.load(str(root), driver=RecordingDriver())
    check_coverage(lib, Capability(9, 0, 78))  # add_any covers it
    check_coverage(lib, (9, 0))  # a driver that does not say the SM count: capability only
    assert seen == []
    rows = json.loads((root / "lib" / libindex.INDEX).read_text())["kernels"][0]["variants"]
    assert [len(r) for r in rows] == [5, 6] and rows[1][5] == ["h100-sxm", 132]


def test_a_bad_gpu_record_is_refused_at_load(tmp_path):
    write_lib(tmp_path, [meta("add_bad", "add", add_params("fp16"), gpu={"model": "h100-sxm", "sm_count": "132"})])
    with pytest.raises(rt.MetadataError, match=r"field 'gpu' must be an object with model .* and sm_count"):
        rt.load(str(tmp_path), driver=RecordingDriver())


def test_the_meta_step_writes_the_record_from_the_rows_model_and_the_runtime_reads_it(tmp_path):
    from ttbuild.frontend import abi
    from ttbuild.graph.meta import build_metadata
    from ttbuild.runtime.metadata import parse_variant

    ttgir = b'module attributes {"ttg.num-warps" = 4 : i32} {\n  tt.func public @k() {\n    tt.return\n  }\n}\n'
    blobs = {s: b"out" for s in ("parse", "ttir", "llir", "ptx", "cubin")}
    blobs.update(abi=abi.record([abi.entry("x", "pointer", "fp32", 16)], []), ttgir=ttgir)
    (tmp_path / "k_v.cubin").write_bytes(b"out")
    docs = []
    for gpu in ("", "h20"):
        variant = {"name": "k_v", "kernel": "k", "file": "k.py", "constexprs": {}, "signature": "*fp32:16", "num_warps": 4,
                   "num_ctas": 1, "num_stages": 3, "target": "cuda:90", "arch": "sm_90a", "gpu": gpu}
        docs.append(build_metadata(variant, blobs, "k_v.cubin"))
    assert "gpu" not in docs[0] and docs[1]["gpu"] == {"model": "h20", "sm_count": 78, "device_name": "NVIDIA H20"}
    v = parse_variant(docs[1], str(tmp_path / "k_v.json"))
    assert v.model_ok(78) == "" and v.model_ok(None) == "" and "h20 (78 SMs)" in v.model_ok(132)
    assert parse_variant(docs[0], str(tmp_path / "k_v.json")).model_ok(132) == ""
