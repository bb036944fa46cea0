"""tl.load / tl.store cache modifiers and eviction policies: a falsy value means none (Triton 3.6's semantic), named ones map to Triton's enums, unknown ones are located errors."""

from __future__ import annotations

import re

import pytest

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


def test_an_unknown_modifier_is_a_located_error():
    with pytest.raises(CompilationError) as ei:
        ttir(', cache_modifier=".xx"')
    assert "unknown cache modifier or eviction policy: '.xx'" in str(ei.value)
    assert ei.value.loc is not None and ei.value.loc.line == 8
