"""A copy of a built library's lib/ whose cubins come from PTX emitted without LLVM's SLSR pass, for a GPU A/B of what the pass is worth.

    python benchmarks/slsr_library.py ARTIFACTS/lib OUT/lib

ARTIFACTS/lib: the lib/ folder of `ttbuild build kernels` at this checkout. Every row of
kernels/variants.toml found there (autotuned rows are left as they are) is compiled again to
LLIR in this process and emitted twice: as the ptx stage does, which must give the library's
cubin byte for byte (else the script stops: the A/B would compare other kernels), and with
LLVM's `-opt-disable=slsr` (a process-wide option, so the second emission runs in a child
process), whose cubin, with its `cubin_sha256`, replaces the one in OUT/lib. Then, on the GPU,
run a benchmark on each folder (`--artifacts`), alternating. Not a build mode: ttbuild always
runs the pass (docs/STATUS.md, 2026-11-28, for the figures).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_compile import library_rows, row_options  # noqa: E402
from bench_ptx_llvm import llir_of  # noqa: E402

CHILD_FLAG = "--emit-without-slsr"


def cubin_of(llir: str, options: dict) -> bytes:
    """The cubin the library's ptx and cubin stages make of `llir` under the row's options."""
    import ttbuild.compiler as tc

    return tc.compile(llir, start="llir", until="cubin", **options)["cubin"]


def child(jobs: list[tuple[str, dict, str]]) -> None:
    """(llir path, row options, cubin path) each: the cubin without SLSR, written."""
    import llvmlite.binding as llvm

    llvm.set_option("", "-opt-disable=slsr")
    for llir, options, out in jobs:
        with open(llir) as f, open(out, "wb") as g:
            g.write(cubin_of(f.read(), options))


def main(src: str, dst: str) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    replaced = []  # (metadata path, its dict, llir path, row options, cubin path)
    for name, row in library_rows().items():
        meta_path = os.path.join(dst, f"{name}.json")
        if not os.path.exists(meta_path):
            continue
        with open(meta_path) as f:
            meta = json.load(f)
        llir, options = llir_of(row), row_options(row)
        with open(os.path.join(src, meta["cubin"]), "rb") as f:
            if cubin_of(llir, options) != f.read():
                sys.exit(f"{name}: the ptx stage here does not give {src}/{meta['cubin']}; rebuild the library "
                         "at this checkout first")
        llir_path = os.path.join(dst, f"{name}.llir.tmp")
        with open(llir_path, "w") as f:
            f.write(llir)
        replaced.append((meta_path, meta, llir_path, options, os.path.join(dst, meta["cubin"])))
    jobs = [(llir_path, options, cubin_path) for _, _, llir_path, options, cubin_path in replaced]
    subprocess.run([sys.executable, os.path.abspath(__file__), CHILD_FLAG, json.dumps(jobs)], check=True)
    for meta_path, meta, llir_path, _, cubin_path in replaced:
        os.remove(llir_path)
        with open(cubin_path, "rb") as f:
            meta["cubin_sha256"] = hashlib.sha256(f.read()).hexdigest()
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=1)
    print(f"{len(replaced)} cubins replaced in {dst}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD_FLAG:
        child(json.loads(sys.argv[2]))
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__.split("\n\n")[1])
