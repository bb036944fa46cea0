"""Action keys, content addresses and tool versions of ttbuild.cache.keys."""

import hashlib
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttbuild import toolchain
from ttbuild.cache import keys
from ttbuild.cache.keys import action_key, canonical_action, digest, fast_hash, is_key
from ttbuild.cache.stage import module_action_key
from ttbuild.errors import ToolError

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)
options_st = st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=6)
hashes_st = st.dictionaries(st.sampled_from(["source", "json", "ttir", "llir", "ptx"]),
                            st.binary(max_size=16).map(digest), max_size=3)
tools_st = st.dictionaries(st.sampled_from(["ttbuild", "llvm", "ptxas"]), st.text(max_size=8), max_size=3)


def test_digest_is_sha256_and_fast_hash_is_xxh3_128():
    import xxhash

    data = b"ld.global.v4.b32"
    assert digest(data) == hashlib.sha256(data).hexdigest()
    assert fast_hash(data) == xxhash.xxh3_128_hexdigest(data)
    assert is_key(digest(data)) and not is_key(fast_hash(data))


def test_key_is_sha256_of_canonical_json():
    args = ("ptx", 3, {"llir": digest(b"x")}, {"arch": "sm_90a", "ptx_version": 90}, {"llvm": "22.1.0"})
    expect = json.dumps({"schema": keys.ACTION_SCHEMA, "stage": "ptx", "stage_version": 3,
                         "inputs": args[2], "options": args[3], "tools": args[4]},
                        sort_keys=True, separators=(",", ":")).encode()
    assert canonical_action(*args) == expect
    assert action_key(*args) == hashlib.sha256(expect).hexdigest()


@given(stage=st.sampled_from(["parse", "ttir", "cubin"]), version=st.integers(0, 99),
       inputs=hashes_st, options=options_st, tools=tools_st)
def test_key_ignores_mapping_order(stage, version, inputs, options, tools):
    rev = lambda d: dict(reversed(list(d.items())))
    k = action_key(stage, version, inputs, options, tools)
    assert is_key(k)
    assert action_key(stage, version, rev(inputs), rev(options), rev(tools)) == k


@given(a=options_st, b=options_st)
def test_different_options_give_different_keys(a, b):
    ka = action_key("ttgir", 1, {}, a, {})
    kb = action_key("ttgir", 1, {}, b, {})
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (ka == kb) == same


def test_every_field_moves_the_key():
    base = ("cubin", 1, {"ptx": digest(b"p")}, {"arch": "sm_90a"}, {"ptxas": "V13.0.88"})
    variants = [
        ("ptx",) + base[1:],
        (base[0], 2) + base[2:],
        base[:2] + ({"ptx": digest(b"q")},) + base[3:],
        base[:2] + ({"PTX": digest(b"p")},) + base[3:],
        base[:3] + ({"arch": "sm_90"},) + base[4:],
        base[:3] + ({"arch": "sm_90a", "ptxas_options": []},) + base[4:],
        base[:4] + ({"ptxas": "V13.0.89"},),
        base[:4] + ({},),
    ]
    got = {action_key(*v) for v in variants} | {action_key(*base)}
    assert len(got) == len(variants) + 1


@pytest.mark.parametrize("bad, exc", [({"x": float("nan")}, ValueError), ({"x": float("inf")}, ValueError),
                                      ({"x": {1, 2}}, TypeError), ({"x": {1: 2}}, TypeError),
                                      ({"x": b"bytes"}, TypeError), ({"x": object()}, TypeError)])
def test_non_json_options_are_rejected(bad, exc):
    with pytest.raises(exc, match="action option"):
        action_key("llir", 1, {}, bad, {})


def test_stage_version_must_be_int():
    with pytest.raises(TypeError):
        action_key("llir", "1", {}, {}, {})
    with pytest.raises(TypeError):
        action_key("llir", True, {}, {}, {})


def test_stage_tools_cover_every_stage():
    from ttbuild.stages import STAGES

    assert set(keys.STAGE_TOOLS) == set(STAGES)
    for stage in STAGES:
        assert "ttbuild" in keys.STAGE_TOOLS[stage]


def test_ptxas_version_from_the_wheel_and_probed_once(monkeypatch):
    monkeypatch.delenv("TTBUILD_PTXAS", raising=False)
    try:
        path = toolchain.ptxas_path()
    except ToolError:
        pytest.skip("nvidia-cuda-nvcc wheel (ptxas) not installed")
    assert "nvidia" in path.parts and path.name == "ptxas"
    toolchain.ptxas_version.cache_clear()
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(toolchain.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    v1 = keys.tool_versions("ptxas")["ptxas"]
    v2 = keys.tool_versions_for("cubin")["ptxas"]
    assert re.match(r"V\d+\.\d+\.\d+", v1) and v1 == v2
    assert len(calls) == 1


def _fake_ptxas(path, release):
    path.write_text(f"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                    f"echo 'Cuda compilation tools, release 12.4, {release}'\n"
                    f"echo 'Build cuda_12.4.r12.4/compiler.0_0'\n")
    path.chmod(0o755)
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="shell-script stand-in for ptxas")
def test_cubin_key_names_the_ptxas_that_TTBUILD_PTXAS_selects(tmp_path, monkeypatch):
    # The cubin stage runs toolchain.ptxas_path(), which honours TTBUILD_PTXAS: the cache key
    # must name that ptxas too, or a cached cubin of one ptxas would answer for another.
    class Cubin:
        VERSION = 1

    inputs, opts = {"ptx": b".version 9.0"}, {"arch": "sm_90a", "ptxas_options": []}
    monkeypatch.setenv("TTBUILD_PTXAS", str(_fake_ptxas(tmp_path / "ptxas-a", "V12.4.131")))
    key_a = module_action_key("cubin", Cubin, inputs, opts)
    assert keys.tool_versions("ptxas")["ptxas"].startswith("V12.4.131")
    monkeypatch.setenv("TTBUILD_PTXAS", str(_fake_ptxas(tmp_path / "ptxas-b", "V12.8.93")))
    key_b = module_action_key("cubin", Cubin, inputs, opts)
    assert key_a != key_b
    assert toolchain.ptxas_path() == tmp_path / "ptxas-b"
    monkeypatch.setenv("TTBUILD_PTXAS", str(tmp_path / "ptxas-a"))
    assert module_action_key("cubin", Cubin, inputs, opts) == key_a


def test_llvm_version_matches_llvmlite():
    llvm = pytest.importorskip("llvmlite.binding")
    v = keys.tool_versions("llvm")["llvm"]
    assert v.startswith(".".join(map(str, llvm.llvm_version_info)) + "/llvmlite-")


def test_unknown_tool_is_a_key_error():
    with pytest.raises(KeyError, match="unknown tool"):
        keys.tool_versions("nvcc")


def test_importing_the_cache_pulls_in_no_compiler():
    code = ("import sys, ttbuild.cache; "
            "print(sorted(m for m in ('llvmlite', 'mlir', 'doit', 'cuda') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(sys.platform == "win32", reason="shell-script wrapper of ptxas")
def test_a_ptxas_wrapper_that_answers_version_like_the_real_one_gets_another_key(tmp_path, monkeypatch):
    # The wrapper prints the real `--version` but compiles at -O0: the version text alone keyed its
    # cubins as the real ptxas's. The key names the binary's digest too (toolchain.ptxas_id).
    monkeypatch.delenv("TTBUILD_PTXAS", raising=False)
    try:
        real = toolchain.ptxas_path()
    except ToolError:
        pytest.skip("nvidia-cuda-nvcc wheel (ptxas) not installed")
    from ttbuild.compiler import stage_cache_key

    wrapper = tmp_path / "ptxas"
    wrapper.write_text(f'#!/bin/sh\ncase "$1" in --version) exec "{real}" --version ;; esac\nexec "{real}" -O0 "$@"\n')
    wrapper.chmod(0o755)
    inputs, opts = {"ptx": b".version 9.0\n.target sm_90a\n.address_size 64\n"}, {"arch": "sm_90a", "ptxas_options": []}
    normal = stage_cache_key("cubin", inputs, opts)
    monkeypatch.setenv("TTBUILD_PTXAS", str(wrapper))
    assert toolchain.ptxas_version() == toolchain.ptxas_version(real)  # the wrapper passes for the real one...
    assert stage_cache_key("cubin", inputs, opts) != normal  # ...but its cubins are keyed apart
    assert keys.tool_versions_for("cubin")["ptxas"].endswith(f"sha256:{toolchain.file_digest(wrapper)}")
    monkeypatch.delenv("TTBUILD_PTXAS")
    assert stage_cache_key("cubin", inputs, opts) == normal


def test_libdevice_keys_the_llir_stage_by_its_digest(tmp_path, monkeypatch):
    # libdevice comes from nvidia-nvvm (cuda-pathfinder locates it), which is not pinned: another
    # release must not answer for the linked LLIR of this one.
    assert "libdevice" in keys.STAGE_TOOLS["llir"]
    inputs, opts = {"ttgir": b"module {}"}, {"target": "cuda:90", "enable_fp_fusion": True, "debug": False}
    from ttbuild.compiler import stage_cache_key

    before = stage_cache_key("llir", inputs, opts)
    other = tmp_path / "libdevice.10.bc"
    other.write_bytes(b"BC\xc0\xde another libdevice")
    monkeypatch.setattr(toolchain, "_found_libdevice", lambda: str(other))
    assert keys.tool_versions("libdevice")["libdevice"] == f"sha256:{hashlib.sha256(other.read_bytes()).hexdigest()}"
    assert stage_cache_key("llir", inputs, opts) != before
    assert toolchain.libdevice_path() == other
