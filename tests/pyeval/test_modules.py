"""ttbuild.pyeval.modules: a project's modules read as Python executed them, never imported; every refusal located."""

from __future__ import annotations

import json
import textwrap

import pytest

from ttbuild.errors import CompilationError
from ttbuild.frontend.canon import canonicalize
from ttbuild.locs import locate
from ttbuild.pyeval import objects
from ttbuild.pyeval.modules import Project, lookup, read_module
from ttbuild.stages import ttir


def project(env=None, capability=90, strict_env=False, **modules: str) -> Project:
    """A project of the given modules: keyword `a__b` is module `a.b` (`a__init` a package)."""
    files = {}
    for key, text in modules.items():
        name = key.replace("__init", "").replace("__", ".").rstrip(".")
        file = key.replace("__", "/") + ".py" if not key.endswith("__init") else key.replace("__", "/") + "__init__.py"
        files[name] = (file, textwrap.dedent(text).encode())
    return Project(files, env=env, capability=capability, strict_env=strict_env)


def value(proj: Project, module: str, name: str):
    return lookup(read_module(proj, module), name)


def test_version_checks_and_try_except_take_triton_36s_branch():
    proj = project(m='''
        import importlib.metadata
        import triton
        from packaging import version
        if version.parse(triton.__version__) >= version.parse("3.0.0"):
            try:
                from triton.language.libdevice import rsqrt  # not in Triton 3.x
            except (ImportError, ModuleNotFoundError):
                from triton.language.extra.cuda.libdevice import rsqrt
        else:
            from triton.language.math import rsqrt
        NEW = importlib.metadata.version("triton") >= "3.6"
        OLD = version.Version(triton.__version__) < version.Version("3.6.0")
        fast = rsqrt
    ''')
    assert value(proj, "m", "fast") == objects.External("triton.language.extra.cuda.libdevice.rsqrt")
    assert value(proj, "m", "NEW") is True and value(proj, "m", "OLD") is False


def test_reexported_triton_constexprs_of_other_modules_and_relative_imports():
    proj = project(pkg__init="", pkg__shim="import triton\nimport triton.language as tl\n",
                   pkg__consts="import triton.language as tl\nMODE = tl.constexpr(3)\nPLAIN = 5\n",
                   pkg__ops__init="",
                   pkg__ops__k='''
        from ..shim import tl, triton
        from pkg.consts import MODE, PLAIN

        def _body(x, M: tl.constexpr = MODE):
            tl.store(x, M)

        body = triton.jit(_body)
        tuned = triton.heuristics({"M": lambda a: 1})(triton.jit(_body))
    ''')
    assert value(proj, "pkg.ops.k", "MODE") == objects.Constexpr(3)
    assert value(proj, "pkg.ops.k", "PLAIN") == 5
    kernel = value(proj, "pkg.ops.k", "tuned")
    assert isinstance(kernel, objects.Kernel) and kernel.wrappers == ("triton.jit", "triton.heuristics")
    src = proj.files["pkg.ops.k"][1]
    desc, _ = canonicalize(src, "body", "pkg/ops/k.py", proj, "pkg.ops.k")
    assert desc["globals"] == {"MODE": {"constexpr": True, "value": 3}}
    assert desc["imports"]["tl"] == "triton.language"


def test_environment_reads_are_recorded_and_strict_names_refused():
    proj = project(env={"BLOCK_X": "64"}, strict_env=True, m='''
        import os
        BLOCK = int(os.environ.get("BLOCK_X", "32"))
        OTHER = os.getenv("UNSEEN")
    ''')
    assert value(proj, "m", "BLOCK") == 64
    assert proj.read_env == {"BLOCK_X": "64"}
    with pytest.raises(CompilationError, match="'UNSEEN', whose name the build could not see") as e:
        value(proj, "m", "OTHER")
    assert (e.value.loc.line, e.value.loc.col) == (4, 8)


def test_device_facts_come_from_the_target():
    proj = project(capability=80, m='''
        import torch
        WARP = torch.cuda.get_device_properties(0).warp_size
        MAJOR, MINOR = torch.cuda.get_device_capability()
        SMS = torch.cuda.get_device_properties(0).multi_processor_count
        ON_CUDA = torch.cuda.is_available() and not torch.xpu.is_available() and torch.version.hip is None
    ''')
    assert value(proj, "m", "WARP") == 32 and value(proj, "m", "MAJOR") == 8 and proj.read_target
    assert value(proj, "m", "ON_CUDA") is True
    with pytest.raises(CompilationError, match="depends on the GPU model") as e:
        value(proj, "m", "SMS")
    assert e.value.loc.line == 5


def test_opaque_values_are_fine_until_a_branch_needs_them():
    proj = project(m='''
        import torch
        from transformers import AutoThing
        DEVICE = torch.cuda.current_device()
        if torch.cuda.current_device() == 0:
            MODE = 1
        else:
            MODE = 2
    ''')
    assert isinstance(value(proj, "m", "DEVICE"), objects.Opaque)
    with pytest.raises(CompilationError, match=r"`torch.cuda.current_device\(\) == 0` without running the file: it needs the value of") as e:
        value(proj, "m", "MODE")
    assert (e.value.loc.line, e.value.loc.col) == (5, 3)


def test_a_failed_import_outside_try_is_located():
    proj = project(m="import triton\nfrom triton.language.libdevice import tanh\n")
    with pytest.raises(CompilationError, match="cannot import `triton.language.libdevice`") as e:
        read_module(proj, "m")
    assert e.value.loc.line == 2


@pytest.mark.parametrize("expr, says", [
    ("0.5 in range(10**15)", "the range scanned by `in`"),
    ("9**9**9**9", "more than 4096 bits"),
    ("[0] * 10**9", "more than the 1000000"),
    ("1 << 10**10", "more than 4096 bits"),
])
def test_module_level_costs_are_bounded(expr, says):
    proj = project(m=f"X = {expr}\n")
    with pytest.raises(CompilationError, match=says) as e:
        value(proj, "m", "X")
    assert e.value.loc.line == 1


def test_kernel_reading_an_opaque_global_is_refused_at_the_use():
    src = '''
        import torch
        import triton
        import triton.language as tl
        ON = torch.cuda.current_device()

        @triton.jit
        def k(x):
            tl.store(x, ON)
    '''
    proj = project(m=src)
    with pytest.raises(CompilationError, match="reads the global `ON`") as e:
        canonicalize(proj.files["m"][1], "k", "m.py", proj, "m")
    assert (e.value.loc.line, e.value.loc.col) == (9, 16)


def test_relative_import_beyond_the_top_and_a_syntax_error_are_located():
    proj = project(m="from . import x\n")
    with pytest.raises(CompilationError, match="beyond the top-level package"):
        value(proj, "m", "x")
    proj = project(pkg__init="", pkg__bad="def (:\n", pkg__m="from . import bad\n")
    with pytest.raises(CompilationError, match="invalid syntax") as e:
        value(proj, "pkg.m", "bad")
    assert e.value.loc.file == "pkg/bad.py" and e.value.loc.line == 1


def test_a_deeply_nested_module_statement_is_refused_only_when_read():
    proj = project(m="import triton\nX = " + " + ".join(["1"] * 800) + "\nY = 2\n")
    assert value(proj, "m", "Y") == 2
    with pytest.raises(CompilationError, match="nested too deeply") as e:
        value(proj, "m", "X")
    assert e.value.loc.line == 2


def test_star_imports_bind_what_python_binds():
    proj = project(pkg__init="from .ops import *\nfrom .hidden import *\n",
                   pkg__ops="import triton\nSCALE = 2\n_PRIVATE = 3\n\n@triton.jit\ndef k(x):\n    pass\n",
                   pkg__hidden="__all__ = ['_shown']\n_shown = 7\nother = 8\n",
                   m="from pkg import *\nfrom torch.nn import *\nLAYER = Linear\n")
    assert value(proj, "pkg", "SCALE") == 2 and isinstance(value(proj, "pkg", "k"), objects.Kernel)
    assert value(proj, "pkg", "_PRIVATE") is None and value(proj, "pkg", "_shown") == 7
    assert value(proj, "pkg", "other") is None  # __all__ decides
    assert value(proj, "m", "SCALE") == 2
    assert isinstance(value(proj, "m", "LAYER"), objects.Opaque)  # perhaps torch.nn's: opaque, not undefined
    with pytest.raises(CompilationError, match="name `Linear` is not defined"):
        value(project(m="LAYER = Linear\n"), "m", "LAYER")


def test_a_reexported_version_class_and_a_jit_factory():
    proj = project(m='''
        import triton
        from pkg_utils import Version
        NEW = Version(triton.__version__) >= Version("3.0.0")

        @triton.jit()
        def k(x):
            pass
    ''')
    assert value(proj, "m", "NEW") is True and isinstance(value(proj, "m", "k"), objects.Kernel)
    with pytest.raises(CompilationError, match="takes the function to wrap as its one argument") as e:
        value(project(m="import triton\ndef f(x):\n    pass\nk = triton.jit(f, f)\n"), "m", "k")
    assert e.value.loc.line == 4


def test_a_helper_read_as_an_attribute_of_a_project_module_is_inlined():
    proj = project(pkg__init="", pkg__ext='''
        import triton
        from triton import language as tl
        WIDE = tl.constexpr(2)

        @triton.jit
        def row_id(axis: int) -> tl.tensor:
            return tl.program_id(axis).to(tl.int64) * WIDE
    ''', pkg__k='''
        import triton
        import triton.language as tl
        from pkg import ext

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            offs = ext.row_id(0) * BLOCK + tl.arange(0, BLOCK) + ext.WIDE
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)
    ''')
    desc, _ = canonicalize(proj.files["pkg.k"][1], "k", "pkg/k.py", proj, "pkg.k")
    assert set(desc["functions"]) == {"k", "ext.row_id"}
    assert desc["globals"]["ext.WIDE"] == {"constexpr": True, "value": 2}
    text = ttir.run({"json": json.dumps(desc).encode()}, {"signature": ["*fp32:16"], "constexprs": {"BLOCK": 64}})["ttir"]
    assert b'"tt.get_program_id"' in text and b'"arith.extsi"' in text


def test_a_memoized_device_probe_is_read_through_functools_cache():
    proj = project(m='''
        import functools
        import torch

        @functools.cache
        def platform():
            return "cuda" if torch.cuda.is_available() else "cpu"

        @functools.lru_cache(maxsize=None)
        def warps():
            return 8 if platform() == "cuda" else 4

        WARPS = warps()
    ''')
    assert value(proj, "m", "WARPS") == 8 and proj.read_target


def test_an_error_in_a_helper_of_another_module_names_that_file():
    proj = project(pkg__init="", pkg__ext='''
        import triton
        import triton.language as tl

        @triton.jit
        def bad(x):
            return x.no_such_attribute
    ''', pkg__k='''
        import triton
        import triton.language as tl
        from pkg.ext import bad

        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr, bad(tl.load(x_ptr)))
    ''')
    desc, loc = canonicalize(proj.files["pkg.k"][1], "k", "pkg/k.py", proj, "pkg.k")
    assert loc["files"] == {"pkg/ext.py": {"6": "def bad(x):", "7": "    return x.no_such_attribute"}}
    with pytest.raises(CompilationError) as e:
        ttir.run({"json": json.dumps(desc).encode()}, {"signature": ["*fp32:16"], "constexprs": {}})
    where = locate(e.value, loc).loc
    assert (where.file, where.line, where.col, where.source_line) == ("pkg/ext.py", 7, 11, "    return x.no_such_attribute")


def test_triton_signatures_and_the_current_target_answer_as_triton_36():
    proj = project(m='''
        import inspect
        import triton
        HAS_CACHE = "cache_results" in inspect.signature(triton.autotune).parameters
        KW = {"cache_results": True} if HAS_CACHE else {}
        BACKEND = triton.runtime.driver.active.get_current_target().backend
        IS_AMD = BACKEND == "hip"
        ARCH = triton.runtime.driver.active.get_current_target().arch
    ''')
    assert value(proj, "m", "KW") == {"cache_results": True} and value(proj, "m", "IS_AMD") is False
    assert value(proj, "m", "ARCH") == 90 and proj.read_target


def test_hasattr_on_triton_answers_as_triton_36():
    proj = project(m='''
        import triton
        import triton.language as tl
        if hasattr(triton.language, "_experimental_make_tensor_descriptor"):
            make_desc = tl._experimental_make_tensor_descriptor
        elif hasattr(tl, "make_tensor_descriptor"):
            make_desc = tl.make_tensor_descriptor
        else:
            make_desc = None
        HAS_CFN = hasattr(triton, "constexpr_function")
    ''')
    assert value(proj, "m", "make_desc") == objects.External("triton.language.make_tensor_descriptor")
    assert value(proj, "m", "HAS_CFN") is True


def test_shared_memory_per_block_comes_from_the_targets_capability():
    src = '''
        import torch
        props = torch.cuda.get_device_properties(0)
        OPTIN = int(getattr(props, "shared_memory_per_block_optin", props.shared_memory_per_block))
        STATIC = props.shared_memory_per_block
    '''
    assert value(project(m=src), "m", "OPTIN") == 232448 and value(project(m=src), "m", "STATIC") == 49152
    assert value(project(capability=86, m=src), "m", "OPTIN") == 101376
    with pytest.raises(CompilationError, match="depends on the GPU model"):
        value(project(m="import torch\nN = torch.cuda.get_device_properties(0).multi_processor_count\n"), "m", "N")


def test_a_constexpr_decorated_function_is_a_compile_time_helper():
    proj = project(m='''
        import triton.language as tl

        @tl.constexpr
        def widen(n):
            return n * 2
        LIMIT = tl.constexpr(4)
    ''')
    assert isinstance(value(proj, "m", "widen"), objects.ConstexprFunction)
    assert value(proj, "m", "LIMIT") == objects.Constexpr(4)


@pytest.mark.parametrize("cap", [70, 75, 80, 86, 87, 89, 90, 100, 103, 120])
def test_the_opt_in_shared_memory_agrees_with_the_targets(cap):
    from ttbuild.target import Target  # noqa: PLC0415 - the rule pyeval restates

    assert objects.DeviceProperties(cap).shared_memory_per_block_optin == Target("cuda", cap).max_shared_bytes


def test_a_device_probe_through_a_third_party_package_is_refused_at_its_branch():
    """A third-party package's answer (an accelerator probe of a package outside the roots) is no device fact of the
    target: the reader refuses it at the test that needs it, inside the function, naming the package."""
    proj = project(pkg__init="", pkg__device='''
        import torch

        def probe_other():
            try:
                from othervendor.rt import available
            except ImportError:
                return False
            return available()

        OTHER = probe_other()

        def device_type():
            if OTHER:
                return "other"
            return "cuda" if torch.cuda.is_available() else "cpu"

        DEVICE = device_type()
    ''', pkg__k='''
        import triton
        import triton.language as tl
        from .device import DEVICE
        if DEVICE == "other":
            from othervendor.lang import tanh as fast_tanh
        else:
            from triton.language.extra.libdevice import tanh as fast_tanh

        @triton.jit
        def k(x):
            tl.store(x, fast_tanh(tl.load(x)))
    ''')
    with pytest.raises(CompilationError, match=r"cannot decide `OTHER` without running the file: it needs the value of "
                                               r"`othervendor.rt.available\(...\)`, the result of a call into `othervendor`, "
                                               r"which is not under the project's source roots") as e:
        canonicalize(proj.files["pkg.k"][1], "k", "pkg/k.py", proj, "pkg.k")
    assert (e.value.loc.file, e.value.loc.line, e.value.loc.col) == ("pkg/device.py", 14, 7)
