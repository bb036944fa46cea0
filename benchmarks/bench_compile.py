"""Compile time per stage: ttbuild's in-memory driver vs Triton 3.6 AOT on the same source and configuration, same machine.

    python benchmarks/bench_compile.py [-n 5] [--all | --rows NAME,NAME] [--no-triton]

Rows are kernels/variants.toml's (autotuned rows are left out: they are many configurations),
plus `add_kernel_fp32_b8192_w1` (kernels/vector_add.py at BLOCK_SIZE 8192 on one warp, the
case whose ptx stage once took seconds). Default: a representative set (vector add, softmax,
layer norm forward/backward, fp16 matmul on wgmma, fp8 matmul, attention forward d64/d128,
attention backward); --all: every row.

ttbuild: `ttbuild.compile(..., until="cubin")` in this process, each stage timed around
`ttbuild.compiler.run_stage` (no cache). Triton: `triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))` in a child process of $TTBUILD_TRITON_PYTHON (or this Python
when it imports triton) with TRITON_ALWAYS_COMPILE=1 and a temporary TRITON_CACHE_DIR, each
entry of the `stages` dict that CUDABackend.add_stages fills wrapped with a timer, plus
ASTSource.make_ir (Python AST -> TTIR). Stage map: Triton's make_ir + ttir ~ our parse + ttir;
ttgir, llir, ptx (LLVM's NVPTX codegen), cubin (ptxas; each side runs its own ptxas) match.

Both sides compile every row once untimed first (imports, MLIR/LLVM initialisation, libdevice
read, first-use caches), then take the median of -n runs per stage; the figures are wall
clock seconds on whatever else the machine is doing, so compare the two columns of one run.
Triton is skipped (its columns empty) when it is neither importable nor named by
$TTBUILD_TRITON_PYTHON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import KERNELS_DIR, WORKER_FLAG, fmt, ratio, report_worker_result, run_worker, table  # noqa: E402

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")  # the table's stages (ttir = parse + ttir)
DEFAULT_ROWS = ("add_kernel_fp32", "add_kernel_fp32_b8192_w1", "softmax_8192_w8", "layer_norm_8192_w8",
                "ln_bwd_dx_1024", "ln_bwd_dwdb", "matmul_fp16_128x256x64_w8_s3", "matmul_fp8_128x256x64_w8_s3",
                "attn_fwd_d64", "attn_fwd_d128", "attn_bwd_d64")
EXTRA_ROWS = [{"name": "add_kernel_fp32_b8192_w1", "file": "vector_add.py", "kernel": "add_kernel",
               "signature": "*fp32:16,*fp32:16,*fp32:16,i32", "constexprs": {"BLOCK_SIZE": 8192}, "num_warps": 1}]


def library_rows() -> dict[str, dict]:
    with open(os.path.join(KERNELS_DIR, "variants.toml"), "rb") as f:
        rows = [r for r in tomllib.load(f)["variant"] if not r.get("autotune")]
    return {r["name"]: r for r in rows + EXTRA_ROWS}


def row_options(row: dict) -> dict:
    """The compile options of a row: each of its keys that names a `ttbuild.options.Options`
    field (num_warps, num_stages, target, disable_mma_v3, ...), so a row compiles as the
    library builds it."""
    import dataclasses

    from ttbuild.options import Options

    names = {f.name for f in dataclasses.fields(Options)}
    return {k: v for k, v in row.items() if k in names}


def split_signature(sig: str) -> list[str]:
    """Entries of a signature string, commas inside `tensordesc<fp16[128, 64]>` kept."""
    out, depth, cur = [], 0, ""
    for ch in sig:
        depth += ch in "<[" and 1 or (ch in ">]" and -1) or 0
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


# ---------------------------------------------------------------- ttbuild side (this process)

def triton_signature(fn, row: dict) -> tuple[dict, dict]:
    """(signature, attrs) of Triton's ASTSource for library `row` and its JITFunction `fn`:
    constexpr parameters as "constexpr", `:16` entries as tt.divisibility attributes (tensor
    descriptors carry theirs in the type). Runs in Triton's interpreter (triton_worker)."""
    import inspect

    consts = row.get("constexprs", {})
    sig, attrs = {}, {}
    entries = iter(split_signature(row["signature"]))
    for i, p in enumerate(inspect.signature(fn.fn).parameters):
        if p in consts:
            sig[p] = "constexpr"
            continue
        entry = next(entries)
        head, _, tail = entry.rpartition(":")
        ty, div = (head, tail) if tail.isdigit() else (entry, "")
        sig[p] = ty
        if div and not ty.startswith("tensordesc"):
            attrs[(i,)] = [["tt.divisibility", int(div)]]
    return sig, attrs


def time_ttbuild(row: dict, n: int) -> dict[str, float]:
    """Median seconds per table stage of n in-memory compiles of `row` to cubin (after one warm-up)."""
    import ttbuild.compiler as tc

    real = tc.run_stage
    times: dict[str, float] = {}

    def timed(stage, *a, **k):
        t0 = time.perf_counter()
        try:
            return real(stage, *a, **k)
        finally:
            key = "ttir" if stage == "parse" else stage
            times[key] = times.get(key, 0.0) + time.perf_counter() - t0

    opts = row_options(row)
    runs: dict[str, list[float]] = {s: [] for s in STAGES}
    tc.run_stage = timed
    try:
        for i in range(n + 1):
            times.clear()
            tc.compile(os.path.join(KERNELS_DIR, row["file"]), kernel=row["kernel"], signature=row["signature"],
                       constexprs=row.get("constexprs", {}), until="cubin", **opts)
            if i:  # the first run warms up
                for s in STAGES:
                    runs[s].append(times.get(s, 0.0))
    finally:
        tc.run_stage = real
    return {s: statistics.median(v) for s, v in runs.items()}


# ---------------------------------------------------------------- Triton side (child process)

def triton_python() -> str | None:
    try:
        import triton  # noqa: F401
        return sys.executable
    except ImportError:
        return os.environ.get("TTBUILD_TRITON_PYTHON") or None


def run_triton(rows: list[dict], n: int, timeout: float = 3600) -> dict:
    """{row name: {stage: median s} or {"error": text}} from a Triton child process; {} when there is no Triton."""
    import tempfile

    py = triton_python()
    if py is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="bench-compile-triton-") as cache:
        env = dict(os.environ, TRITON_ALWAYS_COMPILE="1", TRITON_CACHE_DIR=cache)
        env.pop("DISABLE_MMA_V3", None)
        out = run_worker(py, os.path.abspath(__file__), {"rows": rows, "n": n}, env, timeout)
    return {r["name"]: out for r in rows} if "error" in out else out


def triton_worker(job: dict) -> None:
    """In Triton's Python: compile each row n + 1 times, report median seconds per stage."""
    import importlib.util
    import types

    try:
        import torch  # noqa: F401  (some kernel files import it; compiling does not need it)
    except ImportError:
        sys.modules["torch"] = types.ModuleType("torch")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    times: dict[str, float] = {}

    def timer(key, fn):
        def run(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times[key] = times.get(key, 0.0) + time.perf_counter() - t0
        return run

    real_add_stages, real_make_ir = CUDABackend.add_stages, ASTSource.make_ir

    def add_stages(self, stages, options, language):
        real_add_stages(self, stages, options, language)
        for key in list(stages):
            stages[key] = timer(key, stages[key])

    CUDABackend.add_stages = add_stages
    ASTSource.make_ir = timer("ttir", real_make_ir)  # AST -> TTIR: our parse + ttir's front half

    modules: dict[str, object] = {}
    result: dict[str, dict] = {}
    target = GPUTarget("cuda", 90, 32)
    for row in job["rows"]:
        try:
            if row["file"] not in modules:
                spec = importlib.util.spec_from_file_location(f"kernels_{row['file'][:-3]}",
                                                              os.path.join(KERNELS_DIR, row["file"]))
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                modules[row["file"]] = mod
            fn = getattr(modules[row["file"]], row["kernel"])
            consts = row.get("constexprs", {})
            sig, attrs = triton_signature(fn, row)
            options = {"num_warps": row.get("num_warps", 4), "num_stages": row.get("num_stages", 3)}
            # Triton's form of the option: the variable its C++ reads at each compile.
            if row.get("disable_mma_v3"):
                os.environ["DISABLE_MMA_V3"] = "1"
            else:
                os.environ.pop("DISABLE_MMA_V3", None)
            runs: dict[str, list[float]] = {s: [] for s in STAGES}
            for i in range(job["n"] + 1):
                times.clear()
                triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs), target=target, options=options)
                if i:
                    for s in STAGES:
                        runs[s].append(times.get(s, 0.0))
            result[row["name"]] = {s: statistics.median(v) for s, v in runs.items()}
        except Exception as e:  # noqa: BLE001  (one row's failure is reported, the others go on)
            result[row["name"]] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    report_worker_result(result)


# ---------------------------------------------------------------- table

def row_arguments(ap: argparse.ArgumentParser) -> None:
    """-n, --all and --rows, which bench_ptx_llvm.py takes too."""
    ap.add_argument("-n", type=int, default=5, help="timed runs per row (median; one more warms up)")
    ap.add_argument("--all", action="store_true", help="every (non-autotuned) row of kernels/variants.toml")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: a representative set)")


def selected_rows(ap: argparse.ArgumentParser, args) -> list[dict]:
    """The rows --all / --rows name (default: DEFAULT_ROWS); an unknown name is a usage error."""
    lib = library_rows()
    names = list(lib) if args.all else (args.rows.split(",") if args.rows else list(DEFAULT_ROWS))
    unknown = [n for n in names if n not in lib]
    if unknown:
        ap.error(f"unknown rows: {', '.join(unknown)}")
    return [lib[n] for n in names]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    row_arguments(ap)
    ap.add_argument("--no-triton", action="store_true", help="time ttbuild only")
    args = ap.parse_args(argv)
    rows = selected_rows(ap, args)

    theirs = {} if args.no_triton else run_triton(rows, args.n)
    if not theirs and not args.no_triton:
        print("Triton: not importable and TTBUILD_TRITON_PYTHON unset; its columns stay empty\n")
    ours: dict[str, dict] = {}
    for row in rows:
        try:
            ours[row["name"]] = time_ttbuild(row, args.n)
        except Exception as e:  # noqa: BLE001
            ours[row["name"]] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}

    body, tot_ours, tot_theirs = [], dict.fromkeys(STAGES, 0.0), dict.fromkeys(STAGES, 0.0)
    notes = []
    for row in rows:
        name, a, b = row["name"], ours.get(row["name"], {}), theirs.get(row["name"], {})
        for side, d in (("ttbuild", a), ("triton", b)):
            if "error" in d:
                notes.append(f"{name} ({side}): {d['error']}")
        ok_a, ok_b = "error" not in a and bool(a), "error" not in b and bool(b)
        for s in STAGES:
            x, y = (a[s] if ok_a else None), (b[s] if ok_b else None)
            body.append((name, s, fmt(x, 3), fmt(y, 3), ratio(x, y)))
        sa = sum(a[s] for s in STAGES) if ok_a else None
        sb = sum(b[s] for s in STAGES) if ok_b else None
        body.append((name, "total", fmt(sa, 3), fmt(sb, 3), ratio(sa, sb)))
        if ok_a and ok_b:  # totals over rows both sides compiled
            for s in STAGES:
                tot_ours[s] += a[s]
                tot_theirs[s] += b[s]
    print(table(("kernel", "stage", "ttbuild s", "triton s", "x Triton"), body))
    if any(tot_theirs.values()):
        summary = [(s, fmt(tot_ours[s], 3), fmt(tot_theirs[s], 3), ratio(tot_ours[s], tot_theirs[s])) for s in STAGES]
        summary.append(("total", fmt(sum(tot_ours.values()), 3), fmt(sum(tot_theirs.values()), 3),
                        ratio(sum(tot_ours.values()), sum(tot_theirs.values()))))
        print("\nAll rows both sides compiled, per stage (sums of medians):")
        print(table(("stage", "ttbuild s", "triton s", "x Triton"), summary))
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_FLAG:
        triton_worker(json.loads(sys.argv[2]))
    else:
        main()
