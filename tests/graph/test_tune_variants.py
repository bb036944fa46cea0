"""Rows of variants.toml whose kernel carries @triton.autotune / @triton.heuristics: one ordinary variant per config and heuristic value (ttbuild.graph.tunevariants), refusals at file:line, and the metadata a real build writes for them, read back by the runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttbuild.errors import CompilationError
from ttbuild.graph import VariantError, load_variants

KERNEL = '''import triton
import triton.language as tl


def configs():
    return [triton.Config({"BLOCK": b}, num_warps=w, num_stages=s) for b, w, s in ((128, 4, 2), (256, 8, 3), (512, 4, 4))]


@triton.autotune(configs=configs(), key=["n"], reset_to_zero=["out_ptr"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0,
                    "UNROLL": lambda args: triton.next_power_of_2(args["n"] // args["BLOCK"])})
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, UNROLL: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)
    else:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''

ROW = '''[[variant]]
name = "scale"
file = "k.py"
kernel = "scale"
signature = "*fp32:16,*fp32:16,i32"
'''


def _lib(tmp_path: Path, row: str, kernel: str = KERNEL) -> Path:
    (tmp_path / "k.py").write_text(kernel)
    (tmp_path / "tune_args.py").write_text("def make(n):\n    return (), (1,)\n")
    (tmp_path / "variants.toml").write_text(row)
    return tmp_path


def test_one_variant_per_config_and_heuristic_value(tmp_path):
    vs = load_variants(_lib(tmp_path, ROW + 'autotune = true\nconstexprs = { UNROLL = [1, 4] }\n'))
    assert [v.name for v in vs] == [f"scale.c{c}.EVEN-{e}.UNROLL-{u}" for c in range(3) for e in (0, 1) for u in (1, 4)]
    v = vs[7]  # config 1, EVEN True, UNROLL 4
    assert v.constexprs == {"BLOCK": 256, "EVEN": True, "UNROLL": 4}
    assert (v.num_warps, v.num_stages) == (8, 3)
    assert v.tuning == {"group": "scale", "key": ["n"], "reset_to_zero": ["out_ptr"], "restore_value": [],
                        "configs": 3, "config": 1, "kwargs": {"BLOCK": 256}, "num_warps": 8, "num_stages": 3,
                        "num_ctas": 1}
    assert v.heuristics == {"EVEN": "args['n'] % args['BLOCK'] == 0",
                            "UNROLL": "next_power_of_2(args['n'] // args['BLOCK'])"}


def test_configs_picks_some_and_a_fixed_value_is_not_in_the_name(tmp_path):
    vs = load_variants(_lib(tmp_path, ROW + 'configs = [0, 2]\nconstexprs = { EVEN = true, UNROLL = 2 }\n'))
    assert [v.name for v in vs] == ["scale.c0", "scale.c2"]
    assert [v.constexprs["BLOCK"] for v in vs] == [128, 512]
    assert all(v.constexprs["EVEN"] is True and v.constexprs["UNROLL"] == 2 for v in vs)


def test_the_tune_plan_is_recorded(tmp_path):
    row = ROW + ('autotune = true\nconstexprs = { UNROLL = 1 }\n'
                 'tune = { args = "tune_args.py:make", shapes = [{ n = 4096 }, { n = 100000 }] }\n')
    vs = load_variants(_lib(tmp_path, row))
    assert vs[0].tuning["tune"] == {"args": "tune_args.py:make", "shapes": [{"n": 4096}, {"n": 100000}]}


def test_a_row_without_autotune_stays_one_variant_when_nothing_is_computed(tmp_path):
    kernel = KERNEL.split("@triton.heuristics")[0] + "@triton.jit" + KERNEL.split("@triton.jit", 1)[1]
    (v,) = load_variants(_lib(tmp_path, ROW + 'constexprs = { BLOCK = 64, EVEN = false, UNROLL = 1 }\n', kernel))
    assert v.name == "scale" and v.tuning is None and v.heuristics == {}


@pytest.mark.parametrize("extra, field, needle", [
    ('autotune = true\nnum_warps = 8\nconstexprs = { UNROLL = 1 }\n', "num_warps", "each autotune config sets it"),
    ('autotune = true\nconstexprs = { BLOCK = 64, UNROLL = 1 }\n', "constexprs", "Conflicting meta-parameters"),
    ('autotune = true\n', "constexprs", "UNROLL is computed at launch by @triton.heuristics"),
    ('configs = [3]\nconstexprs = { UNROLL = 1 }\n', "configs", "config 3 does not exist: the decorator lists 3"),
    ('configs = "some"\n', "configs", 'must be "all" or a list of config indices'),
    ('autotune = true\nconstexprs = { UNROLL = 1, n = [1, 2] }\n', "constexprs", "a list of values is only for"),
    ('autotune = true\nconstexprs = { UNROLL = 1 }\ntune = { args = "tune_args.py:make", shapes = [{ m = 1 }] }\n',
     "tune", "gives no value for n"),
    ('autotune = true\nconstexprs = { UNROLL = 1 }\ntune = { args = "nope.py:make", shapes = [{ n = 1 }] }\n',
     "tune", "'nope.py' does not exist"),
    ('tune = { args = "tune_args.py:make", shapes = [{ n = 1 }] }\nconstexprs = { BLOCK = 1, UNROLL = 1 }\n',
     "tune", "a tune plan needs autotune = true"),
])
def test_bad_rows_name_the_field_at_its_line(tmp_path, extra, field, needle):
    text = ROW + extra
    with pytest.raises(VariantError) as info:
        load_variants(_lib(tmp_path, text))
    err = info.value
    assert needle in err.message and f"field {field!r}" in err.message
    # at the field's line, or at the row's header when the row does not write the field
    assert err.loc.source_line.lstrip().startswith(field if f"{field} =" in text else "[[variant]]")


def test_autotune_on_a_kernel_without_the_decorator_is_refused(tmp_path):
    kernel = "import triton\n\n@triton.jit\ndef scale(x_ptr, out_ptr, n):\n    pass\n"
    with pytest.raises(VariantError, match="scale in k.py has no @triton.autotune decorator"):
        load_variants(_lib(tmp_path, ROW + "autotune = true\n", kernel))


def test_a_decorator_that_cannot_be_read_is_located_in_the_kernel_file(tmp_path):
    kernel = KERNEL.replace('key=["n"]', 'key=["n"], pre_hook=lambda args: None')
    with pytest.raises(CompilationError) as info:
        load_variants(_lib(tmp_path, ROW + "autotune = true\nconstexprs = { UNROLL = 1 }\n", kernel))
    assert info.value.loc.file == "k.py" and "pre_hook" in info.value.message
    assert "pre_hook" in info.value.loc.source_line
    # with row errors collected (a --continue build) the other kernels' rows still load
    (tmp_path / "other.py").write_text("import triton\n\n@triton.jit\ndef other(x_ptr, out_ptr, n):\n    pass\n")
    good = ROW.replace('"scale"', '"other"').replace('"k.py"', '"other.py"')
    (tmp_path / "variants.toml").write_text(ROW + "autotune = true\nconstexprs = { UNROLL = 1 }\n\n" + good)
    errors = []
    vs = load_variants(tmp_path, row_errors=errors)
    assert [i for i, _ in errors] == [1] and [v.name for v in vs] == ["other"]


def test_a_real_build_records_autotune_and_heuristics_for_the_runtime(tmp_path, new_project, monkeypatch):
    """Build a small autotuned kernel through the compiler, then launch it on a recording driver:
    the runtime reads the records and picks the variant the table and heuristics say."""
    src = tmp_path / "src"
    (src / "kernels").mkdir(parents=True)
    _lib(src / "kernels", ROW + 'autotune = true\nconstexprs = { UNROLL = [1, 8] }\n')
    (src / "dodo.py").write_text((Path(__file__).resolve().parents[2] / "dodo.py").read_text())
    proj = new_project(tmp_path / "p", "real", source=src)
    proj.env = {"TTBUILD_CACHE": "off"}
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text[-3000:]
    doc = json.loads((proj.artifacts / "lib" / "scale.c2.EVEN-0.UNROLL-1.json").read_text())
    assert doc["autotune"]["config"] == 2 and doc["autotune"]["kwargs"] == {"BLOCK": 512}
    assert doc["heuristics"]["EVEN"] == "args['n'] % args['BLOCK'] == 0"
    assert doc["num_warps"] == 4 and doc["constexprs"]["BLOCK"] == 512

    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
    from runtime_fakes import FakeTorch, RecordingDriver

    import ttbuild.runtime as rt

    (proj.artifacts / "tuning").mkdir()
    (proj.artifacts / "tuning" / "scale.json").write_text(json.dumps(
        {"schema": "ttbuild.tuning/1", "entries": [{"key": [4096, "fp32", "fp32"], "config": 2}]}))
    torch = FakeTorch(monkeypatch)
    drv = RecordingDriver(raw=False)
    lib = rt.load(str(proj.artifacts), driver=drv)
    drv.params_of = {"scale": 3}
    x, out = torch.Tensor(0x1000), torch.Tensor(0x2000)
    assert lib.scale.select(x, out, 4096).variant == "scale.c2.EVEN-1.UNROLL-8"
    assert lib.scale.select(x, out, 4000).variant == "scale.c2.EVEN-0.UNROLL-8"
    assert lib.scale.select(x, out, 64).variant == "scale.c2.EVEN-0.UNROLL-1"  # nearest recorded key: 4096
    lib.scale[(8,)](x, out, 4096)
    assert drv.launches[-1]["block_x"] == 4 * 32
