"""Where ttbuild keeps per-user state: the local build cache and the runtime's compiled launcher (standard library only)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def default_local_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$TTBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/ttbuild`, else `~/.cache/ttbuild`."""
    env = os.environ if env is None else env
    if env.get("TTBUILD_CACHE_DIR"):
        return Path(env["TTBUILD_CACHE_DIR"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ttbuild"
