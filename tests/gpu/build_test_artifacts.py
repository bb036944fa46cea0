"""Builds the test-only GPU artifacts on a CPU machine: tests/data/gpu_kernels -> DIR (ttbuild build), its pipeline/ library -> DIR/pipeline, the recorded serve_proj/ -> DIR/serve, its multi-target targets/ library -> DIR/targets, the hand-written TTIR kernels -> DIR/cubins and the debug kernels -> DIR/debug.

Usage: python tests/gpu/build_test_artifacts.py [DIR]   (default: build/test-artifacts)
The GPU tests read DIR from $TTBUILD_TEST_ARTIFACTS, else build/test-artifacts; the library of
kernels/ is `doit` -> artifacts/ ($TTBUILD_ARTIFACTS). Carry both to the GPU machine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else REPO / "build" / "test-artifacts"
    subprocess.run([sys.executable, "-m", "ttbuild", "build", str(REPO / "tests" / "data" / "gpu_kernels"),
                    "-o", str(out), "--cache", "off"], check=True, cwd=REPO)
    subprocess.run([sys.executable, "-m", "ttbuild", "build", str(REPO / "tests" / "data" / "gpu_kernels" / "pipeline"),
                    "-o", str(out / "pipeline"), "--cache", "off"], check=True, cwd=REPO)
    subprocess.run([sys.executable, "-m", "ttbuild", "build", str(REPO / "tests" / "data" / "gpu_kernels" / "targets"),
                    "-o", str(out / "targets"), "--cache", "off"], check=True, cwd=REPO)
    serve = REPO / "tests" / "data" / "serve_proj"  # recorded rows of the serve test project, and its tuning table
    subprocess.run([sys.executable, "-m", "ttbuild", "build", str(serve), "-o", str(out / "serve"), "--cache", "off"],
                   check=True, cwd=REPO)
    shutil.copytree(serve / "tuning", out / "serve" / "tuning", dirs_exist_ok=True)
    sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "gpu"), str(REPO / "tests" / "backend"), str(REPO / "tests" / "backend" / "llir")]
    from test_backend_gpu import KERNELS, build_cubin

    (out / "cubins").mkdir(parents=True, exist_ok=True)
    for name in KERNELS:
        (out / "cubins" / f"{name}.cubin").write_bytes(build_cubin(name))
    from test_backend_debug import DEBUG_KERNELS, build_debug  # debug=True builds (tests/gpu/test_gpu_debug.py)

    (out / "debug").mkdir(parents=True, exist_ok=True)
    for name in DEBUG_KERNELS:
        (out / "debug" / f"{name}.cubin").write_bytes(build_debug(name)["cubin"])
    print(f"wrote {out}: lib/ of tests/data/gpu_kernels, pipeline/lib/ of its pipeline/, targets/lib/ of its targets/, cubins/ of {len(KERNELS)} TTIR kernels, "
          f"debug/ of {len(DEBUG_KERNELS)} debug kernels")


if __name__ == "__main__":
    main(sys.argv[1:])
