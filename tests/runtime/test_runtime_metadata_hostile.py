"""Hostile metadata (issue 32 item 5): lib/*.json and wheel manifest fields of the wrong type or range are refused at load with MetadataError naming the file.

Never a ValueError, TypeError, AttributeError or RecursionError, and never a value handed to the driver."""

from __future__ import annotations

import json

import pytest
from runtime_fakes import RecordingDriver, add_params, meta, write_lib

import ttbuild.runtime as rt

BAD_VALUES = [None, True, -1, 3, 2**31, 2**64, 1.5, "x", "", [], [1, "a"], {}, {"a": []}]
FIELDS = ["variant", "kernel", "entry", "cubin", "params", "signature", "constexprs", "num_warps", "num_ctas",
          "num_stages", "shared", "target", "arch", "targets", "ptx_version", "min_cuda_driver", "file",
          "autotune", "heuristics", "descriptors", "global_scratch", "images", "cubin_sha256"]
TUNED = {"group": "add", "key": ["n_elements"], "config": 0, "configs": 1, "kwargs": {},
         "num_warps": 4, "num_stages": 3, "reset_to_zero": [], "restore_value": []}


def _load_everything(root):
    """Load the library and make every kernel's and variant's launcher, as a first launch does."""
    lib = rt.load(str(root), driver=RecordingDriver())
    for name in lib.kernels:
        _ = lib[name]
    for v in lib.variants:
        _ = lib.variant(v.variant)
    return lib


def _write(tmp_path, doc):
    write_lib(tmp_path, [])
    lib = tmp_path / "lib"
    (lib / "add_fp32.cubin").write_bytes(b"CUBIN:add_fp32")
    (lib / "add_fp32.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_a_field_of_the_wrong_type_or_range_is_a_metadata_error(tmp_path, field, value):
    doc = meta("add_fp32", "add_kernel", add_params("fp32"))
    doc[field] = value
    _write(tmp_path, doc)
    try:
        _load_everything(tmp_path)
    except rt.MetadataError as exc:
        assert "add_fp32.json" in str(exc)


@pytest.mark.parametrize("field", ["group", "key", "config", "configs", "kwargs", "num_warps", "num_stages",
                                   "reset_to_zero", "restore_value", "tune"])
@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_a_bad_autotune_record_is_a_metadata_error(tmp_path, field, value):
    doc = meta("add_fp32", "add_kernel", add_params("fp32"), autotune=dict(TUNED, **{field: value}))
    _write(tmp_path, doc)
    try:
        _load_everything(tmp_path)
    except rt.MetadataError as exc:
        assert "add_fp32.json" in str(exc)


@pytest.mark.parametrize("field", ["name", "kind", "dtype", "divisibility", "value"])
@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_a_bad_parameter_is_a_metadata_error(tmp_path, field, value):
    params = add_params("fp32")
    params[0] = dict(params[0], **{field: value})
    _write(tmp_path, meta("add_fp32", "add_kernel", params))
    try:
        _load_everything(tmp_path)
    except rt.MetadataError as exc:
        assert "add_fp32.json" in str(exc)


@pytest.mark.parametrize("field, value, why", [
    ("shared", -1, "'shared'"), ("shared", 2**31, "'shared'"), ("num_warps", 3, "num_warps"),
    ("num_warps", 64, "num_warps"), ("num_ctas", 2, "num_ctas"), ("num_stages", 0, "num_stages"),
])
def test_values_the_driver_would_be_given_are_refused_at_load(tmp_path, field, value, why):
    """shared = -1 or 2**31 and num_warps = 3 reached cuLaunchKernel (issue 32)."""
    _write(tmp_path, meta("add_fp32", "add_kernel", add_params("fp32"), **{field: value}))
    with pytest.raises(rt.MetadataError, match=why):
        rt.load(str(tmp_path), driver=RecordingDriver())


def test_json_nested_past_the_parser_depth_is_a_metadata_error(tmp_path):
    write_lib(tmp_path, [])
    (tmp_path / "lib" / "deep.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(rt.MetadataError, match="deep.json"):
        rt.load(str(tmp_path))


@pytest.mark.parametrize("manifest", [
    {"schema": "ttbuild.library/1", "files": {"lib/x.json": 3}},
    {"schema": "ttbuild.library/1", "files": {"lib/x.json": "ab"}, "name": []},
    {"schema": "ttbuild.library/1", "files": {}},
    "[" * 100000,
])
def test_a_hostile_wheel_manifest_is_a_metadata_error(tmp_path, manifest):
    from ttbuild.runtime.package import load_package

    root = tmp_path / "pkg"
    root.mkdir()
    (root / "ttbuild_library.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    with pytest.raises(rt.MetadataError):
        load_package(str(root / "__init__.py"))
