"""`ttbuild package`: a built library becomes a wheel (RECORD, METADATA, WHEEL per the spec) that pip installs into a clean venv without the compiler, imports, lists its kernels and hash-checks."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from packaging.utils import parse_wheel_filename
from packaging.version import Version
from runtime_fakes import add_params, meta, write_lib

from ttbuild.wheel import PackageError, build_wheel

REPO = Path(__file__).resolve().parents[2]


def small_lib(root: Path) -> Path:
    return write_lib(root, [meta("add_fp32", "add_kernel", add_params("fp32")),
                            meta("add_fp16", "add_kernel", add_params("fp16")),
                            meta("add_80", "add_kernel", add_params("fp32"), target="cuda:80", arch="sm_80")]) / "lib"


def test_wheel_layout_record_and_metadata(tmp_path):
    path = build_wheel(str(small_lib(tmp_path)), "tinylib", "1.2", str(tmp_path / "dist"))
    assert os.path.basename(path) == "tinylib-1.2-py3-none-any.whl"
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert names[-1] == "tinylib-1.2.dist-info/RECORD"
        assert {"tinylib/__init__.py", "tinylib/ttbuild_library.json", "tinylib/lib/add_fp32.cubin",
                "tinylib/lib/add_80.json", "tinylib/lib/ttbuild.index", "tinylib-1.2.dist-info/METADATA",
                "tinylib-1.2.dist-info/WHEEL"} <= set(names)
        record = zf.read("tinylib-1.2.dist-info/RECORD").decode().splitlines()
        for line in record:
            arc, digest, size = line.rsplit(",", 2)
            if arc.endswith("RECORD"):
                assert digest == size == ""
                continue
            data = zf.read(arc)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data)
        assert len(record) == len(names)
        wheel = zf.read("tinylib-1.2.dist-info/WHEEL").decode()
        assert "Tag: py3-none-any" in wheel and "Root-Is-Purelib: true" in wheel
        md = zf.read("tinylib-1.2.dist-info/METADATA").decode()
        assert "Name: tinylib\nVersion: 1.2\n" in md and "Requires-Dist: ttbuild" in md
        assert "sm_80, sm_90a" in md and "CUDA driver >= 13.0" in md
        manifest = json.loads(zf.read("tinylib/ttbuild_library.json"))
    assert manifest["kernels"] == {"add_kernel": ["add_80", "add_fp16", "add_fp32"]}
    assert manifest["archs"] == ["sm_80", "sm_90a"] and manifest["min_cuda_driver"] == 13000
    # the same library gives the same bytes
    again = build_wheel(str(small_lib(tmp_path)), "tinylib", "1.2", str(tmp_path / "dist2"))
    assert Path(again).read_bytes() == Path(path).read_bytes()


@pytest.mark.parametrize("name, version, platform, message", [
    ("my-kernels", "1.0", "any", "Python identifier"), ("k", "one", "any", "PEP 440"),
    ("k", "1.0", "Linux x86", "platform tag")])
def test_bad_names_versions_platforms(tmp_path, name, version, platform, message):
    with pytest.raises(PackageError, match=message):
        build_wheel(str(small_lib(tmp_path)), name, version, str(tmp_path), platform)


def test_empty_or_missing_library(tmp_path):
    (tmp_path / "lib").mkdir()
    with pytest.raises(PackageError, match="no kernel metadata"):
        build_wheel(str(tmp_path / "lib"), "k", "1.0", str(tmp_path))
    with pytest.raises(PackageError, match="no such directory"):
        build_wheel(str(tmp_path / "nope"), "k", "1.0", str(tmp_path))


def test_package_table_and_command_line(tmp_path, new_project):
    proj = new_project(tmp_path / "p")
    small_lib(proj.artifacts)
    text = (proj.kernels / "variants.toml").read_text()
    (proj.kernels / "variants.toml").write_text('[package]\nname = "fromtoml"\nversion = "2.0"\n\n' + text)
    out = proj.run(proj.ttbuild_argv("package", "--no-launcher"))
    assert out.returncode == 2 and "records no build" in out.stderr  # a lib/ no build wrote
    out = proj.run(proj.ttbuild_argv("package", "--allow-partial", "--no-launcher"))
    assert out.returncode == 0, out.stderr
    assert (proj.root / "dist" / "fromtoml-2.0-py3-none-any.whl").is_file()
    out = proj.run(proj.ttbuild_argv("package", "--version", "2.1", "-d", "w", "--platform", "manylinux2014_x86_64",
                                     "--no-launcher", "--allow-partial"))
    assert out.returncode == 0 and (proj.root / "w" / "fromtoml-2.1-py3-none-manylinux2014_x86_64.whl").is_file()
    # -o is the artifacts folder, as in every ttbuild command (issue 32); --out still names the wheel's
    out = proj.run(proj.ttbuild_argv("package", "--version", "2.2", "-o", str(proj.artifacts), "--out", "w2",
                                     "--no-launcher", "--allow-partial"))
    assert out.returncode == 0 and (proj.root / "w2" / "fromtoml-2.2-py3-none-any.whl").is_file(), out.stderr
    out = proj.run(proj.ttbuild_argv("package", "--version", "2.3", "-o", "dist"))
    assert out.returncode == 2 and "-o names the artifacts folder" in out.stderr, out.stderr
    assert proj.doit("list").rc == 0  # the build accepts the [package] table
    (proj.kernels / "variants.toml").write_text(text)
    out = proj.run(proj.ttbuild_argv("package"))
    assert out.returncode == 2 and "give --name and --version" in out.stderr


def _has_cc() -> bool:
    import shutil

    return bool(os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"))


@pytest.mark.skipif(not _has_cc(), reason="no C compiler here to build the C launcher")
def test_the_c_launcher_ships_compiled_and_loads_without_a_compiler(tmp_path):
    """Issue 32 item 8: `ttbuild package` compiles claunch.c into the kernel wheel (a platform
    wheel for this Python); installed in a clean venv, imported with no C compiler on PATH and
    no writable home or cache, the runtime takes the C path from the wheel and says so. Loading
    the module needs no GPU (calling it does)."""
    from ttbuild.runtime import cext
    from ttbuild.wheel import launcher_tag

    path = build_wheel(str(small_lib(tmp_path)), "clib", "1.0", str(tmp_path / "dist"), launcher=True)
    assert os.path.basename(path) == f"clib-1.0-{launcher_tag()}.whl" and launcher_tag().startswith("cp3")
    with zipfile.ZipFile(path) as zf:
        assert f"clib/launcher/{cext.prebuilt_name()}" in zf.namelist()
        assert f"clib/launcher/{cext.prebuilt_name()}," in zf.read("clib-1.0.dist-info/RECORD").decode()  # hash-checked
        assert "Root-Is-Purelib: false" in zf.read("clib-1.0.dist-info/WHEEL").decode()
    py = install(path, tmp_path / "venv")
    (tmp_path / "bin").mkdir()
    home = tmp_path / "home"
    home.mkdir(mode=0o555)
    env = {"PYTHONPATH": str(REPO), "PATH": str(tmp_path / "bin"), "HOME": str(home),
           "TTBUILD_CACHE_DIR": "/dev/null/ttbuild"}  # no C compiler, nowhere to write a compiled one
    code = ("import json, clib\nfrom ttbuild.runtime import cext\nm = cext.load()\n"
            "print(json.dumps({'status': cext.status(), 'fast': hasattr(m, 'FastLaunch')}))")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["status"].startswith("c (prebuilt: ") and "/venv/" in got["status"] and got["fast"], got
    # without the wheel's copy the same process has no C path, and says why
    code = "from ttbuild.runtime import cext\nprint(cext.load() is None, cext.status())"
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.stdout.startswith("True python ("), out.stdout + out.stderr


def install(wheel: str, venv: Path) -> Path:
    """A clean venv (no system site-packages, no pip) with only `wheel` installed, --no-deps."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                    "--no-index", "--disable-pip-version-check", wheel], check=True)
    return py


def test_round_trip_of_a_real_build_in_a_clean_venv(tmp_path, built_project_factory):
    """Build the repo's kernels (the session's real build), package, install into a venv that has
    neither the compiler nor cuda-bindings, import it with the runtime from this checkout."""
    proj = built_project_factory("real")
    lib = proj.artifacts / "lib"
    wheel = build_wheel(str(lib), "mykernels", "1.0", str(tmp_path / "dist"))
    py = install(wheel, tmp_path / "venv")
    code = ("import json, sys, mykernels\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('mlir', 'llvmlite', 'doit', 'rich', 'xxhash', 'cuda')]\n"
            "print(json.dumps({'kernels': mykernels.kernels, 'file': mykernels.__file__, 'heavy': heavy,\n"
            "  'variants': sorted(v.variant for v in mykernels.library.variants),\n"
            "  'add': repr(mykernels.add_kernel), 'version': mykernels.__version__}))\n")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    built = sorted(p.stem for p in lib.glob("*.json"))
    assert got["variants"] == built and "add_kernel" in got["kernels"] and got["heavy"] == []
    assert got["file"].startswith(str(tmp_path / "venv")) and got["version"] == "1.0"
    assert "add_kernel_fp32" in got["add"]
    missing = subprocess.run([str(py), "-c", "import doit"], capture_output=True, env=env)
    assert missing.returncode != 0  # the venv really lacks the compiler

    # a modified cubin in the install is refused at import, naming the file
    site = Path(got["file"]).parent
    victim = site / "lib" / "add_kernel_fp32.cubin"
    data = victim.read_bytes()
    victim.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    out = subprocess.run([str(py), "-c", "import mykernels"], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "add_kernel_fp32.cubin: sha256" in out.stderr and "reinstall mykernels" in out.stderr


def test_an_installed_wheel_checks_its_files_against_its_record(tmp_path):
    """pip installs the wheel; importing it checks each file against the sha256 of the
    distribution's RECORD (importlib.metadata), with no second list in the manifest: a changed
    file, a file the RECORD does not list and a missing RECORD each stop the import, naming it."""
    path = build_wheel(str(small_lib(tmp_path)), "Rec_Lib", "1.0.0", str(tmp_path / "dist"))
    assert parse_wheel_filename(os.path.basename(path))[:2] == ("rec-lib", Version("1.0.0"))
    with zipfile.ZipFile(path) as zf:
        assert "files" not in json.loads(zf.read("Rec_Lib/ttbuild_library.json"))
    py = install(path, tmp_path / "venv")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}

    def imported():
        return subprocess.run([str(py), "-c", "import Rec_Lib; print(Rec_Lib.kernels)"], capture_output=True,
                              text=True, env=env, cwd=tmp_path)

    out = imported()
    assert out.returncode == 0 and "add_kernel" in out.stdout, out.stderr
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, env=env).stdout.strip())
    victim = site / "Rec_Lib" / "lib" / "add_fp16.json"
    good = victim.read_bytes()
    victim.write_bytes(good.replace(b'"num_warps": 4', b'"num_warps": 8'))
    out = imported()
    assert out.returncode != 0 and "add_fp16.json: sha256" in out.stderr and "RECORD" in out.stderr, out.stderr
    assert "reinstall Rec_Lib" in out.stderr
    victim.write_bytes(good)
    (site / "Rec_Lib" / "lib" / "extra.json").write_text("{}")
    out = imported()
    assert out.returncode != 0 and "lib/extra.json not part of the Rec_Lib package" in out.stderr, out.stderr
    (site / "Rec_Lib" / "lib" / "extra.json").unlink()
    assert imported().returncode == 0
    (site / "rec_lib-1.0.0.dist-info" / "RECORD").unlink()
    out = imported()
    assert out.returncode != 0 and "no installed distribution" in out.stderr, out.stderr


def test_tuning_tables_ship_in_the_wheel_and_load_from_the_package(tmp_path):
    """artifacts/tuning/<kernel>.json (ttbuild tune) travels in the wheel, is hash-checked with the
    rest, and the installed package's tuned kernel reads it."""
    from runtime_fakes import RecordingDriver

    from ttbuild.runtime import MetadataError
    from ttbuild.runtime.package import load_package
    from ttbuild.runtime.tuned import TunedLauncher
    from ttbuild.runtime.tuningtable import TABLE_SCHEMA

    docs = []
    for c, block in enumerate((512, 1024)):
        params = add_params("fp32")[:-1] + [{"name": "BLOCK_SIZE", "kind": "constexpr", "value": block}]
        docs.append(meta(f"add.c{c}", "add_kernel", params,
                         autotune={"group": "add", "key": ["n_elements"], "config": c, "kwargs": {"BLOCK_SIZE": block}}))
    lib = write_lib(tmp_path / "a", docs) / "lib"
    (tmp_path / "a" / "tuning").mkdir()
    table = {"schema": TABLE_SCHEMA, "entries": [{"key": [4096, "fp32", "fp32", "fp32"], "config": 1}]}
    (tmp_path / "a" / "tuning" / "add_kernel.json").write_text(json.dumps(table))
    path = build_wheel(str(lib), "tuned", "1.0", str(tmp_path / "dist"))
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("tuned/tuning/add_kernel.json")) == table
        assert "\ntuned/tuning/add_kernel.json,sha256=" in zf.read("tuned-1.0.dist-info/RECORD").decode()
        zf.extractall(tmp_path / "site")
    library = load_package(str(tmp_path / "site" / "tuned" / "__init__.py"), driver=RecordingDriver())
    kernel = library.add_kernel
    assert isinstance(kernel, TunedLauncher) and kernel.table is not None
    assert kernel.table.lookup((4096, "fp32", "fp32", "fp32")) == (1, "exact")
    # a table the manifest does not list (issue 32 item 3) is refused, not read
    (tmp_path / "site" / "tuned" / "tuning" / "other_kernel.json").write_text(json.dumps(table))
    with pytest.raises(MetadataError, match=r"other_kernel\.json not part of the tuned package"):
        load_package(str(tmp_path / "site" / "tuned" / "__init__.py"))
    (tmp_path / "site" / "tuned" / "tuning" / "other_kernel.json").unlink()
    (tmp_path / "site" / "tuned" / "tuning" / "add_kernel.json").write_text("{}")
    with pytest.raises(MetadataError, match="does not match"):
        load_package(str(tmp_path / "site" / "tuned" / "__init__.py"))
