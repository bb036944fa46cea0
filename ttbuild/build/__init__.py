"""The build graph: variant list -> chained stage keys -> doit tasks; importing it never imports MLIR or llvmlite.

`dodo.py` and `python -m ttbuild` both wire `doit_config()` and `task_creators()` from here.
"""

from __future__ import annotations

from pathlib import Path

from .graph import DEP_FILE, TASK_GROUPS, doit_config, generate_tasks, output_paths
from .keys import canonical_json, chain, stage_key, stage_options, stage_versions, xxh3_hex
from .signature import SigEntry, parse_signature
from .variants import Variant, VariantError, load_variants

__all__ = [
    "DEP_FILE", "TASK_GROUPS", "SigEntry", "Variant", "VariantError", "canonical_json", "chain",
    "doit_config", "generate_tasks", "load_variants", "namespace", "output_paths",
    "parse_signature", "stage_key", "stage_options", "stage_versions", "xxh3_hex",
]


def namespace(kernels_dir: str | Path = "kernels", artifacts_dir: str | Path = "artifacts",
              stage_package: str = "ttbuild.stages") -> dict:
    """A doit namespace (what a dodo module holds): DOIT_CONFIG plus one task creator.

    A bad variant list surfaces as doit's InvalidDodoFile, which doit prints as
    `ERROR: <file:line:col ...>` and exit status 3, without a traceback.
    """

    def task_ttbuild():
        """ttbuild kernels: parse -> ttir -> ttgir -> llir -> ptx -> cubin -> meta."""
        from doit.exceptions import InvalidDodoFile

        try:
            yield from generate_tasks(kernels_dir, artifacts_dir, stage_package)
        except VariantError as exc:
            raise InvalidDodoFile(exc.render()) from None

    return {"DOIT_CONFIG": doit_config(artifacts_dir), "task_ttbuild": task_ttbuild}
