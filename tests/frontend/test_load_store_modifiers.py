"""tl.load / tl.store cache modifiers, eviction policies and volatile: a falsy value means none (Triton 3.6's semantic), named ones map to Triton's enums and to the PTX qualifiers Triton emits (oracle), others are located errors with Triton's message."""

from __future__ import annotations

import json
import re

import pytest
from oracle import run_triton

import ttbuild
from ttbuild.errors import CompilationError

SRC = """import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, y_ptr):
    offs = tl.arange(0, 128)
    x = tl.load(x_ptr + offs{load_kw})
    tl.store(y_ptr + offs, x{store_kw})
"""


def ttir(load_kw: str = "", store_kw: str = "") -> str:
    """The kernel's TTIR without locations (keyword arguments shift the AST node ids)."""
    src = SRC.format(load_kw=load_kw, store_kw=store_kw)
    text = ttbuild.compile(src, signature="*fp32:16,*fp32:16", until="ttir")["ttir"].decode()
    return re.sub(r'\s*loc\("n\d+"\)', "", text)


def test_none_and_empty_modifiers_mean_none():
    plain = ttir()
    assert ttir(", cache_modifier=None, eviction_policy=None", ", cache_modifier=None, eviction_policy=None") == plain
    assert ttir(', cache_modifier=""', ', eviction_policy=""') == plain
    assert "cache = 1 : i32" in plain and "evict = 1 : i32" in plain  # triton::CacheModifier::NONE, EvictionPolicy::NORMAL


def test_named_modifiers_map_to_tritons_enums():
    text = ttir(', cache_modifier=".cg", eviction_policy="evict_last"', ', cache_modifier=".cs"')
    load = next(line for line in text.splitlines() if '"tt.load"' in line)
    store = next(line for line in text.splitlines() if '"tt.store"' in line)
    assert "cache = 3 : i32" in load and "evict = 3 : i32" in load
    assert "cache = 5 : i32" in store


@pytest.mark.parametrize("load_kw,store_kw,message", [
    (', cache_modifier=".xx"', "", "Cache modifier .xx not supported"),
    (', cache_modifier=".cs"', "", "Cache modifier .cs not supported"),    # a store's modifier on a load
    ("", ', cache_modifier=".ca"', "Cache modifier .ca not supported"),    # a load's on a store
    (', eviction_policy="evict_normal"', "", "Eviction policy evict_normal not supported"),
])
def test_a_modifier_triton_refuses_is_a_located_error(load_kw, store_kw, message):
    with pytest.raises(CompilationError) as ei:
        ttir(load_kw, store_kw)
    assert message in str(ei.value)
    assert ei.value.loc is not None and ei.value.loc.line == (8 if load_kw else 9)


PTX_SRC = """import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, y_ptr, n):
    offs = tl.program_id(0) * 1024 + tl.arange(0, 1024)
    x = tl.load(x_ptr + offs{load_kw})
    tl.store(y_ptr + offs, x{store_kw})
"""
PTX_CASES = [
    ("", ""),
    (', cache_modifier=".ca"', ', cache_modifier=".wb"'),
    (', cache_modifier=".cg"', ', cache_modifier=".cs"'),
    (', cache_modifier=".cv"', ', cache_modifier=".wt"'),
    (', cache_modifier=".cg"', ', cache_modifier=".cg"'),
    (', eviction_policy="evict_first"', ', eviction_policy="evict_last"'),
    (', eviction_policy="evict_last"', ', eviction_policy="evict_first"'),
    (", volatile=True", ""),
]
ACCESS = re.compile(r"\b(?:ld|st)(?:\.volatile)?\.global\S*|createpolicy\S*")

TRITON_PTX = r"""
import importlib.util, json, re, sys, tempfile
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
src, cases = sys.argv[1], json.loads(sys.argv[2])
out = []
for i, (lk, sk) in enumerate(cases):
    path = tempfile.mktemp(suffix=f"_{i}.py")
    open(path, "w").write(src.format(load_kw=lk, store_kw=sk))
    spec = importlib.util.spec_from_file_location(f"case{i}", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    div = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(mod.copy, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                                 attrs={(0,): div, (1,): div}), target=GPUTarget("cuda", 90, 32))
    out.append(sorted(set(re.findall(sys.argv[3], k.asm["ptx"]))))
print(json.dumps(out))
"""


def test_ptx_qualifiers_are_tritons():
    """Each access's PTX (`ld.global.cg.v4.b32`, `st.global.L1::evict_last.L2::cache_hint...` with
    its `createpolicy.fractional`, `ld.volatile.global...`) is the one Triton 3.6 emits for the
    same source: a load's `.cv` and the default write-back add nothing."""
    ours = []
    for lk, sk in PTX_CASES:
        ptx = ttbuild.compile(PTX_SRC.format(load_kw=lk, store_kw=sk), signature="*fp32:16,*fp32:16,i32",
                              until="ptx")["ptx"].decode()
        ours.append(sorted(set(ACCESS.findall(ptx))))
    assert ours[2] == ["ld.global.cg.v4.b32", "st.global.cs.v4.b32"]  # without the oracle too
    assert ours[5] == ["createpolicy.fractional.L2::evict_first.b64", "createpolicy.fractional.L2::evict_last.b64",
                       "ld.global.L1::evict_first.L2::cache_hint.v4.b32", "st.global.L1::evict_last.L2::cache_hint.v4.b32"]
    theirs = json.loads(run_triton(TRITON_PTX, PTX_SRC, json.dumps(PTX_CASES), ACCESS.pattern))
    assert ours == theirs
