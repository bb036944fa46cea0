"""A runtime-only install: with every compiler module (MLIR, LLVM, doit, rich, xxhash) blocked from import, the runtime loads a library, selects variants, packages a wheel, and the CLI names the missing extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runtime_fakes import add_params, meta, write_lib

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("mlir", "llvmlite", "llvm", "doit", "rich", "xxhash", "triton", "torch", "nvidia")

# A meta-path finder that refuses the compiler's modules, as a runtime-only venv would.
BLOCKER = f"""
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {BLOCKED!r}:
            raise ImportError(f"blocked in the runtime-only test: {{name}}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def run(code: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + code, *args], capture_output=True, text=True,
                          cwd=cwd, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_the_blocker_blocks():
    out = run("import doit")
    assert out.returncode != 0 and "blocked in the runtime-only test: doit" in out.stderr


def test_runtime_loads_selects_and_launches_without_the_compiler(tmp_path):
    lib_dir = write_lib(tmp_path, [meta("add_fp32", "add_kernel", add_params("fp32")),
                                   meta("add_fp16", "add_kernel", add_params("fp16"))])
    code = f"""
import sys, json
import ttbuild.runtime as rt

class Driver:
    launched = []
    def context(self, hint): return 1, (9, 0)
    def load_function(self, image, entry, shared): return image
    def launch(self, fn, grid, block_x, shared, stream, addr, values): self.launched.append(fn)

class Half:
    __cuda_array_interface__ = {{"data": (4096, False), "typestr": "<f2", "shape": (4,), "version": 3}}

d = Driver()
lib = rt.load({str(lib_dir)!r}, driver=d)
lib.add_kernel[(1,)](Half(), Half(), Half(), 4)
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {BLOCKED!r} or m.split('.')[0] == 'cuda'
               or '.'.join(m.split('.')[:2]) in ('ttbuild.graph', 'ttbuild.backend', 'ttbuild.frontend',
                                                 'ttbuild.stages', 'ttbuild.cache', 'ttbuild.cli', 'ttbuild.compiler'))
print(json.dumps({{"kernels": lib.kernels, "launched": [f.decode() for f in d.launched], "heavy": heavy}}))
"""
    out = run(code)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got == {"kernels": ["add_kernel"], "launched": ["CUBIN:add_fp16"], "heavy": []}


def test_package_command_runs_without_the_compiler(tmp_path):
    write_lib(tmp_path / "artifacts", [meta("add_fp32", "add_kernel", add_params("fp32"))])
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "variants.toml").write_text('[package]\nname = "tinylib"\nversion = "0.3"\n')
    from ttbuild.buildrecord import write_record  # what the build that wrote lib/ records

    write_record(tmp_path / "artifacts", tmp_path / "kernels", variants=["add_fp32"], failed=[], shard=None, complete=True)
    out = run("import sys, runpy; sys.argv = ['ttbuild', 'package']; runpy.run_module('ttbuild', run_name='__main__')",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "dist").glob("tinylib-0.3-*.whl"))) == 1  # py3-none-any, or with the C launcher


@pytest.mark.parametrize("command", ["build", "list"])
def test_compiler_commands_name_the_extra(tmp_path, command):
    out = run(f"import sys, runpy; sys.argv = ['ttbuild', {command!r}]; runpy.run_module('ttbuild', run_name='__main__')",
              cwd=tmp_path)
    assert out.returncode == 2
    assert "pip install 'ttbuild[compiler]'" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_works_without_the_compiler(tmp_path, flag):
    """Issue 32: `ttbuild --help` failed in a runtime-only install; it lists every command."""
    out = run(f"import sys, runpy; sys.argv = ['ttbuild', {flag!r}]; runpy.run_module('ttbuild', run_name='__main__')",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert all(c in out.stdout for c in ("build", "package", "tune", "cache")), out.stdout


def test_pyproject_keeps_the_compiler_in_an_extra_the_tests_pull():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    assert "cuda-bindings" in base
    for heavy in ("doit", "xtc-mlir", "llvmlite", "rich", "xxhash", "nvidia-cuda-nvcc"):
        assert heavy not in base
        assert any(r.startswith(heavy) for r in project["optional-dependencies"]["compiler"])
    assert "ttbuild[compiler]" in project["optional-dependencies"]["test"]
    readme = (REPO / "README.md").read_text()
    assert "pip install -e '.[compiler]' && ttbuild build" in readme
    assert "pip install -e '.[test]' && python -m pytest -q" in readme
    assert "pip install -e '.[test]'" in (REPO / ".ci" / "run").read_text()


def test_served_project_module_launches_through_the_facade_without_the_compiler(tmp_path):
    """No Triton, no torch, no compiler: a module that imports triton and defines a kernel loads
    under serve(..., facade=True) and its `kernel[grid](...)` launches the prebuilt variant."""
    lib_dir = write_lib(tmp_path / "art", [meta("add_fp16", "add_kernel", add_params("fp16"), file="proj/vec.py")])
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "vec.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):\n    pass\n")
    code = f"""
import sys, json
sys.meta_path[0].find_spec = (lambda f: lambda name, path=None, target=None: None if name.split('.')[0] == 'triton'
                              else f(name, path, target))(sys.meta_path[0].find_spec)
import ttbuild.runtime as rt

class Driver:
    launched = []
    def context(self, hint): return 1, (9, 0)
    def load_function(self, image, entry, shared): return image
    def launch(self, fn, grid, block_x, shared, stream, addr, values): self.launched.append((fn, grid))

class Half:
    __cuda_array_interface__ = {{"data": (4096, False), "typestr": "<f2", "shape": (4,), "version": 3}}

d = Driver()
rt.serve(rt.load({str(lib_dir)!r}, driver=d), facade=True)
sys.path.insert(0, {str(tmp_path / "proj")!r})
import vec, triton
vec.add_kernel[lambda meta: (triton.cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)](Half(), Half(), Half(), 4096, BLOCK_SIZE=1024)
heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mlir', 'llvmlite', 'doit', 'torch', 'cuda')
               or '.'.join(m.split('.')[:2]) in ('ttbuild.graph', 'ttbuild.backend', 'ttbuild.frontend', 'ttbuild.compiler'))
print(json.dumps({{"launched": [[f.decode(), g] for f, g in d.launched], "facade": triton.__ttbuild_facade__, "heavy": heavy}}))
"""
    out = run(code)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"launched": [["CUBIN:add_fp16", [4, 1, 1]]], "facade": True, "heavy": []}
