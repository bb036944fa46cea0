"""[project] source_roots and a row's `module`: validated like the other fields, each mistake at its line."""

from __future__ import annotations

import pytest

from ttbuild.errors import CompilationError
from ttbuild.graph.variants import VariantError, load_variants

ROW = 'kernel = "k"\nsignature = "*fp32:16"\n'
KERNEL = "import triton\n\n\n@triton.jit\ndef k(x):\n    pass\n"


def _list(tmp_path, text: str):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "ops.py").write_text(KERNEL)
    (tmp_path / "variants.toml").write_text(text)
    return tmp_path


def test_a_module_row_resolves_under_the_roots_and_carries_its_import_closure(tmp_path):
    (v,) = load_variants(_list(tmp_path, f'[project]\nsource_roots = ["src"]\n\n[[variant]]\nmodule = "pkg.ops"\n{ROW}'))
    assert v.file == "src/pkg/ops.py" and v.module == "pkg.ops"
    assert v.parse["modules"] == {"pkg": "src/pkg/__init__.py", "pkg.ops": "src/pkg/ops.py"}
    # a file row under a root is the same project kernel
    (w,) = load_variants(_list(tmp_path / "b", f'[project]\nsource_roots = ["src"]\n\n[[variant]]\nfile = "src/pkg/ops.py"\n{ROW}'))
    assert w.module == "pkg.ops" and w.parse == v.parse


@pytest.mark.parametrize("text, line, says", [
    ('[project]\nsource_roots = ["nowhere"]\n', 2, "'nowhere' is not a folder"),
    ('[project]\nsource_roots = "src"\n', 2, "must be a list of folder names"),
    ('[project]\nroots = ["src"]\n', 2, "unknown key 'roots'"),
    (f'[project]\nsource_roots = ["src"]\n\n[[variant]]\nmodule = "pkg.nope"\n{ROW}', 5, "no pkg/nope.py"),
    (f'[project]\nsource_roots = ["src"]\n\n[[variant]]\nmodule = "pkg.ops"\nfile = "src/pkg/ops.py"\n{ROW}', 5,
     "either 'file' or 'module'"),
    (f'[[variant]]\nmodule = "pkg.ops"\n{ROW}', 2, "no [project] source_roots"),
    (f'[[variant]]\n{ROW}', 1, "give the kernel's `file`, or its `module`"),
])
def test_mistakes_are_located(tmp_path, text, line, says):
    with pytest.raises(VariantError, match=says.replace("[", r"\[").replace("(", r"\(")) as e:
        load_variants(_list(tmp_path, text))
    assert e.value.loc.line == line


BY_CALL = '''import triton
import triton.language as tl


def _impl(x_ptr, n, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


tuned = triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])(
    triton.jit(_impl))


def even(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


even = triton.jit(even)
even = triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(even)
'''


def test_kernels_made_by_call_expand_and_parse(tmp_path):
    """Issue 30: autotune and heuristics applied by call expand like decorators, and parse finds the kernel."""
    from ttbuild.frontend.canon import canonicalize
    from ttbuild.pyeval.modules import Project

    root = _list(tmp_path, '[project]\nsource_roots = ["src"]\n\n'
                           '[[variant]]\nname = "tuned"\nmodule = "pkg.calls"\nkernel = "tuned"\n'
                           'signature = "*fp32:16,i32"\nautotune = true\n\n'
                           '[[variant]]\nname = "even"\nmodule = "pkg.calls"\nkernel = "even"\n'
                           'signature = "*fp32:16,i32"\nconstexprs = { BLOCK = 64 }\n')
    (root / "src" / "pkg" / "calls.py").write_text(BY_CALL)
    names = sorted(v.name for v in load_variants(root))
    assert names == ["even.EVEN-0", "even.EVEN-1", "tuned.c0", "tuned.c1"]
    project = Project({"pkg": ("src/pkg/__init__.py", b""), "pkg.calls": ("src/pkg/calls.py", BY_CALL.encode())})
    desc, _ = canonicalize(BY_CALL, "tuned", "src/pkg/calls.py", project, "pkg.calls")
    assert list(desc["functions"]) == ["tuned"] and desc["imports"]["tl"] == "triton.language"


TUNED = '''import triton
import triton.language as tl

from pkg.tuning import CACHE_KWARGS, WARPS, roomy

BLOCKS = (64, 128) if roomy() else (32,)


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in BLOCKS for w in WARPS],
                 key=["n"], **CACHE_KWARGS)
@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
'''


def test_autotune_reads_names_and_keyword_dicts_of_other_project_modules(tmp_path):
    tmp = _list(tmp_path, '[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "t"\nmodule = "pkg.ops"\n'
                          'kernel = "k"\nsignature = "*fp32:16,i32"\nautotune = true\n')
    (tmp / "src" / "pkg" / "ops.py").write_text(TUNED)
    (tmp / "src" / "pkg" / "tuning.py").write_text(
        'import inspect\nimport triton\n\nFAST = "cache_results" in ("cache_results",)\n'
        'CACHE_KWARGS = {"cache_results": True} if FAST else {}\nWARPS = [2, 4] if FAST else [8]\n'
        'def roomy():\n    return True\n')
    variants = load_variants(tmp)
    assert [(v.name, v.constexprs["BLOCK"], v.options.num_warps) for v in variants] == [
        ("t.c0", 64, 2), ("t.c1", 64, 4), ("t.c2", 128, 2), ("t.c3", 128, 4)]
    (tmp / "src" / "pkg" / "tuning.py").write_text('CACHE_KWARGS = {"cache_results": [1]}\nWARPS = [8]\ndef roomy():\n    return 1\n')
    with pytest.raises(CompilationError, match=r"`\*\*CACHE_KWARGS` must be a dict of names to literals") as e:
        load_variants(tmp)
    assert (e.value.loc.file, e.value.loc.line) == ("src/pkg/ops.py", 10)


LOADED = '''import triton
import triton.language as tl

from pkg.loader import table


@triton.autotune(configs=table.configs("copy"), key=["n"])
@triton.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.heuristics(table.heuristics("copy"))
@triton.jit
def heur(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''

# A config table a class reads from a data file at import: only running the module knows its values.
LOADER = '''import json
import os

import triton


class Table:
    def __init__(self):
        with open(os.path.join(os.path.dirname(__file__), "tuning.json")) as f:
            self.data = json.load(f)

    def configs(self, op):
        return [triton.Config(c["META"], num_warps=c["num_warps"]) for c in self.data[op]]

    def heuristics(self, op):
        return {"BLOCK": lambda args: self.data[op][0]["META"]["BLOCK"]}


table = Table()
'''


@pytest.mark.parametrize("row, built", [
    ('kernel = "tuned"\nconstexprs = { BLOCK = 128 }\nnum_warps = 4\n', ["r"]),
    ('kernel = "heur"\nconstexprs = { BLOCK = 128, EVEN = true }\n', ["r"]),
    ('kernel = "heur"\nconstexprs = { BLOCK = 128 }\n', ["r"]),  # EVEN has a default
])
def test_rows_giving_every_value_need_no_unreadable_config_list(tmp_path, row, built):
    """Issue 30: a configs list or heuristics dict from a project's loader (a class reading a data file) is
    not readable statically; a row that gives the values itself, as `ttbuild record` writes them, builds."""
    tmp = _list(tmp_path, f'[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "r"\nmodule = "pkg.ops"\n'
                          f'signature = "*fp32:16,i32"\n{row}')
    (tmp / "src" / "pkg" / "ops.py").write_text(LOADED)
    (tmp / "src" / "pkg" / "loader.py").write_text(LOADER)
    assert [v.name for v in load_variants(tmp)] == built


@pytest.mark.parametrize("row, line, col, says", [
    ('kernel = "tuned"\nconfigs = [0]\n', 7, 25, "cannot evaluate `table.configs('copy')` without running the file: "
     "ttbuild reads autotune configs statically"),
    ('kernel = "tuned"\nautotune = true\n', 7, 25, "this row takes its configs from that list (autotune / configs): "
     "give the config's constexprs, num_warps and num_stages in the row instead"),
    ('kernel = "heur"\n', 14, 19, "cannot read `triton.heuristics(table.heuristics('copy'))` without running the file"),
    ('kernel = "heur"\nconstexprs = { EVEN = true }\n', 14, 19, "the row leaves `BLOCK` to it"),
])
def test_rows_that_need_an_unreadable_list_get_its_location(tmp_path, row, line, col, says):
    tmp = _list(tmp_path, f'[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "r"\nmodule = "pkg.ops"\n'
                          f'signature = "*fp32:16,i32"\n{row}')
    (tmp / "src" / "pkg" / "ops.py").write_text(LOADED)
    (tmp / "src" / "pkg" / "loader.py").write_text(LOADER)
    with pytest.raises(CompilationError) as e:
        load_variants(tmp)
    assert says in e.value.message
    assert (e.value.loc.file, e.value.loc.line, e.value.loc.col) == ("src/pkg/ops.py", line, col)


# A project's own autotuner decorator whose construction the reader cannot follow (a class registry
# looked up by name, isinstance/issubclass on classes).
TUNER = '''import triton


class Tuner(triton.runtime.Autotuner):
    registry = {}

    @classmethod
    def get(cls, name):
        return cls.registry[name]


def mytuner(configs, key, policy="default"):
    if isinstance(policy, str):
        policy = Tuner.get(policy)

    def decorator(fn):
        return policy(fn, fn.arg_names, configs, key, None, None)

    return decorator
'''

BY_TUNER = '''import triton
import triton.language as tl

from pkg.tuner import mytuner


@mytuner(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''


def test_a_project_tuner_the_reader_cannot_follow_is_needed_only_by_tuned_rows(tmp_path):
    tmp = _list(tmp_path, '[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "r"\nmodule = "pkg.ops"\n'
                          'kernel = "k"\nsignature = "*fp32:16,i32"\nconstexprs = { BLOCK = 64 }\nnum_warps = 4\n')
    (tmp / "src" / "pkg" / "ops.py").write_text(BY_TUNER)
    (tmp / "src" / "pkg" / "tuner.py").write_text(TUNER)
    assert [v.name for v in load_variants(tmp)] == ["r"]
    (tmp / "variants.toml").write_text('[project]\nsource_roots = ["src"]\n\n[[variant]]\nname = "r"\nmodule = "pkg.ops"\n'
                                       'kernel = "k"\nsignature = "*fp32:16,i32"\nautotune = true\n')
    with pytest.raises(CompilationError) as e:
        load_variants(tmp)
    assert "this row takes its configs from that list" in e.value.message
    assert e.value.loc.file == "src/pkg/tuner.py" and e.value.loc.line == 13
