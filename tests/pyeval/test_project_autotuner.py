"""A project's own autotune decorator (a factory returning a subclass of Triton's Autotuner) read as the Autotuner it constructs; Triton 3.6 holds the same configs."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from ttbuild.errors import CompilationError
from ttbuild.graph.variants import load_variants
from ttbuild.pyeval.modules import Project, lookup, read_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import run_triton, triton_python

# A config cache in the project's own idiom: the factory's closure builds a subclass of Autotuner
# whose run() would consult a cache first; what it compiles are the configs it passes up.
TUNE = '''
import triton
from triton.runtime.autotuner import Autotuner

NEW_TRITON = tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 4)


class RememberingTuner(Autotuner):
    """Remembers the best config per key across processes (not read at build time)."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs):
        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs)
        self.remembered = {}

    def run(self, *args, **kwargs):
        return super().run(*args, **kwargs)


def remembering_autotune(configs, key=None, reset_to_zero=None, restore_value=None, warmup=None,
                         cache_results=False):
    if key is None:
        key = []

    def decorator(fn):
        extra = {}
        if NEW_TRITON:
            extra = {"cache_results": cache_results}
        return RememberingTuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value,
                                warmup=warmup, **extra)

    return decorator


TUNE_KW = {"cache_results": True}
'''

KERNEL = '''
import triton
import triton.language as tl

from pkg.tune import TUNE_KW, remembering_autotune

WIDTHS = ",".join(str(w) for w in (64, 128)).split(",")


@remembering_autotune(
    configs=[triton.Config({"BLOCK": int(b)}, num_warps=w) for b in WIDTHS for w in (2, 4)],
    key=["n"],
    **TUNE_KW,
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit(do_not_specialize=["n"])
def scale(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = None if EVEN else offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
'''


def _project(tmp_path: Path, kernel: str = KERNEL, tune: str = TUNE) -> Path:
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tune.py").write_text(tune)
    (pkg / "ops.py").write_text(kernel)
    (tmp_path / "variants.toml").write_text(
        '[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "scale"\nmodule = "pkg.ops"\nkernel = "scale"\n'
        'signature = "*fp32:16,i32"\nautotune = true\nconstexprs = { EVEN = [true] }\n')
    return tmp_path


def test_the_factorys_autotuner_subclass_expands_into_its_configs(tmp_path):
    variants = load_variants(_project(tmp_path))
    got = [(v.name, v.constexprs["BLOCK"], v.options.num_warps) for v in variants]
    assert got == [("scale.c0", 64, 2), ("scale.c1", 64, 4), ("scale.c2", 128, 2),
                   ("scale.c3", 128, 4)]


def test_the_module_read_holds_the_constructed_autotuner():
    files = {"pkg": ("pkg/__init__.py", b""), "pkg.tune": ("pkg/tune.py", TUNE.encode()),
             "pkg.ops": ("pkg/ops.py", KERNEL.encode())}
    kernel = lookup(read_module(Project(files, capability=90), "pkg.ops"), "scale")
    assert kernel.wrappers == ("triton.jit", "triton.heuristics", "triton.autotune")
    t = kernel.tuning
    assert t.cls == "RememberingTuner" and t.args["key"] == ["n"] and t.args["cache_results"] is True
    assert t.at == (10, 1) and t.args["arg_names"] == ["x_ptr", "n", "BLOCK", "EVEN"]


@pytest.mark.parametrize("change, says", [
    (("        self.remembered = {}", "        self.configs = configs[:1]"),
     "`RememberingTuner` assigns `self.configs`"),
    (("        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs)\n",
      "        configs = configs[:1]\n        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, "
      "**kwargs)\n"), "must begin with `super().__init__(...)`"),
    (("warmup=warmup, **extra)", "warmup=warmup, pre_hook=print, **extra)"), "RememberingTuner(pre_hook=...)"),
])
def test_a_subclass_that_changes_what_is_compiled_is_refused_at_its_line(tmp_path, change, says):
    with pytest.raises(CompilationError, match=says.replace("(", r"\(").replace(")", r"\)")) as e:
        load_variants(_project(tmp_path, tune=TUNE.replace(*change)))
    assert e.value.loc is not None and e.value.loc.file.endswith(("tune.py", "ops.py"))


ORACLE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from triton.runtime.autotuner import Autotuner
import pkg.ops as ops
tuner = ops.scale  # the Autotuner subclass around Heuristics around the JITFunction
assert isinstance(tuner, Autotuner), type(tuner)
print(json.dumps([[c.kwargs, c.num_warps, c.num_stages] for c in tuner.configs] + [list(tuner.keys)]))
"""


def test_triton_holds_the_same_configs(tmp_path):
    triton_python()
    root = _project(tmp_path)
    theirs = json.loads(run_triton(ORACLE, str(root / "src")).splitlines()[-1])
    ours = [[v.constexprs and {"BLOCK": v.constexprs["BLOCK"]}, v.options.num_warps, v.options.num_stages]
            for v in load_variants(root)]
    assert theirs == ours + [["n"]]


def test_string_building_and_format_at_module_level():
    text = textwrap.dedent('''
        def constraints(n):
            return ",".join("=r" for i in range(n)) + "," + ",".join("r" for i in range(n))
        ASM = " ".join("{{mov.b32 ${out}, ${inp};}}".format(out=i, inp=i + 2).split("\\n") for i in range(2))
        C = constraints(2)
        WIDE = "{:>9999999}".format(1)
    ''')
    mod = read_module(Project({"m": ("m.py", text.encode())}), "m")
    assert lookup(mod, "C") == "=r,=r,r,r"
    with pytest.raises(CompilationError, match="is not evaluated"):
        lookup(mod, "WIDE")


FITS = TUNE + '''
import torch


def fits_large(index=0):
    try:
        return torch.cuda.get_device_properties(index).shared_memory_per_block_optin >= 200 * 1024
    except Exception:
        return False
'''

DIRECT = '''
import triton
import triton.language as tl

from pkg.tune import fits_large


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=w) for w in [2, 4] + ([8] if fits_large() else [])],
                 key=["n"])
@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)
'''


@pytest.mark.parametrize("target, warps", [("cuda:90", [2, 4, 8]), ("cuda:86", [2, 4])])
def test_a_decorator_argument_calls_a_function_of_another_module(tmp_path, target, warps):
    root = _project(tmp_path, kernel=DIRECT, tune=FITS)
    (root / "variants.toml").write_text((root / "variants.toml").read_text().replace(
        "autotune = true\nconstexprs = { EVEN = [true] }\n", f'autotune = true\nconstexprs = {{ EVEN = true }}\n'
                                                          f'target = "{target}"\n'))
    assert [v.options.num_warps for v in load_variants(root)] == warps
