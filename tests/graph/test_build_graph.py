"""Stage keys, task generation, the xxhash checker, atomic writes and the metadata document."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from ttbuild.fileio import atomic_write, file_digest
from ttbuild.graph import chain, doit_config, generate_tasks, load_variants, stage_key
from ttbuild.graph.state import XXHashChecker
from ttbuild.irattrs import module_attrs, module_int

REPO = Path(__file__).resolve().parents[2]
VERSIONS = {s: 1 for s in ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10)


def test_stage_key_is_the_documented_xxh3_64():
    opts = {"num_warps": 4, "target": "cuda:90"}
    want = xxhash.xxh3_64_hexdigest(b'abc\0ttgir\x007\0{"num_warps":4,"target":"cuda:90"}')
    assert stage_key("abc", "ttgir", 7, opts) == want


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_stage_key_ignores_option_order(opts):
    reordered = dict(reversed(list(opts.items())))
    assert stage_key("p", "ttir", 1, opts) == stage_key("p", "ttir", 1, reordered)


@given(st.integers(0, 1000), st.integers(0, 1000))
def test_stage_key_changes_with_version(a, b):
    assert (stage_key("p", "llir", a, {}) == stage_key("p", "llir", b, {})) == (a == b)


def test_variants_differing_in_num_warps_share_parse_and_ttir():
    variants = {v.name: v for v in load_variants(REPO / "kernels")}
    a = chain(variants["add_kernel_fp32"], versions=VERSIONS)
    b = chain(variants["add_kernel_fp32_w8"], versions=VERSIONS)
    c = chain(variants["add_kernel_fp16"], versions=VERSIONS)
    assert [n.key for n in a[:2]] == [n.key for n in b[:2]]
    assert all(x.key != y.key for x, y in zip(a[2:], b[2:]))
    assert a[0].key == c[0].key and a[1].key != c[1].key


def _tasks(root: Path, fake_root):
    sys.path.insert(0, str(fake_root))
    try:
        return list(generate_tasks(root / "kernels", root / "artifacts", "fake_stages"))
    finally:
        sys.path.remove(str(fake_root))


def test_one_task_per_unique_stage_key(tmp_path, fake_stage_root):
    import shutil

    shutil.copytree(REPO / "kernels", tmp_path / "kernels")
    tasks = [t for t in _tasks(tmp_path, fake_stage_root) if t.get("name")]
    names = [f"{t['basename']}:{t['name']}" for t in tasks]
    assert len(names) == len(set(names))
    variants = load_variants(tmp_path / "kernels")
    # Every (stage, key) of every variant appears, and nothing else.
    expected = {f"{n.stage}:{n.key}" for v in variants for n in chain(v, versions=VERSIONS)}
    expected |= {f"meta:{v.name}" for v in variants if v.until == "cubin"}
    assert set(names) == expected
    by_name = dict(zip(names, tasks))
    for v in variants:
        nodes = chain(v, versions=VERSIONS)
        for parent, node in zip(nodes, nodes[1:]):
            task = by_name[f"{node.stage}:{node.key}"]
            assert task["file_dep"] == by_name[f"{parent.stage}:{parent.key}"]["targets"][:1]
            assert v.name in task["doc"]


def test_until_stops_the_chain_and_skips_meta(tmp_path, fake_stage_root):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.py").write_text("import triton\n")
    (tmp_path / "kernels" / "variants.toml").write_text(
        '[[variant]]\nname = "k1"\nfile = "k.py"\nkernel = "k"\nsignature = "i32"\nuntil = "ttgir"\n')
    names = {f"{t['basename']}:{t['name']}" for t in _tasks(tmp_path, fake_stage_root) if t.get("name")}
    assert {n.split(":")[0] for n in names} == {"parse", "ttir", "ttgir"}


def test_doit_config():
    cfg = doit_config(REPO / "artifacts")
    assert cfg["backend"] == "sqlite3" and cfg["continue"] is True
    assert cfg["check_file_uptodate"] is XXHashChecker
    assert cfg["dep_file"] == os.path.join(str(REPO / "artifacts"), ".doit.db")


def test_checker_early_cutoff(tmp_path):
    path = tmp_path / "out.ttir"
    path.write_bytes(b"module A")
    checker = XXHashChecker()
    state = checker.get_state(str(path), None)
    assert checker.get_state(str(path), state) is None  # unchanged: nothing to save
    # Same bytes, new file (new inode and mtime): not modified.
    tmp = tmp_path / "t"
    tmp.write_bytes(b"module A")
    os.replace(tmp, path)
    os.utime(path, ns=(1, 1))
    assert not checker.check_modified(str(path), os.stat(path), state)
    # Same size, other bytes: modified, even with the saved mtime put back.
    path.write_bytes(b"module B")
    os.utime(path, ns=(state[0], state[0]))
    assert checker.check_modified(str(path), os.stat(path), state)
    assert checker.get_state(str(path), state)[3] == file_digest(path) == xxhash.xxh3_64_hexdigest(b"module B")


def test_atomic_write_links_a_file_with_the_same_bytes_and_copies_otherwise(tmp_path):
    """`same_as` names a file that should hold the bytes: with them, the target becomes a hard
    link (no new file); with other bytes, or none there, the bytes are written as usual. No temp
    file is left either way."""
    src = tmp_path / "stage" / "k.cubin"
    src.parent.mkdir()
    src.write_bytes(b"cubin bytes")
    linked = tmp_path / "lib" / "v.cubin"
    assert atomic_write(linked, b"cubin bytes", same_as=src)
    assert linked.stat().st_ino == src.stat().st_ino and linked.read_bytes() == b"cubin bytes"
    assert not atomic_write(linked, b"cubin bytes", same_as=src)  # already there: untouched
    other = tmp_path / "lib" / "w.cubin"
    assert atomic_write(other, b"other bytes", same_as=src)  # the source differs: a copy
    assert other.stat().st_ino != src.stat().st_ino and other.read_bytes() == b"other bytes"
    missing = tmp_path / "lib" / "x.cubin"
    assert atomic_write(missing, b"x", same_as=tmp_path / "nowhere")
    assert missing.read_bytes() == b"x"
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == ["v.cubin", "w.cubin", "x.cubin"]
    assert src.read_bytes() == b"cubin bytes"


def test_atomic_write_keeps_identical_files_and_cleans_up(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "x.ptx"
    assert atomic_write(path, b"one")
    st1 = os.stat(path)
    assert not atomic_write(path, b"one")
    assert os.stat(path).st_ino == st1.st_ino
    assert atomic_write(path, b"two") and path.read_bytes() == b"two"

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(path, b"three")
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.ptx"]


def test_ttgir_module_attributes_read_from_generic_form():
    text = '"builtin.module"() ({\n}) {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 8 : i32, ' \
           '"ttg.shared" = 4096 : i32, "ttg.target" = "cuda:90"} : () -> ()'
    assert module_int(text, "ttg.num-warps") == 8
    assert module_int(text, "ttg.shared") == 4096
    assert module_int(text, "ttg.missing") is None
    assert module_attrs(text)["ttg.target"] == "cuda:90"


def test_module_attributes_ignore_an_op_attribute_of_the_same_name():
    # An op inside the body carrying `ttg.shared` must not answer for the module's own.
    text = ('"builtin.module"() ({\n  "x.op"() {"ttg.shared" = 7 : i32} : () -> ()\n'
            '}) {"ttg.num-warps" = 4 : i32, ttg.shared = 128 : i32} : () -> () loc(unknown)\n')
    assert module_attrs(text) == {"ttg.num-warps": 4, "ttg.shared": 128}
    custom = 'module attributes {"ttg.num-warps" = 2 : i32, ttg.target = "cuda:80"} {\n}\n'
    assert module_attrs(custom) == {"ttg.num-warps": 2, "ttg.target": "cuda:80"}
    assert module_attrs('"builtin.module"() ({\n}) : () -> ()') == {}


def test_python_m_ttbuild_lists_the_same_tasks(fresh_project):
    proj = fresh_project("real")
    env = dict(os.environ, PYTHONPATH=proj.pythonpath)
    ours = subprocess.run([sys.executable, "-m", "ttbuild", "doit", "list", "--all", "-q"], cwd=proj.root,
                          env=env, capture_output=True, text=True, timeout=300)
    theirs = subprocess.run([sys.executable, "-m", "doit", "list", "--all", "-q"], cwd=proj.root,
                            env=env, capture_output=True, text=True, timeout=300)
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert ours.stdout == theirs.stdout and "meta:add_kernel_fp32" in ours.stdout


def test_meta_config_is_the_canonical_json_of_its_parts():
    """The meta task's up-to-date text, joined from pre-encoded parts, is exactly the canonical
    JSON of the whole (what `ttbuild explain` and every saved state compare against)."""
    import ttbuild
    from ttbuild.canonical import canonical_json
    from ttbuild.codedigest import module_digest
    from ttbuild.graph.tasks import meta_config, meta_config_parts

    versions, codes = {"parse": 3, "ttir": 3}, {"parse": "ab12", "ttir": "cd34"}
    doc = {"name": "k_é", "constexprs": {"B": 1024, "s": "x"}, "params": [["pointer", "fp32", 16]]}
    whole = canonical_json({"variant": doc, "ttbuild": ttbuild.__version__, "versions": versions,
                            "code": codes, "meta_code": module_digest("ttbuild.graph.meta")})
    assert meta_config(meta_config_parts(versions, codes), doc) == whole


def test_stage_config_is_the_canonical_json_of_its_parts():
    from ttbuild.canonical import canonical_json
    from ttbuild.graph.keys import chain
    from ttbuild.graph.tasks import stage_config
    from ttbuild.graph.variants import load_variants
    from ttbuild.stages import DEFAULT

    v = load_variants(Path(__file__).parents[2] / "kernels")[0]
    versions = DEFAULT.versions
    for node in chain(v):
        whole = canonical_json({"stage": node.stage, "version": versions[node.stage], "code": "c0de",
                                "options": node.options})
        assert stage_config(node, versions[node.stage], "c0de") == whole
