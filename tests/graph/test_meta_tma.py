"""The metadata of descriptor parameters: the params the ttir stage recorded (a `<name>.tensormap` u64 before the base where it takes one), and a "tma" record in `descriptors` where the TTGIR stage chose TMA (module attribute `ttb.tma`), which must agree with the params."""

from __future__ import annotations

import pytest

from ttbuild.frontend import abi
from ttbuild.graph.meta import SCHEMA, MetaError, build_metadata
from ttbuild.runtime.metadata import parse_variant
from ttbuild.signature import parse_entry
from ttbuild.tma import MODULE_ATTR, encode_attr

SIG = {"out": "*fp32:16", "a_desc": "tensordesc<fp16[128, 64]>:16", "n": "i32", "b_desc": "tensordesc<bf16[64, 64]>"}


def _variant():
    return {"name": "k_v", "kernel": "k", "file": "k.py", "constexprs": {"BLOCK": 64},
            "signature": ",".join(SIG.values()), "num_warps": 4, "num_ctas": 1, "num_stages": 3,
            "target": "cuda:90", "arch": "sm_90a"}


def _abi(tensormaps=()):
    """The ttir stage's ABI record of k(out, a_desc, n, b_desc, BLOCK), the descriptors named in
    `tensormaps` taking one."""
    params = [e for n, t in SIG.items() for e in abi.runtime_params(n, parse_entry(t), n in tensormaps)]
    descs = [abi.descriptor(n, parse_entry(t), n in tensormaps) for n, t in SIG.items() if t.startswith("tensordesc")]
    return abi.record(params + [abi.constexpr_param("BLOCK", 64, True)], descs)


def _ttgir(tma=None):
    attrs = '"ttg.num-warps" = 4 : i32, ttg.shared = 1024 : i32'
    if tma is not None:
        attrs += ', "{}" = "{}"'.format(MODULE_ATTR, encode_attr(tma).replace('"', '\\"'))
    return f"module attributes {{{attrs}}} {{\n  tt.func public @k() {{\n    tt.return\n  }}\n}}\n".encode()


def _doc(tma=None, tensormaps=None):
    blobs = {s: f"{s} output".encode() for s in ("parse", "ttir", "llir", "ptx", "cubin")}
    if tensormaps is None:  # the ABI the TTGIR's choice was made for
        tensormaps = [d for d, e in zip(("a_desc", "b_desc"), tma or ()) if e is not None]
    blobs.update(abi=_abi(tensormaps), ttgir=_ttgir(tma))
    return build_metadata(_variant(), blobs, "k_v.cubin")


def _entry(name, kind, dtype, div, origin=None, part=None):
    return {"name": name, "kind": kind, "dtype": dtype, "divisibility": div, "origin": origin or name,
            **({"part": part} if part else {})}


POINTER_FORM = [
    _entry("out", "pointer", "fp32", 16),
    _entry("a_desc", "pointer", "fp16", 16, "a_desc", "base"),
    _entry("a_desc.shape0", "scalar", "i32", 16, "a_desc", "shape"),
    _entry("a_desc.shape1", "scalar", "i32", 16, "a_desc", "shape"),
    _entry("a_desc.stride0", "scalar", "i64", 1, "a_desc", "stride"),
    _entry("n", "scalar", "i32", 1),
    _entry("b_desc", "pointer", "bf16", 16, "b_desc", "base"),
    _entry("b_desc.shape0", "scalar", "i32", 1, "b_desc", "shape"),
    _entry("b_desc.shape1", "scalar", "i32", 1, "b_desc", "shape"),
    _entry("b_desc.stride0", "scalar", "i64", 1, "b_desc", "stride"),
    {"name": "BLOCK", "kind": "constexpr", "value": 64, "origin": "BLOCK"},
]
DESCRIPTORS = [{"name": "a_desc", "dtype": "fp16", "block_shape": [128, 64]},
               {"name": "b_desc", "dtype": "bf16", "block_shape": [64, 64]}]


def test_without_the_attribute_the_metadata_is_the_pointer_form():
    doc = _doc()
    assert doc["params"] == POINTER_FORM and doc["descriptors"] == DESCRIPTORS
    assert doc["shared"] == 1024 and doc["schema"] == SCHEMA
    same = _doc([None, None])  # every descriptor in pointer form: the same document (but the TTGIR's hash)
    assert same.pop("hashes")["ttgir"] != doc.pop("hashes")["ttgir"] and same == doc


def test_a_tma_descriptor_gets_its_tensormap_parameter_and_record():
    doc = _doc([None, {"swizzle": 128, "box": [64, 64]}])
    tensormap = _entry("b_desc.tensormap", "scalar", "u64", 1, "b_desc", "tensormap")
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
    blobs = {s: b"x" for s in ("parse", "ttir", "llir", "ptx", "cubin")}
    text = f'module attributes {{"{MODULE_ATTR}" = "bogus"}} {{\n}}\n'.encode()
    blobs.update(abi=_abi(), ttgir=text)
    with pytest.raises(MetaError, match=f"TTGIR module attribute {MODULE_ATTR} of k_v"):
        build_metadata(_variant(), blobs, "k_v.cubin")


@pytest.mark.parametrize("tma, tensormaps, why", [
    ([None, {"swizzle": 128, "box": [64, 64]}], [], "'b_desc': the TTGIR loads it through TMA but its kernel "
                                                    "parameters lack a tensormap"),
    ([None, None], ["a_desc"], "'a_desc': the TTGIR does not load it through TMA but its kernel parameters have"),
])
def test_a_tma_choice_the_abi_does_not_take_is_an_error(tma, tensormaps, why):
    with pytest.raises(MetaError, match=why):
        _doc(tma, tensormaps)


@pytest.mark.parametrize("record, why", [
    (None, "ABI record of k_v is missing"),
    (b"{", "ABI record of k_v is not JSON"),
    (b'{"params": {}}', "ABI record of k_v is not"),
])
def test_a_missing_or_malformed_abi_record_is_an_error(record, why):
    blobs = {s: b"x" for s in ("parse", "ttir", "llir", "ptx", "cubin")}
    blobs["ttgir"] = _ttgir()
    if record is not None:
        blobs["abi"] = record
    with pytest.raises(MetaError, match=why):
        build_metadata(_variant(), blobs, "k_v.cubin")
