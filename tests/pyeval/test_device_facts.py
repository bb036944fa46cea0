"""Device facts a project module reads: the SM count and device name from the row's GPU model (ttbuild.target.GPU_MODELS), in the parse key; undecidable tests that do not matter."""

from __future__ import annotations

import textwrap

import pytest

from ttbuild.errors import CompilationError
from ttbuild.graph.keys import stage_options
from ttbuild.graph.tasks import variant_doc
from ttbuild.graph.variants import VariantError, load_variants
from ttbuild.options import OptionError, Options
from ttbuild.pyeval import objects
from ttbuild.pyeval.modules import Project, lookup, read_module
from ttbuild.target import GPU_MODELS, Target, device_facts

SMS = '''
import torch
import triton
import triton.language as tl

NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count
DRIVER_SMS = triton.runtime.driver.active.utils.get_device_properties(0)["multiprocessor_count"]
SMEM = triton.runtime.driver.active.utils.get_device_properties(0)["max_shared_mem"]
HOPPER = triton.runtime.driver.active.get_current_target().backend == "cuda" and (
    "NVIDIA H" in torch.cuda.get_device_name(0) or torch.cuda.get_device_capability()[0] == 9)
AMPERE = "NVIDIA A" in torch.cuda.get_device_name(0) or torch.cuda.get_device_capability()[0] == 8
PROGRAMS = tl.constexpr(NUM_SMS * 2)
'''


def _read(text: str, target: str = "cuda:90", gpu: str = ""):
    return read_module(Project({"m": ("m.py", textwrap.dedent(text).encode())}, **device_facts(target, gpu)), "m")


def test_the_sm_count_and_name_come_from_the_rows_gpu_model():
    mod = _read(SMS, gpu="h100-sxm")
    assert lookup(mod, "NUM_SMS") == lookup(mod, "DRIVER_SMS") == 132 and lookup(mod, "SMEM") == 232448
    assert lookup(mod, "PROGRAMS") == objects.Constexpr(264) and lookup(mod, "AMPERE") is False
    assert lookup(_read(SMS, gpu="h20"), "NUM_SMS") == 78


def test_without_a_gpu_model_the_sm_count_is_refused_at_its_read():
    mod = _read(SMS)
    assert lookup(mod, "HOPPER") is True  # `unknown name test or capability 9` is True either way
    with pytest.raises(CompilationError, match=r'gpu = "h100-sxm"') as e:
        lookup(mod, "NUM_SMS")
    assert (e.value.loc.line, e.value.loc.col) == (6, 10)
    with pytest.raises(CompilationError, match="SM count"):
        lookup(mod, "DRIVER_SMS")
    with pytest.raises(CompilationError, match="get_device_name"):  # `unknown or False` stays unknown
        lookup(mod, "AMPERE")


def test_a_gpu_model_is_checked_against_the_target():
    assert Options(target="cuda:90", gpu="h200").gpu == "h200"
    with pytest.raises(OptionError, match="compute capability 80, not of the target cuda:90"):
        Options(target="cuda:90", gpu="a100")
    with pytest.raises(OptionError, match="unknown GPU model 'h300'"):
        Options(gpu="h300")
    assert all(m.capability == Target.parse(f"cuda:{m.capability}").capability for m in GPU_MODELS.values())


def _rows(tmp_path, gpus: list[str]):
    (tmp_path / "src" / "pkg").mkdir(parents=True, exist_ok=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "sms.py").write_text(SMS + textwrap.dedent('''
        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr + tl.program_id(0), PROGRAMS)
    '''))
    rows = "".join(f'[[variant]]\nname = "k{i}"\nmodule = "pkg.sms"\nkernel = "k"\nsignature = "*i32:16"\n'
                   + (f'gpu = "{g}"\n' if g else "") + "\n" for i, g in enumerate(gpus))
    (tmp_path / "variants.toml").write_text('[project]\nsource_roots = ["src"]\n\n' + rows)
    return load_variants(tmp_path)


def test_the_gpu_model_is_in_the_parse_key_of_a_module_that_reads_device_facts(tmp_path):
    a, b, c = _rows(tmp_path, ["h100-sxm", "h20", ""])
    parse = [stage_options(v)["parse"] for v in (a, b, c)]
    assert parse[0]["gpu"] == "h100-sxm" and parse[1]["gpu"] == "h20" and "gpu" not in parse[2]
    assert {p["target"] for p in parse} == {"cuda:90"}
    assert stage_options(a)["ttgir"] == stage_options(b)["ttgir"]  # nothing past the parse depends on it


def test_the_metadata_names_the_gpu_model_only_where_a_module_read_device_facts(tmp_path):
    assert [variant_doc(v)["gpu"] for v in _rows(tmp_path / "reads", ["h100-sxm", "h20", ""])] == ["h100-sxm", "h20", ""]
    plain = tmp_path / "plain"
    (plain / "src" / "pkg").mkdir(parents=True)
    (plain / "src" / "pkg" / "__init__.py").write_text("")
    (plain / "src" / "pkg" / "k.py").write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                                               "def k(x_ptr):\n    tl.store(x_ptr, 1)\n")
    (plain / "variants.toml").write_text('[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "k"\n'
                                         'module = "pkg.k"\nkernel = "k"\nsignature = "*i32:16"\ngpu = "h20"\n')
    (v,) = load_variants(plain)
    assert variant_doc(v)["gpu"] == "" and "gpu" not in stage_options(v)["parse"]  # the build's output is any H-class GPU's


def test_a_wrong_gpu_model_is_refused_at_its_row(tmp_path):
    with pytest.raises(VariantError, match="gpu") as e:
        _rows(tmp_path, ["b200"])
    assert e.value.loc.line == 9 and e.value.loc.source_line == 'gpu = "b200"'


def test_an_undecidable_if_keeps_what_both_branches_bind_alike():
    mod = _read('''
        import functools
        import torch
        from packaging import version

        def backend():
            try:
                return triton.runtime.driver.active.get_current_target().backend
            except Exception:
                return "cpu"

        import triton
        device = backend() if backend() != "hip" else "cuda"
        lib = getattr(torch, device)
        if version.parse(torch.__version__) >= version.parse("2.4"):
            if device == "cpu":
                device = "cuda"
            fwd = functools.partial(torch.amp.custom_fwd, device_type=device)
        else:
            fwd = lib.amp.custom_fwd
    ''')
    assert lookup(mod, "device") == "cuda" and lookup(mod, "lib") == objects.External("torch.cuda")
    with pytest.raises(CompilationError, match=r"torch.__version__"):
        lookup(mod, "fwd")


SHARED = '''
import torch
import triton
from enum import Enum
from functools import cache


class Tier(Enum):
    SMALL = 101376
    LARGE = 232448
    OTHER = 102400

    @classmethod
    def limit(cls, name: str) -> int:
        try:
            return cls[name.upper()].value
        except KeyError:
            return cls.OTHER.value


def every_gpus_shared_memory():
    try:
        return [triton.runtime.driver.active.utils.get_device_properties(i)["max_shared_mem"]
                for i in range(torch.cuda.device_count())]
    except Exception:
        return [-1]


@cache
def fits(tier: str = "none", index: int = 0) -> bool:
    try:
        return every_gpus_shared_memory()[index] >= Tier.limit(tier)
    except Exception:
        return False


LARGE = fits("large")
ANY = fits()
SECOND = fits("large", 1)
BY_VALUE = Tier(232448).name
'''


def test_per_gpu_lists_enum_lookups_and_caught_key_errors():
    mod = _read(SHARED)
    assert lookup(mod, "LARGE") is True and lookup(mod, "ANY") is True and lookup(mod, "BY_VALUE") == "LARGE"
    assert lookup(_read(SHARED, target="cuda:86"), "LARGE") is False  # 99 KB opt-in on 8.6
    with pytest.raises(CompilationError, match="GPU of index 1"):  # no handler takes what the reader refuses
        lookup(mod, "SECOND")


def test_an_undecidable_if_whose_branch_imports_a_missing_module_is_not_fatal():
    text = textwrap.dedent('''
        import torch
        WIDTH = 4
        if torch.version.cuda >= "12.4":
            from p.missing import helper
            WIDTH = 8
        DEPTH = 2
    ''')
    proj = Project({"p": ("p/__init__.py", b""), "p.m": ("p/m.py", text.encode())}, **device_facts("cuda:90"))
    mod = read_module(proj, "p.m")
    assert lookup(mod, "DEPTH") == 2  # the module is read past the `if`
    with pytest.raises(CompilationError, match="torch.version.cuda"):
        lookup(mod, "WIDTH")
