"""Triton 3.6 builds the project's kernels from the same modules (Python executes them there) and agrees with ours.

The same ops and libdevice calls as ours, our TTIR finishes its pipeline to cubin, and the same
non-constexpr global is refused by both."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle import MAKE_IR, run_triton, triton_python

PROJECT = Path(__file__).resolve().parents[1] / "data" / "projects" / "mixproj"
KERNELS = {  # kernel -> (signature names and types, constexprs), as the rows give them
    "row_rms": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "eps": "fp32"}, {"BLOCK": 1024}),
    "scaled_squash": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 256}),
    "total": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 256}),
    "halves": ({"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 64}),  # a constexpr_function, next_power_of_2
}

# The oracle's Python has neither torch nor packaging: the least of each that the modules use.
STUBS = {
    "torch/__init__.py": "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n",
    "packaging/__init__.py": "",
    "packaging/version.py": (
        "class Version:\n"
        "    def __init__(self, text):\n"
        "        self.key = tuple(int(p) for p in text.split('+')[0].split('.')[:3])\n"
        "    def __ge__(self, other):\n"
        "        return self.key >= other.key\n"),
}

ORACLE = MAKE_IR.replace('spec = importlib.util.spec_from_file_location("cases", sys.argv[1])\n'
                         'mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n',
                         'sys.path[:0] = sys.argv[1].split(":")\nimport importlib\n'
                         'mod = importlib.import_module("mixpkg.ops.norm")\n') + r"""
import triton
out = {}
import inspect
for name, (sig, constexprs) in json.loads(sys.argv[2]).items():
    fn = getattr(mod, name)
    # what Triton's launcher binds for a parameter left out: its default, as the module made it
    for p in inspect.signature(fn.fn).parameters.values():
        if p.default is not p.empty and p.name not in constexprs:
            constexprs[p.name] = getattr(p.default, "value", p.default)
    sig = dict(sig, **{k: "constexpr" for k in constexprs})
    # Triton's TTIR after its own TTIR passes (inlining, canonicalisation): what ttbuild's ttir stage emits
    out[name] = triton.compile(ASTSource(fn, sig, constexprs=constexprs), target=target).asm["ttir"]
try:
    make_ir(mod.uses_plain_global, {"x_ptr": "*fp32", "n": "i32"}, {})
    out["uses_plain_global"] = "accepted"
except Exception as e:
    out["uses_plain_global"] = str(e)
for path in json.loads(sys.argv[3]):
    k = triton.compile(path, target=target)
    assert k.asm["cubin"][:4] == b"\x7fELF", path
print(json.dumps(out))
"""

_OP = re.compile(r'(?<=["\s])((?:tt|arith|math|scf)\.[a-z_]+)(?=["\s])')  # an op's name, not an attribute's
_SYMBOL = re.compile(r"__nv_\w+")


def _facts(ttir: str) -> tuple[set, set]:
    """The ops and libdevice functions a TTIR module uses (either spelling of MLIR)."""
    return set(_OP.findall(ttir)) - {"tt.func", "tt.return"}, set(_SYMBOL.findall(ttir))


@pytest.fixture
def built(tmp_path, new_project, monkeypatch):
    triton_python()
    src = tmp_path / "src"
    shutil.copytree(PROJECT, src / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    proj = new_project(tmp_path / "p", "real", source=src)
    proj.env["MIXPROJ_ROWS"] = "3"
    monkeypatch.setenv("MIXPROJ_ROWS", "3")  # the oracle's Python executes the module under the same value
    run = proj.ttbuild("build")
    assert run.rc == 0, run.text
    return proj


def test_triton_builds_the_project_kernels_as_we_do(built, tmp_path):
    for rel, text in STUBS.items():
        (tmp_path / "stubs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "stubs" / rel).write_text(text)
    ours = {p.stem: p for p in (built.artifacts / "ttir").rglob("*.ttir")}
    paths = [str(ours[k]) for k in KERNELS]
    roots = f"{tmp_path / 'stubs'}:{built.kernels / 'src'}"
    theirs = json.loads(run_triton(ORACLE, roots, json.dumps(KERNELS), json.dumps(paths)).splitlines()[-1])
    for name in KERNELS:
        assert _facts(ours[name].read_text()) == _facts(theirs[name]), name
    assert _facts(theirs["scaled_squash"])[1] == {"__nv_tanhf", "__nv_erff"}
    assert _facts(theirs["row_rms"])[1] == {"__nv_rsqrtf"}
    # half_block(64) = 32 lanes, next_power_of_2(65) = 128: the same shapes and constant as Triton's
    for ttir in (ours["halves"].read_text(), theirs["halves"]):
        assert "tensor<32xf32>" in ttir and "tensor<64xf32>" not in ttir
        assert re.search(r"1\.280*e\+02", ttir), ttir
    assert "Cannot access global variable PLAIN_LIMIT" in theirs["uses_plain_global"]


def test_a_non_constexpr_global_in_a_kernel_body_is_refused_with_tritons_message(built):
    text = (built.kernels / "variants.toml").read_text() + (
        '\n[[variant]]\nname = "plain_global"\nmodule = "mixpkg.ops.norm"\nkernel = "uses_plain_global"\n'
        'signature = "*fp32:16,i32"\nuntil = "ttir"\n')
    (built.kernels / "variants.toml").write_text(text)
    run = built.ttbuild("build")
    assert run.rc != 0
    assert "norm.py:53:" in run.text and "Cannot access global variable PLAIN_LIMIT from within @jit'ed" in run.text
