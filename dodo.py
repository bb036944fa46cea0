"""doit entry point: builds kernels/variants.toml into artifacts/ (see ttbuild.graph); only wiring here."""

from pathlib import Path

from ttbuild.graph import namespace

# doit runs with the working directory set to this file's folder: relative paths keep
# the dependency DB portable between checkouts and CI machines.
_ns = namespace(kernels_dir=Path("kernels"), artifacts_dir=Path("artifacts"))
DOIT_CONFIG = _ns["DOIT_CONFIG"]
task_ttbuild = _ns["task_ttbuild"]
