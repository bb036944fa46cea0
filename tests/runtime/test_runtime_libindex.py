"""The library index (ttbuild.runtime.libindex): `load` reads a kernel's metadata only on its first use, checks it against the index, and falls back to reading every file when the index is absent or does not fit lib/."""

from __future__ import annotations

import json

import pytest
from runtime_fakes import FakeTorch, RecordingDriver, add_params, attach, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.runtime import libindex
from ttbuild.runtime.metadata import read_library
from ttbuild.runtime.serve import DeviceNotCovered, check_coverage


def _docs():
    return [meta("add_fp32", "add", add_params("fp32"), file="ops/add.py"),
            meta("add_fp16", "add", add_params("fp16"), file="ops/add.py"),
            meta("scale_fp32", "scale", add_params("fp32"), file="ops/scale.py", target="cuda:80", arch="sm_80"),
            meta("add_other", "add", add_params("fp32"), file="other/add.py")]


@pytest.fixture
def parsed(monkeypatch):
    """The metadata files the index path parses, in order."""
    seen = []
    real = libindex.parse_variant

    def spy(doc, path):
        seen.append(path.rsplit("/", 1)[-1])
        return real(doc, path)

    monkeypatch.setattr(libindex, "parse_variant", spy)
    return seen


def _indexed(tmp_path, parsed=None):
    write_lib(tmp_path, _docs())
    assert libindex.write_index(str(tmp_path / "lib")) == str(tmp_path / "lib" / libindex.INDEX)
    if parsed is not None:
        parsed.clear()  # what writing the index parsed
    return tmp_path


def test_a_kernel_is_read_on_its_first_use_only(tmp_path, parsed):
    root = _indexed(tmp_path, parsed)
    lib = rt.load(str(root), driver=RecordingDriver())
    assert lib.kernels == ["ops/add.py:add", "other/add.py:add", "scale"]
    assert parsed == []
    _ = lib["scale"]
    assert parsed == ["scale_fp32.json"]
    _ = lib["scale"]
    assert parsed == ["scale_fp32.json"]
    _ = lib.variant("add_fp16")  # the variant's kernel, both of its files
    assert parsed == ["scale_fp32.json", "add_fp16.json", "add_fp32.json"]


def test_the_indexed_library_launches_and_lists_what_the_full_read_does(tmp_path, monkeypatch):
    torch = FakeTorch(monkeypatch)
    root = _indexed(tmp_path)
    lib = rt.load(str(root), driver=RecordingDriver())
    every = read_library(str(root / "lib"))
    assert [v.variant for v in lib.variants] == [v.variant for v in every]
    assert lib.variants == every
    drv = RecordingDriver()
    lib = attach(rt.load(str(root), driver=drv), drv)
    x, y, out = (torch.Tensor(p, "float16") for p in (0x1000, 0x2000, 0x3000))
    lib["ops/add.py:add"][(2,)](x, y, out, 64)
    assert [launch["function"][1] for launch in drv.launches] == ["add"]
    assert [image for _, image, _, _ in drv.loads] == [b"CUBIN:add_fp16"]
    assert "4 variants" in repr(lib)


def test_a_file_changed_after_the_index_asks_for_a_rebuild_and_the_rest_loads(tmp_path):
    root = _indexed(tmp_path)
    path = root / "lib" / "scale_fp32.json"
    path.write_text(path.read_text().replace('"num_warps": 4', '"num_warps": 8'))
    lib = rt.load(str(root), driver=RecordingDriver())
    with pytest.raises(rt.MetadataError, match=r"scale_fp32.json: changed since .*ttbuild.index.*rebuild"):
        _ = lib["scale"]
    assert lib["ops/add.py:add"].kernel == "ops/add.py:add"


@pytest.mark.parametrize("change", ["added", "removed", "garbage", "other schema"])
def test_an_index_that_does_not_fit_lib_reads_every_file(tmp_path, parsed, change):
    root = _indexed(tmp_path, parsed)
    lib_dir = root / "lib"
    if change == "added":
        write_lib(root, [meta("mul_fp32", "mul", add_params("fp32"), file="ops/mul.py")])
    elif change == "removed":
        (lib_dir / "add_fp16.json").unlink()
    elif change == "garbage":
        (lib_dir / libindex.INDEX).write_text("{")
    else:
        (lib_dir / libindex.INDEX).write_text(json.dumps({"schema": "ttbuild.index/0", "kernels": []}))
    lib = rt.load(str(root), driver=RecordingDriver())
    assert parsed == []  # read_library parsed everything, up front
    assert sorted(v.variant for v in lib.variants) == sorted(v.variant for v in read_library(str(lib_dir)))
    assert ("mul" in lib) == (change == "added")


def test_an_index_is_rebuilt_parsing_only_the_changed_files(tmp_path, parsed):
    root = _indexed(tmp_path, parsed)
    lib_dir = str(root / "lib")
    before = (root / "lib" / libindex.INDEX).read_bytes()
    assert libindex.build_index(lib_dir, libindex.previous_rows(lib_dir)) == before
    assert parsed == []
    write_lib(root, [meta("add_fp16", "add", add_params("fp16"), num_warps=8, file="ops/add.py")])
    libindex.write_index(lib_dir, libindex.previous_rows(lib_dir))
    assert parsed == ["add_fp16.json"]
    assert (root / "lib" / libindex.INDEX).read_bytes() == libindex.build_index(lib_dir)


def test_a_bad_metadata_file_gets_no_index_and_load_names_it(tmp_path):
    root = _indexed(tmp_path)
    (root / "lib" / "add_fp16.json").write_text('{"schema": "ttbuild.kernel/1"}')
    assert libindex.write_index(str(root / "lib")) is None
    assert not (root / "lib" / libindex.INDEX).exists()
    with pytest.raises(rt.MetadataError, match="add_fp16.json"):
        rt.load(str(root))


def test_the_device_check_reads_the_index_only(tmp_path, parsed):
    lib = rt.load(str(_indexed(tmp_path, parsed)), driver=RecordingDriver())
    with pytest.warns(UserWarning, match=r"no variant of ops/scale.py:scale runs on compute capability 9.0"):
        check_coverage(lib, (9, 0))
    with pytest.raises(DeviceNotCovered, match=r"holds kernels for cuda:80, cuda:90; this GPU is compute capability 7.5"):
        check_coverage(lib, (7, 5))
    assert parsed == []


def test_the_index_command_writes_one_per_library(tmp_path, capsys):
    write_lib(tmp_path, _docs())
    assert libindex.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "lib" / libindex.INDEX)
    assert libindex.read_index(str(tmp_path / "lib")) is not None
    (tmp_path / "lib" / "add_fp16.json").write_text("{")
    assert libindex.main([str(tmp_path)]) == 2
    assert "add_fp16.json" in capsys.readouterr().err


def test_an_installed_package_reads_a_kernel_on_its_first_use(tmp_path, parsed):
    import zipfile

    from ttbuild.runtime.package import load_package
    from ttbuild.wheel import build_wheel

    write_lib(tmp_path / "a", _docs())
    with zipfile.ZipFile(build_wheel(str(tmp_path / "a" / "lib"), "idx", "1.0", str(tmp_path / "dist"))) as zf:
        zf.extractall(tmp_path / "site")
    library = load_package(str(tmp_path / "site" / "idx" / "__init__.py"), driver=RecordingDriver())
    assert parsed == [] and library.kernels == ["ops/add.py:add", "other/add.py:add", "scale"]
    _ = library.scale
    assert parsed == ["scale_fp32.json"]
