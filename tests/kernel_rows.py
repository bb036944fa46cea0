"""Test helper: a row of kernels/variants.toml compiled by name up to a stage, once per process."""

from __future__ import annotations

from pathlib import Path

import tomllib

import ttbuild

KDIR = Path(__file__).parents[1] / "kernels"
ROWS = {x["name"]: x for x in tomllib.loads((KDIR / "variants.toml").read_text())["variant"]}
_CACHE: dict = {}


def compile_row(name: str, until: str) -> bytes:
    """The stage output `until` ("ttir", "ttgir", "ptx", ...) of kernels/ row `name`."""
    if (name, until) not in _CACHE:
        v = ROWS[name]
        _CACHE[name, until] = ttbuild.compile(KDIR / v["file"], kernel=v["kernel"], signature=v["signature"],
                                              constexprs=v["constexprs"], num_warps=v["num_warps"],
                                              num_stages=v["num_stages"], until=until)[until]
    return _CACHE[name, until]
