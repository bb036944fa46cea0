"""The runtime packs launch arguments from the metadata's `params` (the kernel ABI the ttir stage recorded, docs/CONTRACTS.md "Kernel ABI"): their order, dtypes and descriptor entries are what the cubin gets; metadata of another schema asks for a rebuild."""

from __future__ import annotations

import struct

import pytest
from runtime_fakes import RecordingDriver, attach, desc_entries, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime.metadata import SCHEMA


class Tensor:
    """A device tensor as the launch reads it: data_ptr() and a torch dtype."""

    def __init__(self, ptr, dtype="float32"):
        self.ptr, self.dtype = ptr, type("Dtype", (), {"__str__": lambda s: f"torch.{dtype}"})()

    def data_ptr(self):
        return self.ptr


def _params(n_dtype="i32", s_dtype="fp32", order=("x", "n", "s")):
    by_name = {"x": {"name": "x", "kind": "pointer", "dtype": "fp32", "divisibility": 16, "origin": "x"},
               "n": {"name": "n", "kind": "scalar", "dtype": n_dtype, "divisibility": 1, "origin": "n"},
               "s": {"name": "s", "kind": "scalar", "dtype": s_dtype, "divisibility": 1, "origin": "s"}}
    return [by_name[k] for k in order] + [{"name": "BLOCK", "kind": "constexpr", "value": 64, "origin": "BLOCK"}]


def _launch(tmp_path, params, *args, **extra):
    write_lib(tmp_path, [meta("k_v", "k", params, **extra)])
    drv = RecordingDriver(raw=False)
    lib = attach(rt.load(str(tmp_path), driver=drv), drv)
    lib.k[(1,)](*args)
    (call,) = drv.launches
    return call["raw"]


def test_the_launch_packs_the_params_the_metadata_lists(tmp_path):
    raw = _launch(tmp_path, _params(), Tensor(0x7000_0000), 7, 2.5)
    assert struct.unpack("<Q", raw[0]) == (0x7000_0000,)
    assert struct.unpack("<i", raw[1][:4]) == (7,) and struct.unpack("<f", raw[2][:4]) == (2.5,)


def test_an_edited_params_list_changes_the_packing(tmp_path):
    """The order and the dtypes come from the list alone: a list that puts `n` first and makes
    it i64, and `s` fp16, packs the same call's values into other slots and widths."""
    raw = _launch(tmp_path, _params("i64", "fp16", order=("n", "x", "s")), -7, Tensor(0x7000_0000), 2.5)
    assert struct.unpack("<q", raw[0]) == (-7,) and struct.unpack("<Q", raw[1]) == (0x7000_0000,)
    assert struct.unpack("<e", raw[2][:2]) == (2.5,)


def test_a_descriptor_passes_as_its_recorded_entries(tmp_path):
    params = desc_entries("d", "fp32", (8, 16)) + _params()[1:]
    raw = _launch(tmp_path, params, rt.TensorDescriptor(Tensor(0x7000_0000), (40, 48), (64, 1), (8, 16)), 7, 2.5,
                  descriptors=[{"name": "d", "dtype": "fp32", "block_shape": [8, 16]}])
    assert struct.unpack("<Q", raw[0]) == (0x7000_0000,)
    assert [struct.unpack("<i", r[:4])[0] for r in raw[1:3]] == [40, 48] and struct.unpack("<q", raw[3]) == (64,)
    assert struct.unpack("<i", raw[4][:4]) == (7,)


N = {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1, "origin": "n"}


@pytest.mark.parametrize("edit, why", [
    (lambda ps: [ps[0], ps[1], ps[3], ps[2]], r"passes as \['base', 'shape', 'stride', 'shape'\]"),
    (lambda ps: ps[:3], r"passes as \['base', 'shape', 'shape'\]"),
    (lambda ps: ps[:2] + [N] + ps[2:], r"passes as \['base', 'shape', 'shape', 'stride'\]"),  # not contiguous
])
def test_descriptor_entries_this_runtime_does_not_expand_ask_for_a_rebuild(tmp_path, edit, why):
    params = edit(desc_entries("d", "fp32", (8, 16)))
    params += [p for p in _params() if p["name"] != "x" and p not in params]
    write_lib(tmp_path, [meta("k_v", "k", params, descriptors=[{"name": "d", "dtype": "fp32", "block_shape": [8, 16]}])])
    with pytest.raises(rt.MetadataError, match=why + ".*rebuild the library"):
        _ = rt.load(str(tmp_path), driver=RecordingDriver()).k


@pytest.mark.parametrize("entry, why", [
    ({"origin": "elsewhere"}, "param 'n' has origin 'elsewhere' and part None"),
    ({"part": "shape"}, "param 'n' has origin 'n' and part 'shape'"),
    ({"part": "bogus", "origin": "x"}, "part 'bogus'"),
])
def test_an_origin_or_part_that_does_not_fit_is_a_metadata_error(tmp_path, entry, why):
    params = _params()
    params[1] = dict(params[1], **entry)
    write_lib(tmp_path, [meta("k_v", "k", params)])
    with pytest.raises(rt.MetadataError, match=why):
        rt.load(str(tmp_path))


def test_a_library_of_another_metadata_schema_asks_for_a_rebuild(tmp_path):
    write_lib(tmp_path, [dict(meta("k_v", "k", _params()), schema="ttbuild.kernel/1")])
    with pytest.raises(rt.MetadataError, match=r"k_v.json: written by another ttbuild \(metadata schema "
                                               rf"'ttbuild.kernel/1'; this runtime reads '{SCHEMA}'\): rebuild the library"):
        rt.load(str(tmp_path))
