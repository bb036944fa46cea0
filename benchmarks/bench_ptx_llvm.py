"""The ptx stage's LLVM on the same LLIR: ttbuild's (llvmlite) against the LLVM Triton 3.6 bundles, and the share of its Straight line strength reduction pass.

    python benchmarks/bench_ptx_llvm.py [-n 5] [--all | --rows NAME,NAME] [--sass]

bench_compile.py compares whole stages, each side on its own IR. This one gives both LLVMs the
same input, ttbuild's LLIR of each row (`ttbuild.compile(..., until="llir")`), so what is left
is the LLVM version: ttbuild's `nvptx.llvm.emit_ptx` in this process against Triton's
`llvm.translate_to_asm` (what its make_ptx runs, flags as make_ptx passes them) in a child
process of $TTBUILD_TRITON_PYTHON (or this Python when it imports triton). A third column
runs emit_ptx in a child process with LLVM's `-opt-disable=slsr`, to show what the stage would
cost without that one pass; its PTX is not what ttbuild emits, so the column measures and
changes nothing. `--sass` shows what the pass is worth: both PTX texts through ptxas (the one
the build runs, `-v`), with the SASS instruction count (the cubin's `.text.*` bytes over 16,
the size of one sm_70+ instruction), registers and spill bytes of each.

The SLSR column is the difference of the first two (LLVM's own pass timers cannot say it: in
a process that runs many pass managers they file a pass's time under whichever pass last had
its address). Attributes that Triton's older LLVM cannot parse (`nocreateundeforpoison`, which
LLVM 22 puts on intrinsic declarations) are dropped from its copy of the text.

Rows, defaults and the warm-up are bench_compile.py's; figures are medians of -n runs, in
milliseconds, wall clock on whatever else the machine is doing: compare columns of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import KERNELS_DIR, WORKER_FLAG, fmt, ratio, report_worker_result, run_worker, table  # noqa: E402
from bench_compile import row_arguments, row_options, selected_rows, triton_python  # noqa: E402

_UNKNOWN_TO_OLDER_LLVM = re.compile(r" nocreateundeforpoison\b")


def llir_of(row: dict) -> str:
    import ttbuild.compiler as tc

    out = tc.compile(os.path.join(KERNELS_DIR, row["file"]), kernel=row["kernel"], signature=row["signature"],
                     constexprs=row.get("constexprs", {}), until="llir", **row_options(row))
    return out["llir"].decode()


def median_ms(fn, n: int) -> float:
    """Median milliseconds of n calls of fn; the caller has called it once already (warm-up:
    target machine, first-use caches)."""
    runs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs) * 1e3


# ---------------------------------------------------------------- ttbuild's LLVM

def time_ours(paths: dict[str, str], n: int, ptx_dir: str | None = None) -> dict[str, dict]:
    """{row: {"ms"}} for emit_ptx on each LLIR file, in this process; the PTX written to
    `ptx_dir`/<row>.ptx when given."""
    from ttbuild.backend.nvptx.llvm import emit_ptx

    out = {}
    for name, path in paths.items():
        text = open(path).read()
        try:
            ptx = emit_ptx(text)
            if ptx_dir:
                with open(os.path.join(ptx_dir, f"{name}.ptx"), "w") as f:
                    f.write(ptx)
            out[name] = {"ms": median_ms(lambda: emit_ptx(text), n)}
        except Exception as e:  # noqa: BLE001  (one row's failure is reported, the others go on)
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return out


def no_slsr_worker(job: dict) -> None:
    """Child process: emit_ptx with SLSR disabled (a process-wide LLVM option, set first)."""
    import llvmlite.binding as llvm

    llvm.set_option("", "-opt-disable=slsr")
    report_worker_result(time_ours(job["paths"], job["n"], job.get("ptx_dir")))


# ---------------------------------------------------------------- Triton's LLVM

def triton_worker(job: dict) -> None:
    """Child process in Triton's Python: translate_to_asm as CUDABackend.make_ptx calls it."""
    from triton._C.libtriton import llvm
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend, get_features, sm_arch_from_capability

    llvm.init_targets()
    backend = CUDABackend(GPUTarget("cuda", 90, 32))
    opt = backend.parse_options({})
    proc, features = sm_arch_from_capability(90), get_features(opt, backend.target.arch)
    out = {}
    for name, path in job["paths"].items():
        text = _UNKNOWN_TO_OLDER_LLVM.sub("", open(path).read())

        def run():
            llvm.translate_to_asm(text, "nvptx64-nvidia-cuda", proc, features, ["nvptx-mad-wide-opt"],
                                  opt.enable_fp_fusion, False)
        try:
            run()
            out[name] = {"ms": median_ms(run, job["n"])}
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    report_worker_result(out)


def run_child(python: str, mode: str, paths: dict[str, str], n: int, ptx_dir: str | None = None) -> dict:
    """{row: result} from a child process of `python` running this file's `mode` worker."""
    out = run_worker(python, os.path.abspath(__file__), {"mode": mode, "paths": paths, "n": n, "ptx_dir": ptx_dir})
    return {r: out for r in paths} if "error" in out else out


# ---------------------------------------------------------------- SASS

def text_bytes(elf: bytes) -> int:
    """Bytes of code in an ELF64 cubin: the sizes of its `.text.*` sections (ELF64 header:
    e_shoff at 0x28, e_shentsize/e_shnum/e_shstrndx at 0x3A; 64-byte section headers)."""
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx][4]

    def name(off: int) -> bytes:
        return elf[names + off:elf.index(b"\0", names + off)]
    return sum(sec[5] for sec in secs if name(sec[0]).startswith(b".text."))


def sass_stats(ptx_path: str) -> dict:
    """{"ins", "regs", "spill"} of one PTX file through the build's ptxas with `-v`."""
    from ttbuild.target import DEFAULT_TARGET
    from ttbuild.toolchain import ptxas_path

    cubin = ptx_path[:-4] + ".cubin"
    proc = subprocess.run([str(ptxas_path()), f"-arch={DEFAULT_TARGET.arch}", "-v", "-o", cubin, ptx_path],
                          capture_output=True, text=True, check=True)
    regs = re.search(r"Used (\d+) registers", proc.stderr)
    spill = re.search(r"(\d+) bytes spill stores", proc.stderr)
    with open(cubin, "rb") as f:
        ins = text_bytes(f.read()) // 16
    return {"ins": ins, "regs": int(regs.group(1)) if regs else None, "spill": int(spill.group(1)) if spill else 0}


def sass_table(names: list[str], on_dir: str, off_dir: str) -> str:
    body = []
    for name in names:
        on, off = os.path.join(on_dir, f"{name}.ptx"), os.path.join(off_dir, f"{name}.ptx")
        if not (os.path.exists(on) and os.path.exists(off)):
            continue
        a, b = sass_stats(on), sass_stats(off)
        body.append((name, a["ins"], b["ins"], f"{b['ins'] - a['ins']:+d}", a["regs"], b["regs"], a["spill"], b["spill"]))
    return table(("kernel", "SASS instr", "without SLSR", "diff", "registers", "without SLSR", "spill bytes",
                  "without SLSR"), body)


# ---------------------------------------------------------------- table

def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    row_arguments(ap)
    ap.add_argument("--sass", action="store_true", help="also the SASS each PTX gives, with and without SLSR")
    args = ap.parse_args(argv)
    rows = selected_rows(ap, args)

    with tempfile.TemporaryDirectory(prefix="bench-ptx-llvm-") as tmp:
        paths, notes = {}, []
        for row in rows:
            name = row["name"]
            try:
                text = llir_of(row)
            except Exception as e:  # noqa: BLE001
                notes.append(f"{name}: no LLIR ({type(e).__name__}: {str(e)[:300]})")
                continue
            paths[name] = os.path.join(tmp, f"{name}.llir")
            with open(paths[name], "w") as f:
                f.write(text)
        on_dir, off_dir = os.path.join(tmp, "slsr"), os.path.join(tmp, "no-slsr")
        os.makedirs(on_dir)
        os.makedirs(off_dir)
        ours = time_ours(paths, args.n, on_dir if args.sass else None)
        bare = run_child(sys.executable, "no-slsr", paths, args.n, off_dir if args.sass else None)
        py = triton_python()
        theirs = run_child(py, "triton", paths, args.n) if py else {}
        sass = sass_table(list(paths), on_dir, off_dir) if args.sass else ""
    if not py:
        print("Triton: not importable and TTBUILD_TRITON_PYTHON unset; its columns stay empty\n")

    body, tot = [], [0.0, 0.0, 0.0]
    for name in paths:
        a, b, t = ours.get(name, {}), bare.get(name, {}), theirs.get(name, {})
        for side, d in (("ttbuild", a), ("ttbuild without SLSR", b), ("triton", t)):
            if "error" in d:
                notes.append(f"{name} ({side}): {d['error']}")
        am, bm, tm = a.get("ms"), b.get("ms"), t.get("ms")
        body.append((name, fmt(am, 1), fmt(bm, 1), fmt(am - bm, 1) if am and bm else "", fmt(tm, 1),
                     ratio(am, tm), ratio(bm, tm)))
        if None not in (am, bm, tm):  # totals over rows all three columns compiled
            tot = [x + y for x, y in zip(tot, (am, bm, tm))]
    if tot[2]:
        am, bm, tm = tot
        body.append(("all rows", fmt(am, 1), fmt(bm, 1), fmt(am - bm, 1), fmt(tm, 1), ratio(am, tm), ratio(bm, tm)))
    print(table(("kernel", "ttbuild ms", "without SLSR ms", "SLSR ms", "triton ms", "x Triton",
                 "without SLSR x Triton"), body))
    if sass:
        print("\nSASS of each PTX (ptxas -v):")
        print(sass)
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_FLAG:
        job = json.loads(sys.argv[2])
        (no_slsr_worker if job["mode"] == "no-slsr" else triton_worker)(job)
    else:
        main()
