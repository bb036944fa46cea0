"""The metadata JSON and lib/ cubins of a real build: schema fields, stage hashes, and what the runtime reads."""

from __future__ import annotations

import json

import pytest
import xxhash

from ttbuild.graph import chain, load_variants
from ttbuild.graph.meta import SCHEMA
from ttbuild.graph.tasks import output_paths

STAGES = ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")


@pytest.fixture(scope="module")
def built(built_project_factory):
    return built_project_factory("real")


def _docs(proj):
    """Metadata of every variant built through cubin (an `until` variant has no lib/ entry)."""
    return {v.name: (v, json.loads((proj.artifacts / "lib" / f"{v.name}.json").read_text()))
            for v in load_variants(proj.kernels) if v.until == "cubin"}


def test_until_variants_have_no_lib_entry(fresh_project):
    """A variant that stops early (`until = "ttgir"`) gets its stage outputs but no lib/ entry,
    next to one built through cubin."""
    proj = fresh_project("real")
    vt = proj.kernels / "variants.toml"
    blocks = vt.read_text().split("[[variant]]")
    keep = [b for b in blocks if 'name = "matmul_fp16_leaky_relu_64x64x32_w4_s4"' in b or 'name = "dropout_1024"' in b]
    keep = [b.rstrip() + ('\nuntil = "ttgir"\n' if "matmul" in b else "\n") for b in keep]
    vt.write_text("".join("[[variant]]" + b for b in keep))
    run = proj.doit()
    assert run.rc == 0, run.text[-3000:]
    partial = [v for v in load_variants(proj.kernels) if v.until != "cubin"]
    assert [v.name for v in partial] == ["matmul_fp16_leaky_relu_64x64x32_w4_s4"]
    for v in partial:
        assert not (proj.artifacts / "lib" / f"{v.name}.json").exists(), v.name
        assert not (proj.artifacts / "lib" / f"{v.name}.cubin").exists(), v.name
    assert (proj.artifacts / "lib" / "dropout_1024.cubin").exists()
    assert list((proj.artifacts / "ttgir").rglob("matmul_kernel.ttgir"))


def test_every_variant_has_metadata_and_cubin(built):
    docs = _docs(built)
    names = {p.stem for p in (built.artifacts / "lib").glob("*.json")}
    assert names == set(docs)
    for name, (v, doc) in docs.items():
        assert doc["schema"] == SCHEMA
        assert (doc["variant"], doc["kernel"], doc["entry"], doc["file"]) == (name, v.kernel, v.kernel, v.file)
        assert doc["cubin"] == f"{name}.cubin"
        assert doc["signature"] == v.signature and doc["constexprs"] == v.constexprs
        assert (doc["num_warps"], doc["num_ctas"], doc["num_stages"]) == (v.num_warps, v.num_ctas, v.num_stages)
        assert (doc["target"], doc["arch"]) == (v.target, v.arch)
        assert isinstance(doc["shared"], int) and doc["shared"] >= 0
        assert set(doc["hashes"]) == set(STAGES)
        # Python parameter order; the non-constexpr ones follow the signature.
        runtime = [p for p in doc["params"] if p["kind"] != "constexpr"]
        assert [(p["kind"], p["dtype"], p["divisibility"]) for p in runtime] == \
               [(p.kind, p.dtype, p.divisibility) for p in v.params]
        assert {p["name"]: p["value"] for p in doc["params"] if p["kind"] == "constexpr"} == v.constexprs


def test_hashes_are_the_stage_outputs(built):
    for name, (v, doc) in _docs(built).items():
        for node in chain(v):
            outs = output_paths(built.artifacts, node.stage, node.key, v.kernel)
            path = outs["json"] if node.stage == "parse" else outs[node.stage]
            data = open(path, "rb").read()
            assert doc["hashes"][node.stage] == xxhash.xxh3_64_hexdigest(data), (name, node.stage)
            if node.stage == "ttir":  # the params are the ABI the ttir stage recorded, copied
                assert json.loads(open(outs["abi"], "rb").read())["params"] == doc["params"], name
            if node.stage == "cubin":
                assert (built.artifacts / "lib" / doc["cubin"]).read_bytes() == data
            if node.stage == "ttgir":
                assert f'"ttg.num-warps" = {doc["num_warps"]} : i32' in data.decode()


def test_no_absolute_paths_or_temp_files_in_artifacts(built):
    root = str(built.root).encode()
    for path in built.artifacts.rglob("*"):
        assert not path.name.startswith(".tmp-"), path
        if path.is_file() and path.name != ".doit.db":
            assert root not in path.read_bytes(), f"{path} holds an absolute path"


def test_runtime_reads_the_library(built):
    metadata = pytest.importorskip("ttbuild.runtime.metadata")
    variants = metadata.read_library(str(built.artifacts / "lib"))
    assert {v.variant for v in variants} == set(_docs(built))


def test_two_clean_builds_in_different_places_are_byte_identical(built, fresh_project):
    other = fresh_project("real")
    run = other.doit()
    assert run.rc == 0, run.text

    def files(root):
        return {p.relative_to(root).as_posix(): p.read_bytes()
                for p in root.rglob("*") if p.is_file() and p.name != ".doit.db"}

    mine, theirs = files(built.artifacts), files(other.artifacts)
    assert set(mine) == set(theirs)
    assert [k for k in mine if mine[k] != theirs[k]] == []
