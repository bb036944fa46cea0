"""One build for every GPU generation: multi-target variants (one cubin per target plus PTX of the newest) built for real, and the runtime's choice per device capability with a fake device on the CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runtime_fakes import RecordingDriver, add_params, attach, meta, write_lib

import ttbuild.runtime as rt
from ttbuild.graph import VariantError, load_variants
from ttbuild.wheel import build_wheel


def multi_doc(name="add_multi", **extra):
    images = [
        {"kind": "cubin", "target": "cuda:80", "arch": "sm_80", "file": f"{name}.sm_80.cubin", "shared": 0},
        {"kind": "cubin", "target": "cuda:90", "arch": "sm_90a", "file": f"{name}.cubin", "shared": 0},
        {"kind": "ptx", "target": "cuda:90", "arch": "sm_90", "file": f"{name}.sm_90.ptx", "shared": 0,
         "ptx_version": 90},
    ]
    return meta(name, "add_kernel", add_params("fp32"), targets=["cuda:80", "cuda:90"], images=images,
                ptx_version=90, min_cuda_driver=13000, **extra)


def multi_lib(tmp_path, capability, version=13000):
    doc = multi_doc()
    write_lib(tmp_path, [doc], {"add_multi.sm_80.cubin": b"CUBIN:sm_80",
                                "add_multi.sm_90.ptx": b"//\n.version 9.0\n.target sm_90\n"})
    drv = RecordingDriver(capability=capability, version=version)
    return attach(rt.load(str(tmp_path), driver=drv), drv), drv


class Tensor:
    def __init__(self, ptr):
        self.ptr, self.dtype = ptr, "float32"

    def data_ptr(self):
        return self.ptr


def launch(lib):
    lib.add_kernel[(1,)](Tensor(0x1000), Tensor(0x2000), Tensor(0x3000), 4)


@pytest.mark.parametrize("capability, loaded", [
    ((8, 0), b"CUBIN:sm_80"), ((8, 6), b"CUBIN:sm_80"), ((8, 9), b"CUBIN:sm_80"),
    ((9, 0), b"CUBIN:add_multi"),                                   # exact SASS before PTX
    ((10, 0), b"//\n.version 9.0\n.target sm_90\n\0"),              # newer GPU: PTX JIT, NUL-terminated
    ((12, 0), b"//\n.version 9.0\n.target sm_90\n\0")])
def test_best_image_per_device(tmp_path, capability, loaded):
    lib, drv = multi_lib(tmp_path, capability)
    launch(lib)
    assert [l[1] for l in drv.loads] == [loaded]


def test_nothing_fits_names_what_the_library_holds(tmp_path):
    lib, drv = multi_lib(tmp_path, (7, 5))
    with pytest.raises(rt.NoMatchingVariant,
                       match=r"holds cubins for sm_80, sm_90a; PTX for sm_90 \(JIT on compute capability >= 9.0\); "
                             r"nothing runs on compute capability 7.5"):
        launch(lib)
    assert "cuda:80, cuda:90" in lib.variants[0].describe()


def test_an_old_driver_is_named_before_loading(tmp_path):
    lib, drv = multi_lib(tmp_path, (10, 0), version=12040)
    with pytest.raises(rt.CudaError, match=r"needs a driver for CUDA 13.0 \(PTX ISA 9.0\) or newer; this driver "
                                           r"supports CUDA 12.4: update the NVIDIA driver"):
        launch(lib)
    assert drv.loads == []


def test_single_target_metadata_reads_as_one_image(tmp_path):
    write_lib(tmp_path, [meta("one", "add_kernel", add_params("fp32"))])
    (v,) = rt.load(str(tmp_path)).variants
    assert [(i.kind, i.arch, Path(i.path).name) for i in v.images] == [("cubin", "sm_90a", "one.cubin")]
    assert v.min_cuda_driver == 13000


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["images"][0].update(kind="fatbin"), "kind must be 'cubin' or 'ptx'"),
    (lambda d: d["images"][2].update(file="../x.ptx"), "file must be a name beside the JSON"),
    (lambda d: d["images"][2].update(file="gone.ptx"), "gone.ptx does not exist"),
    (lambda d: d.update(images=[]), "non-empty list")])
def test_bad_images_are_rejected(tmp_path, mutate, message):
    doc = multi_doc()
    mutate(doc)
    write_lib(tmp_path, [doc], {"add_multi.sm_80.cubin": b"x", "add_multi.sm_90.ptx": b"x"})
    with pytest.raises(rt.MetadataError, match=message):
        rt.load(str(tmp_path))


VARIANTS = '''
[[variant]]
name = "add_multi"
file = "vector_add.py"
kernel = "add_kernel"
signature = "*fp32:16,*fp32:16,*fp32:16,i32"
constexprs = { BLOCK_SIZE = 1024 }
targets = ["cuda:90", "cuda:80"]

[[variant]]
file = "vector_add.py"
kernel = "add_kernel"
signature = "*fp32:16,*fp32:16,*fp32:16,i32"
constexprs = { BLOCK_SIZE = 1024 }
'''


def test_variant_list_targets(tmp_path):
    (tmp_path / "vector_add.py").write_text("")
    (tmp_path / "variants.toml").write_text(VARIANTS)
    multi, single = load_variants(tmp_path)
    assert multi.targets == ("cuda:80", "cuda:90") and multi.target == "cuda:90"
    assert single.targets == () and single.name == "add_kernel_b042572a"  # the name it always had
    for bad, message in ((VARIANTS.replace('targets = ["cuda:90", "cuda:80"]', 'targets = ["cuda:90", "cuda:90"]'),
                          "lists a target twice"),
                         (VARIANTS.replace('targets = ["cuda:90", "cuda:80"]', 'targets = []'), "non-empty list"),
                         (VARIANTS.replace('targets = ["cuda:90", "cuda:80"]', 'targets = ["sm_90"]'), "cuda:90"),
                         (VARIANTS.replace('targets = ["cuda:90", "cuda:80"]',
                                           'targets = ["cuda:90"]\ntarget = "cuda:90"'), "not both")):
        (tmp_path / "variants.toml").write_text(bad)
        with pytest.raises(VariantError, match=message):
            load_variants(tmp_path)


def test_real_build_writes_a_cubin_per_target_and_portable_ptx(tmp_path, new_project):
    proj = new_project(tmp_path / "p", stages="real")
    (proj.kernels / "variants.toml").write_text(VARIANTS)
    run = proj.doit()
    assert run.rc == 0, run.text[-3000:]
    lib = proj.artifacts / "lib"
    doc = json.loads((lib / "add_multi.json").read_text())
    assert doc["targets"] == ["cuda:80", "cuda:90"] and doc["cubin"] == "add_multi.cubin"
    assert [(i["kind"], i["arch"], i["file"]) for i in doc["images"]] == [
        ("cubin", "sm_80", "add_multi.sm_80.cubin"), ("cubin", "sm_90a", "add_multi.cubin"),
        ("ptx", "sm_90", "add_multi.sm_90.ptx")]
    assert doc["min_cuda_driver"] == 13000 and doc["ptx_version"] == 90
    ptx = (lib / "add_multi.sm_90.ptx").read_text()
    assert ".target sm_90\n" in ptx and ".version 9.0" in ptx
    assert (lib / "add_multi.cubin").read_bytes() == (lib / "add_kernel_b042572a.cubin").read_bytes()
    assert (lib / "add_multi.sm_80.cubin").read_bytes() != (lib / "add_multi.cubin").read_bytes()
    assert proj.doit().ran == set()  # a second build is a no-op
    # the runtime picks per device; the wheel carries every image and says what it serves
    for cap, name in (((8, 6), "add_multi.sm_80.cubin"), ((9, 0), "add_multi.cubin"), ((10, 0), "add_multi.sm_90.ptx")):
        drv = RecordingDriver(capability=cap)
        lib_rt = attach(rt.load(str(proj.artifacts), driver=drv), drv)
        lib_rt.variant("add_multi")[(1,)](Tensor(0x1000), Tensor(0x2000), Tensor(0x3000), 4)
        want = (lib / name).read_bytes() + (b"\0" if name.endswith(".ptx") else b"")
        assert drv.loads[0][1] == want
    wheel = build_wheel(str(lib), "multi", "1.0", str(tmp_path / "dist"))
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        manifest = json.loads(zf.read("multi/ttbuild_library.json"))
        assert "multi/lib/add_multi.sm_90.ptx" in zf.namelist()
        assert "sm_80, sm_90a; PTX sm_90 for newer GPUs" in zf.read("multi-1.0.dist-info/METADATA").decode()
    assert manifest["archs"] == ["sm_80", "sm_90a"] and manifest["ptx"] == ["sm_90"]
    assert manifest["targets"] == ["cuda:80", "cuda:90"]


def test_a_cubin_that_is_not_the_one_the_metadata_describes_is_refused(tmp_path):
    """A kill between the cubin's and the JSON's writes, or a file copied over the library:
    the sha256 the build recorded (cubin_sha256) no longer matches, and loading says which file."""
    doc = meta("add_one", "add_kernel", add_params("fp32"))
    write_lib(tmp_path, [doc])
    drv = RecordingDriver(capability=(9, 0))
    lib = attach(rt.load(str(tmp_path), driver=drv), drv)
    (tmp_path / "lib" / "add_one.cubin").write_bytes(b"CUBIN:another build")
    with pytest.raises(rt.MetadataError, match=r"add_one\.cubin is not the file .*add_one\.json describes"):
        launch(lib)
    assert drv.loads == []


@pytest.mark.parametrize("digest", [None, ""])
def test_a_cubin_without_a_recorded_sha256_is_refused(tmp_path, digest):
    """Issue 32 item 3: `cubin_sha256` removed (or emptied) from a JSON whose cubin is replaced
    used to skip the check and hand the garbage to the driver."""
    write_lib(tmp_path, [meta("add_one", "add_kernel", add_params("fp32"))])
    path = tmp_path / "lib" / "add_one.json"
    doc = json.loads(path.read_text())
    if digest is None:
        del doc["cubin_sha256"]
    else:
        doc["cubin_sha256"] = digest
    path.write_text(json.dumps(doc))
    (tmp_path / "lib" / "add_one.cubin").write_bytes(b"garbage")
    drv = RecordingDriver(capability=(9, 0))
    lib = attach(rt.load(str(tmp_path), driver=drv), drv)
    with pytest.raises(rt.MetadataError, match=r"records no sha256 for add_one\.cubin"):
        launch(lib)
    assert drv.loads == []


def test_a_cubin_linked_out_of_the_library_is_refused(tmp_path):
    import hashlib

    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(b"CUBIN:add_one")
    write_lib(tmp_path, [meta("add_one", "add_kernel", add_params("fp32"))])
    doc = json.loads((tmp_path / "lib" / "add_one.json").read_text())
    assert doc["cubin_sha256"] == hashlib.sha256(outside.read_bytes()).hexdigest()  # even the right bytes
    (tmp_path / "lib" / "add_one.cubin").unlink()
    (tmp_path / "lib" / "add_one.cubin").symlink_to(outside)
    drv = RecordingDriver(capability=(9, 0))
    lib = attach(rt.load(str(tmp_path), driver=drv), drv)
    with pytest.raises(rt.MetadataError, match=r"is a link to .*elsewhere\.bin, outside the library"):
        launch(lib)
    assert drv.loads == []


def test_the_untouched_cubin_loads(tmp_path):
    write_lib(tmp_path, [meta("add_one", "add_kernel", add_params("fp32"))])
    drv = RecordingDriver(capability=(9, 0))
    launch(attach(rt.load(str(tmp_path), driver=drv), drv))
    assert [l[1] for l in drv.loads] == [b"CUBIN:add_one"]


MATMUL_MULTI = '''
[[variant]]
name = "mm_multi"
file = "matmul.py"
kernel = "matmul_kernel"
signature = "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:16,i32:16"
constexprs = { BLOCK_SIZE_M = 128, BLOCK_SIZE_N = 128, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8, ACTIVATION = "", stride_ak = 1, stride_bn = 1, stride_cn = 1 }
targets = ["cuda:80", "cuda:90"]
'''


def test_portable_ptx_of_a_wgmma_kernel_uses_mma_sync(tmp_path, new_project):
    """wgmma exists on sm_90a only: the cuda:90 cubin of a matmul uses it, while the PTX shipped
    for newer GPUs (`.target sm_90`) comes from a chain with disable_mma_v3, on mma.sync."""
    import shutil

    proj = new_project(tmp_path / "p", stages="real")
    shutil.copy(Path(__file__).parents[2] / "kernels" / "matmul.py", proj.kernels / "matmul.py")
    (proj.kernels / "variants.toml").write_text(MATMUL_MULTI)
    run = proj.doit()
    assert run.rc == 0, run.text[-3000:]
    lib = proj.artifacts / "lib"
    ptx = (lib / "mm_multi.sm_90.ptx").read_text()
    assert ".target sm_90\n" in ptx and "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx
    sm90a = [p.read_text() for p in (proj.artifacts / "ptx").rglob("*.ptx") if ".target sm_90a" in p.read_text()]
    assert sm90a and all("wgmma.mma_async" in p for p in sm90a)
