"""The rows of a variants.toml as dicts, for tests that build each row themselves: an autotune row stands for its first expansion."""

from __future__ import annotations

import functools
from pathlib import Path

import tomllib

from ttbuild.graph.variants import load_variants

TUNE_FIELDS = ("autotune", "configs", "tune")


@functools.lru_cache(maxsize=None)
def rows(kernels_dir: Path) -> tuple[dict, ...]:
    """Every [[variant]] row of `kernels_dir`/variants.toml in order. A row with autotune = true
    becomes the dict of its first variant (config 0, the first value of each computed constexpr:
    the name, constexprs and options the expansion gives it); tests/graph/test_tune_variants.py
    and tests/gpu/test_gpu_autotune.py cover the other configs."""
    raw = tomllib.loads((kernels_dir / "variants.toml").read_text())["variant"]
    expanded = None
    out = []
    for row in raw:
        if not any(k in row for k in TUNE_FIELDS):
            out.append(row)
            continue
        if expanded is None:
            expanded = load_variants(kernels_dir)
        v = next(x for x in expanded if x.name.startswith(row["name"] + ".c"))
        out.append({**{k: x for k, x in row.items() if k not in TUNE_FIELDS}, "name": v.name,
                    "constexprs": dict(v.constexprs), "num_warps": v.num_warps, "num_stages": v.num_stages})
    return tuple(out)
