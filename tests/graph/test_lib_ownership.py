"""The build owns lib/ (issue 14 item 6, issue 15 "libraries that change"): a variant removed from variants.toml disappears from lib/ on the next build, a failed variant's previous build is removed unless --keep-previous, a shard build leaves other shards' files alone."""

from __future__ import annotations

import re

import pytest


@pytest.fixture
def proj(tmp_path, new_project):
    p = new_project(tmp_path / "p")
    p.env = {"TTBUILD_CACHE": "off"}
    return p


def _split(toml: str) -> tuple[str, list[str]]:
    """(header, rows): each row starts at a line `[[variant]]` (comments may mention it too)."""
    parts = re.split(r"(?m)^(?=\[\[variant\]\])", toml)
    return parts[0], parts[1:]


def _lib(proj) -> set[str]:
    return {p.name for p in (proj.artifacts / "lib").iterdir()}


def test_a_removed_variant_leaves_lib(proj):
    assert proj.ttbuild("build").rc == 0
    before = _lib(proj)
    vt = proj.kernels / "variants.toml"
    text = vt.read_text()
    header, rows = _split(text)
    gone = re.search(r'name = "([^"]+)"', rows[0]).group(1)
    vt.write_text(header + "".join(rows[1:]))
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text
    after = _lib(proj)
    assert {f"{gone}.json", f"{gone}.cubin"} <= before
    assert not {f"{gone}.json", f"{gone}.cubin"} & after, after
    assert after == before - {f"{gone}.json", f"{gone}.cubin"}
    assert "removed 2 file(s) from lib/" in run.out


def test_stray_files_go_but_a_noop_build_removes_nothing(proj):
    assert proj.ttbuild("build").rc == 0
    (proj.artifacts / "lib" / "old_name.json").write_text("{}")
    (proj.artifacts / "lib" / "old_name.cubin").write_bytes(b"x")
    run = proj.ttbuild("build")
    assert run.rc == 0 and run.ran == set()
    assert "old_name.json" not in _lib(proj) and "old_name.cubin" not in _lib(proj)
    again = proj.ttbuild("build")
    assert "removed" not in again.out


def _break(proj, kernel_file: str) -> None:
    path = proj.kernels / kernel_file
    path.write_text(path.read_text() + "\n\n@triton.jit\ndef _broken(:\n    pass\n")


def test_a_failed_variant_loses_its_previous_build_unless_asked(proj, tmp_path, new_project):
    assert proj.ttbuild("build").rc == 0
    names = {p.stem for p in (proj.artifacts / "lib").glob("*.json")}
    victims = {n for n in names if n.startswith("add_kernel")}
    assert victims
    keep = new_project(tmp_path / "keep", source=proj.root)
    keep.env = proj.env
    for p in (proj, keep):
        _break(p, "vector_add.py")
    run = proj.ttbuild("build", "--continue")
    assert run.rc != 0
    left = {p.stem for p in (proj.artifacts / "lib").glob("*.json")}
    assert not victims & left and (names - victims) <= left, left
    run = keep.ttbuild("build", "--continue", "--keep-previous")
    assert run.rc != 0
    assert victims <= {p.stem for p in (keep.artifacts / "lib").glob("*.json")}


def test_a_shard_leaves_other_shards_files(proj):
    assert proj.ttbuild("build").rc == 0
    before = _lib(proj)
    run = proj.ttbuild("build", "--shard", "1/2")
    assert run.rc == 0, run.text
    assert _lib(proj) == before


def test_temp_files_are_swept_unless_the_last_build_ended_cleanly(tmp_path):
    """begin_build walks the folder for temp files only when no clean mark says the last build
    ended well; a build in progress holds no mark, so one killed midway leaves none behind."""
    from ttbuild.graph.state import CLEAN_MARK, begin_build, end_build

    art = tmp_path / "artifacts"
    (art / "ptx" / "k").mkdir(parents=True)
    stray = art / "ptx" / "k" / ".tmp-kernel.ptx.123-abc"
    stray.write_text("half a file")
    assert begin_build(art) == 1 and not stray.exists()  # no mark: a first or a killed build
    assert not (art / CLEAN_MARK).exists()
    end_build(art, clean=True)
    assert (art / CLEAN_MARK).exists()
    assert begin_build(art) == 0 and not (art / CLEAN_MARK).exists()  # marked clean: no walk
    stray.write_text("a worker was killed")
    end_build(art, clean=False)  # a failed build leaves no mark: the next one sweeps
    assert begin_build(art) == 1 and not stray.exists()


def test_lib_images_are_hard_links_to_their_stage_outputs_never_to_the_cache(tmp_path, new_project):
    """A lib/ cubin is one more name for its cubin stage output (no file created for it); the
    stage outputs themselves are files of their own, never the cache's blobs (damage to the
    cache must not reach artifacts built from it)."""
    proj = new_project(tmp_path / "p")
    proj.env = {"TTBUILD_CACHE_DIR": str(tmp_path / "cache")}
    assert proj.ttbuild("build").rc == 0
    stage_cubins = {p.stat().st_ino for p in (proj.artifacts / "cubin").rglob("*.cubin")}
    lib_cubins = list((proj.artifacts / "lib").glob("*.cubin"))
    assert lib_cubins and all(p.stat().st_ino in stage_cubins for p in lib_cubins)
    blobs = {p.stat().st_ino for p in (tmp_path / "cache" / "cas").rglob("*") if p.is_file()}
    outputs = {p.stat().st_ino for stage in ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")
               for p in (proj.artifacts / stage).rglob("*") if p.is_file()}
    assert blobs and outputs and not blobs & outputs


def test_a_default_build_that_stops_at_a_failure_still_drops_the_failed_variants(proj):
    """Issue 32 item 3: without --continue doit stops at the first failure and never reports
    the failed kernel's meta tasks as skipped; their previous build must go all the same."""
    assert proj.ttbuild("build").rc == 0
    victims = {p.stem for p in (proj.artifacts / "lib").glob("*.json") if p.stem.startswith("add_kernel")}
    assert victims
    _break(proj, "vector_add.py")
    run = proj.ttbuild("build")
    assert run.rc != 0
    left = {p.stem for p in (proj.artifacts / "lib").glob("*.json")}
    assert not victims & left, left


def test_an_empty_variant_list_leaves_no_library(proj):
    assert proj.ttbuild("build").rc == 0
    assert list((proj.artifacts / "lib").glob("*.json"))
    vt = proj.kernels / "variants.toml"
    vt.write_text(_split(vt.read_text())[0])
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text
    assert not [p for p in (proj.artifacts / "lib").iterdir() if p.suffix in (".json", ".cubin", ".ptx")]


def _package(proj, *args):
    out = proj.run(proj.ttbuild_argv("package", "--name", "k", "--version", "1.0", "-d", "dist", "--no-launcher", *args))
    return out.returncode, out.stderr


def _manifest(proj) -> dict:
    import json
    import zipfile

    with zipfile.ZipFile(proj.root / "dist" / "k-1.0-py3-none-any.whl") as zf:
        return json.loads(zf.read("k/ttbuild_library.json"))


def test_package_refuses_what_a_failed_continue_build_left(proj):
    """Issue 32 item 3: after a --continue build with one broken kernel, lib/ holds the others:
    `ttbuild package` refuses it (naming the failed variants) unless --allow-partial, and the
    wheel then records that it is partial."""
    assert proj.ttbuild("build").rc == 0
    assert proj.ttbuild("build").rc == 0  # a no-op rebuild is the complete build too
    rc, err = _package(proj)
    assert rc == 0, err
    assert _manifest(proj)["build"]["complete"] is True
    _break(proj, "vector_add.py")
    assert proj.ttbuild("build", "--continue").rc != 0
    rc, err = _package(proj)
    assert rc == 2 and "the last build failed for" in err and "add_kernel" in err, err
    rc, err = _package(proj, "--allow-partial")
    assert rc == 0 and "warning: the last build failed" in err, err
    build = _manifest(proj)["build"]
    assert build["complete"] is False and any("failed for" in p for p in build["problems"])


def test_package_refuses_kept_stale_shard_and_edited_libraries(proj):
    assert proj.ttbuild("build").rc == 0
    assert proj.ttbuild("build", "--shard", "1/2").rc == 0
    rc, err = _package(proj)
    assert rc == 2 and "shard 1/2 only" in err, err
    assert proj.ttbuild("build").rc == 0
    (proj.kernels / "vector_add.py").write_text((proj.kernels / "vector_add.py").read_text() + "\n# edited\n")
    rc, err = _package(proj)
    assert rc == 2 and "vector_add.py changed since the last build" in err, err
    assert proj.ttbuild("build").rc == 0
    (proj.artifacts / "lib" / "stray.json").write_bytes((next((proj.artifacts / "lib").glob("*.json"))).read_bytes())
    rc, err = _package(proj)
    assert rc == 2 and "lib/ holds stray" in err, err
    (proj.artifacts / "lib" / "stray.json").unlink()
    _break(proj, "vector_add.py")
    assert proj.ttbuild("build", "--continue", "--keep-previous").rc != 0
    rc, err = _package(proj)
    assert rc == 2 and "failed for" in err, err


def test_a_build_that_never_ends_leaves_no_record(proj):
    """The record goes when a build starts and comes back when it ends: a killed build's lib/
    is refused by `ttbuild package` (here: the reporter's start without its end)."""
    from ttbuild.buildrecord import RECORD
    from ttbuild.graph.reporter import BuildReporter

    assert proj.ttbuild("build").rc == 0
    assert (proj.artifacts / RECORD).is_file()
    reporter = BuildReporter.for_artifacts(proj.artifacts)(None, {})
    reporter._take_lock()
    try:
        assert not (proj.artifacts / RECORD).exists()
    finally:
        reporter._drop_lock()
    rc, err = _package(proj)
    assert rc == 2 and "records no build" in err, err


def test_the_build_indexes_lib_as_it_leaves_it(proj):
    """lib/ttbuild.index (ttbuild.runtime.libindex) lists exactly lib/'s metadata after a build,
    a build that removed a variant and a failed --continue build; load then goes through it."""
    from ttbuild.runtime import libindex, load

    def indexed() -> set[str]:
        groups = libindex.read_index(str(proj.artifacts / "lib"))
        assert groups is not None, "no index that fits lib/"
        return {row[0] for g in groups.values() for row in g._rows}

    assert proj.ttbuild("build").rc == 0
    assert indexed() == {p.name for p in (proj.artifacts / "lib").glob("*.json")} != set()
    assert not load(str(proj.artifacts)).kernel_groups()[0].loaded
    vt = proj.kernels / "variants.toml"
    header, rows = _split(vt.read_text())
    gone = re.search(r'name = "([^"]+)"', rows[0]).group(1)
    vt.write_text(header + "".join(rows[1:]))
    assert proj.ttbuild("build").rc == 0
    assert f"{gone}.json" not in indexed() and indexed() == {p.name for p in (proj.artifacts / "lib").glob("*.json")}
    _break(proj, "vector_add.py")
    assert proj.ttbuild("build", "--continue").rc != 0
    assert indexed() == {p.name for p in (proj.artifacts / "lib").glob("*.json")}
