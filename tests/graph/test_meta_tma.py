"""The metadata of descriptor parameters that the TTGIR stage chose to load through TMA (module attribute `ttb.tma`): a `<name>.tensormap` u64 parameter before the base and a "tma" record in `descriptors`; without the attribute the document is unchanged."""

from __future__ import annotations

import json

import pytest

from ttbuild.graph.meta import MetaError, build_metadata, build_params
from ttbuild.runtime.metadata import parse_variant
from ttbuild.tma import MODULE_ATTR, encode_attr

SIG = [["pointer", "fp32", 16], ["tensordesc", "fp16", 16, [128, 64]], ["scalar", "i32", 1],
       ["tensordesc", "bf16", 1, [64, 64]]]


def _variant():
    return {"name": "k_v", "kernel": "k", "file": "k.py", "constexprs": {"BLOCK": 64},
            "signature": "*fp32:16,tensordesc<fp16[128, 64]>:16,i32,tensordesc<bf16[64, 64]>",
            "params": SIG, "num_warps": 4, "num_ctas": 1, "num_stages": 3, "target": "cuda:90", "arch": "sm_90a"}


def _parse():
    names = ["out", "a_desc", "n", "b_desc", "BLOCK"]
    return json.dumps({"functions": {"k": {"params": [
        {"name": n, "annotation": {"_t": "Attribute", "attr": "constexpr"} if n == "BLOCK" else None,
         "default": None} for n in names]}}}).encode()


def _ttgir(tma=None):
    attrs = '"ttg.num-warps" = 4 : i32, ttg.shared = 1024 : i32'
    if tma is not None:
        attrs += ', "{}" = "{}"'.format(MODULE_ATTR, encode_attr(tma).replace('"', '\\"'))
    return f"module attributes {{{attrs}}} {{\n  tt.func public @k() {{\n    tt.return\n  }}\n}}\n".encode()


def _doc(tma=None):
    blobs = {s: f"{s} output".encode() for s in ("ttir", "llir", "ptx", "cubin")}
    blobs.update(parse=_parse(), ttgir=_ttgir(tma))
    return build_metadata(_variant(), blobs, "k_v.cubin")


POINTER_FORM = [
    {"name": "out", "kind": "pointer", "dtype": "fp32", "divisibility": 16},
    {"name": "a_desc", "kind": "pointer", "dtype": "fp16", "divisibility": 16},
    {"name": "a_desc.shape0", "kind": "scalar", "dtype": "i32", "divisibility": 16},
    {"name": "a_desc.shape1", "kind": "scalar", "dtype": "i32", "divisibility": 16},
    {"name": "a_desc.stride0", "kind": "scalar", "dtype": "i64", "divisibility": 1},
    {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1},
    {"name": "b_desc", "kind": "pointer", "dtype": "bf16", "divisibility": 16},
    {"name": "b_desc.shape0", "kind": "scalar", "dtype": "i32", "divisibility": 1},
    {"name": "b_desc.shape1", "kind": "scalar", "dtype": "i32", "divisibility": 1},
    {"name": "b_desc.stride0", "kind": "scalar", "dtype": "i64", "divisibility": 1},
    {"name": "BLOCK", "kind": "constexpr", "value": 64},
]
DESCRIPTORS = [{"name": "a_desc", "dtype": "fp16", "block_shape": [128, 64]},
               {"name": "b_desc", "dtype": "bf16", "block_shape": [64, 64]}]


def test_without_the_attribute_the_metadata_is_the_pointer_form():
    doc = _doc()
    assert doc["params"] == POINTER_FORM and doc["descriptors"] == DESCRIPTORS
    assert doc["shared"] == 1024 and doc["schema"] == "ttbuild.kernel/1"
    same = _doc([None, None])  # every descriptor in pointer form: the same document (but the TTGIR's hash)
    assert same.pop("hashes")["ttgir"] != doc.pop("hashes")["ttgir"] and same == doc


def test_a_tma_descriptor_gets_its_tensormap_parameter_and_record():
    doc = _doc([None, {"swizzle": 128, "box": [64, 64]}])
    tensormap = {"name": "b_desc.tensormap", "kind": "scalar", "dtype": "u64", "divisibility": 1}
    assert doc["params"] == POINTER_FORM[:6] + [tensormap] + POINTER_FORM[6:]
    assert doc["descriptors"] == [DESCRIPTORS[0], {**DESCRIPTORS[1], "tma": {"swizzle": 128, "box": [64, 64]}}]
    both = _doc([{"swizzle": 0, "box": [128, 64]}, {"swizzle": 64, "box": [64, 32]}])
    assert [p["name"] for p in both["params"]][:3] == ["out", "a_desc.tensormap", "a_desc"]
    assert [d["tma"] for d in both["descriptors"]] == [{"swizzle": 0, "box": [128, 64]},
                                                       {"swizzle": 64, "box": [64, 32]}]
    # everything else is as without TMA
    plain = _doc()
    assert {k: v for k, v in both.items() if k not in ("params", "descriptors", "hashes")} == \
        {k: v for k, v in plain.items() if k not in ("params", "descriptors", "hashes")}


def test_the_runtime_reads_the_tma_metadata(tmp_path):
    doc = _doc([None, {"swizzle": 128, "box": [64, 64]}])
    (tmp_path / "k_v.cubin").write_bytes(b"cubin output")
    v = parse_variant(doc, str(tmp_path / "k_v.json"))
    assert [p.name for p in v.launch_params][6:8] == ["b_desc.tensormap", "b_desc"]
    assert v.launch_params[6].dtype == "u64" and v.descriptors[1]["tma"] == {"swizzle": 128, "box": [64, 64]}


@pytest.mark.parametrize("tma, why", [
    ([None], "has 1 entries for 2 tensordesc parameters"),
    ([None, {"swizzle": 16, "box": [64, 64]}], "not a swizzle of 0/32/64/128 bytes"),
    ([None, {"swizzle": 128, "box": [64, 128]}], "a box within the block"),
    ([None, {"swizzle": 128, "box": [64]}], "a box within the block"),
])
def test_an_attribute_that_does_not_fit_the_signature_is_an_error(tma, why):
    with pytest.raises(MetaError, match=why):
        _doc(tma)


def test_a_malformed_attribute_is_an_error():
    blobs = {s: b"x" for s in ("ttir", "llir", "ptx", "cubin")}
    text = f'module attributes {{"{MODULE_ATTR}" = "bogus"}} {{\n}}\n'.encode()
    blobs.update(parse=_parse(), ttgir=text)
    with pytest.raises(MetaError, match=f"TTGIR module attribute {MODULE_ATTR} of k_v"):
        build_metadata(_variant(), blobs, "k_v.cubin")


def test_build_params_checks_the_entry_count():
    with pytest.raises(MetaError, match="3 TMA entries"):
        build_params(_variant(), json.loads(_parse()), [None, None, None])
