"""Register allocation of ttbuild's PTX against Triton 3.6's: both through the same ptxas `-v` (registers, stack frame, spill stores) per row.

    python benchmarks/bench_regalloc.py [--all | --rows NAME,NAME] [--extra] [--no-triton]
                                        [--save OUT.json] [--against BEFORE.json]

Rows are kernels/variants.toml's (bench_compile.py's selection); --extra adds the kernels of
tests/data/regalloc_kernels.py (an fp8 GEMM with per-block scales on mma.sync, a gated SiLU
product, rotary embedding: the forms whose allocation differed on real libraries, issue 30).
ttbuild's side is `ttbuild.compile(..., until="ptx")` in this process; Triton's is its
`asm["ptx"]` from a child process of $TTBUILD_TRITON_PYTHON (DISABLE_MMA_V3=1 for the rows that
ask for mma.sync). Both PTX texts go through the ptxas the build runs (ttbuild.toolchain), with
`-v --gpu-name=sm_90a`, so the difference is the PTX alone; ttbuild's as its cubin stage
assembles it (a spilling `.reqntid` kernel ptxas left registers unused in again with `.maxnreg`,
the smaller frame kept; --plain: once). The table flags rows whose stack
frame exceeds Triton's by more than 64 bytes. --save writes ttbuild's figures as JSON;
--against BEFORE.json adds the register and stack figures of an earlier --save run (what a
change of ttbuild did to each row), and lists the rows whose registers changed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import KERNELS_DIR, WORKER_FLAG, report_worker_result, run_worker, table  # noqa: E402
from bench_compile import row_options, selected_rows, triton_python, triton_signature  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTRA_FILE = os.path.join(REPO, "tests", "data", "regalloc_kernels.py")
_FP8_GEMM_SIG = "*fp8e4nv:16,*fp8e4nv:16,*bf16:16,*fp32:16,*fp32:16,i32,i32,i32,i32:16,i32:16,i32:16,i32,i32"
EXTRA_ROWS = [
    {"name": "x_fp8_block_gemm_64x128x128_w4_mmav2", "file": EXTRA_FILE, "kernel": "fp8_block_gemm_kernel",
     "signature": _FP8_GEMM_SIG, "constexprs": {"BM": 64, "BN": 128, "BK": 128}, "num_warps": 4,
     "num_stages": 3, "disable_mma_v3": True},
    {"name": "x_fp8_block_gemm_64x128x128_w4", "file": EXTRA_FILE, "kernel": "fp8_block_gemm_kernel",
     "signature": _FP8_GEMM_SIG, "constexprs": {"BM": 64, "BN": 128, "BK": 128}, "num_warps": 4, "num_stages": 3},
    {"name": "x_silu_mul_bf16_b1024_w4", "file": EXTRA_FILE, "kernel": "silu_mul_kernel",
     "signature": "*bf16:16,*bf16:16,i32:16,i32:16,i32:16", "constexprs": {"BLOCK": 1024}, "num_warps": 4},
    {"name": "x_silu_mul_fp16_b4096_w8", "file": EXTRA_FILE, "kernel": "silu_mul_kernel",
     "signature": "*fp16:16,*fp16:16,i32:16,i32:16,i32:16", "constexprs": {"BLOCK": 4096}, "num_warps": 8},
    {"name": "x_silu_mul_bf16_b16384_w16", "file": EXTRA_FILE, "kernel": "silu_mul_kernel",
     "signature": "*bf16:16,*bf16:16,i32:16,i32:16,i32:16", "constexprs": {"BLOCK": 16384}, "num_warps": 16},
    {"name": "x_silu_mul_fp32_b8192_w16", "file": EXTRA_FILE, "kernel": "silu_mul_kernel",
     "signature": "*fp32:16,*fp32:16,i32:16,i32:16,i32:16", "constexprs": {"BLOCK": 8192}, "num_warps": 16},
    {"name": "x_rotary_bf16_h32_d128_w4", "file": EXTRA_FILE, "kernel": "rotary_kernel",
     "signature": "*bf16:16,*fp32:16,*fp32:16,*i64:16,i32:16,i32:16,i32:16,i32",
     "constexprs": {"HALF": 64, "BH": 32}, "num_warps": 4},
    {"name": "x_rotary_fp16_h8_d64_w1", "file": EXTRA_FILE, "kernel": "rotary_kernel",
     "signature": "*fp16:16,*fp32:16,*fp32:16,*i64:16,i32:16,i32:16,i32:16,i32",
     "constexprs": {"HALF": 32, "BH": 8}, "num_warps": 1},
    {"name": "x_silu_mul_2d_bf16_128x128_w4", "file": EXTRA_FILE, "kernel": "silu_mul_2d_kernel",
     "signature": "*bf16:16,*bf16:16,i32,i32,i32,i32,i32,i32", "constexprs": {"BM": 128, "BN": 128}, "num_warps": 4},
    {"name": "x_silu_mul_2d_fp16_64x256_w8", "file": EXTRA_FILE, "kernel": "silu_mul_2d_kernel",
     "signature": "*fp16:16,*fp16:16,i32:16,i32,i32:16,i32,i32,i32", "constexprs": {"BM": 64, "BN": 256}, "num_warps": 8},
    {"name": "x_rotary_2d_bf16_4x32x64_w4", "file": EXTRA_FILE, "kernel": "rotary_2d_kernel",
     "signature": "*bf16:16,*fp32:16,*fp32:16,i32,i32,i32,i32,i32,i32,i32",
     "constexprs": {"BT": 4, "BH": 32, "HALF": 64}, "num_warps": 4},
    {"name": "x_rotary_2d_fp16_8x8x32_w4", "file": EXTRA_FILE, "kernel": "rotary_2d_kernel",
     "signature": "*fp16:16,*fp32:16,*fp32:16,i32:16,i32:16,i32,i32:16,i32,i32,i32",
     "constexprs": {"BT": 8, "BH": 8, "HALF": 32}, "num_warps": 4},
]


def ptxas_stats(ptx_path: str, retry: bool = False) -> dict:
    """{"regs", "stack", "spill"} (registers, stack frame bytes, spill store bytes) of one PTX
    file through the build's ptxas, or {"error": text}. `retry`: as the cubin stage assembles
    it (ttbuild.backend.nvptx.ptxas.register_retry: a starved .reqntid kernel again with
    .maxnreg, the smaller stack frame kept; a .maxntid kernel's cap is taken as given, not
    checked against its CTAs per SM as ptxas._within_occupancy does)."""
    from ttbuild.backend.nvptx.ptxas import register_retry

    got = _ptxas_v(ptx_path)
    if retry and "error" not in got:
        with open(ptx_path, "rb") as f:
            capped = register_retry(f.read(), got["regs"], got["stack"])
        if capped is not None:
            with open(ptx_path + ".capped.ptx", "wb") as f:
                f.write(capped)
            other = _ptxas_v(ptx_path + ".capped.ptx")
            if "error" not in other and other["stack"] < got["stack"]:
                return other
    return got


def _ptxas_v(ptx_path: str) -> dict:
    from ttbuild.toolchain import ptxas_path

    cubin = ptx_path + ".cubin"
    proc = subprocess.run([str(ptxas_path()), "-v", "--gpu-name=sm_90a", ptx_path, "-o", cubin],
                          capture_output=True, text=True)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else "ptxas failed"}
    log = proc.stderr
    regs = re.search(r"Used (\d+) registers", log)
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", log)
    return {"regs": int(regs.group(1)) if regs else 0, "stack": int(frame.group(1)) if frame else 0,
            "spill": int(frame.group(2)) if frame else 0}


def ours_ptx(rows: list[dict], out_dir: str) -> dict:
    """{row name: PTX path or {"error": text}} of ttbuild's PTX for each row."""
    import ttbuild

    paths: dict = {}
    for row in rows:
        try:
            out = ttbuild.compile(os.path.join(KERNELS_DIR, row["file"]), kernel=row["kernel"],
                                  signature=row["signature"], constexprs=row.get("constexprs", {}), until="ptx",
                                  **row_options(row))
        except Exception as e:  # noqa: BLE001  (one row's failure is reported, the others go on)
            paths[row["name"]] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            continue
        path = os.path.join(out_dir, f"ours_{row['name']}.ptx")
        with open(path, "wb") as f:
            f.write(out["ptx"])
        paths[row["name"]] = path
    return paths


def triton_worker(job: dict) -> None:
    """In Triton's Python: write each row's PTX to job["dir"]; report {name: path or {"error"}}."""
    import importlib.util
    import types

    try:
        import torch  # noqa: F401  (some kernel files import it; compiling does not need it)
    except ImportError:
        sys.modules["torch"] = types.ModuleType("torch")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    modules: dict = {}
    result: dict = {}
    for row in job["rows"]:
        try:
            path = os.path.join(KERNELS_DIR, row["file"])
            if path not in modules:
                spec = importlib.util.spec_from_file_location(f"m{len(modules)}", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                modules[path] = mod
            fn = getattr(modules[path], row["kernel"])
            while not hasattr(fn, "arg_names"):  # @triton.autotune / @triton.heuristics wrappers
                fn = fn.fn
            consts = row.get("constexprs", {})
            sig, attrs = triton_signature(fn, row)
            if row.get("disable_mma_v3"):
                os.environ["DISABLE_MMA_V3"] = "1"
            else:
                os.environ.pop("DISABLE_MMA_V3", None)
            options = {"num_warps": row.get("num_warps", 4), "num_stages": row.get("num_stages", 3)}
            k = triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32), options=options)
            out = os.path.join(job["dir"], f"triton_{row['name']}.ptx")
            with open(out, "w") as f:
                f.write(k.asm["ptx"])
            result[row["name"]] = out
        except Exception as e:  # noqa: BLE001
            result[row["name"]] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"}
    report_worker_result(result)


def triton_ptx(rows: list[dict], out_dir: str) -> dict:
    py = triton_python()
    if py is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="bench-regalloc-triton-") as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        env.pop("DISABLE_MMA_V3", None)
        out = run_worker(py, os.path.abspath(__file__), {"rows": rows, "dir": out_dir}, env, timeout=3600)
    return {r["name"]: out for r in rows} if "error" in out else out


def stats_of(paths: dict, retry: bool = False) -> dict:
    todo = {n: p for n, p in paths.items() if isinstance(p, str)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(zip(todo, pool.map(lambda p: ptxas_stats(p, retry), todo.values())))
    return {n: done.get(n, p) for n, p in paths.items()}


def cell(s: dict | None, key: str) -> str:
    if s is None:
        return ""
    return "err" if "error" in s else str(s[key])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every (non-autotuned) row of kernels/variants.toml")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: bench_compile's set)")
    ap.add_argument("--extra", action="store_true", help="also tests/data/regalloc_kernels.py's rows")
    ap.add_argument("--only-extra", action="store_true", help="tests/data/regalloc_kernels.py's rows alone")
    ap.add_argument("--no-triton", action="store_true", help="ttbuild's side only")
    ap.add_argument("--plain", action="store_true", help="ttbuild's PTX through ptxas once (no register retry)")
    ap.add_argument("--save", help="write ttbuild's figures to this JSON file")
    ap.add_argument("--against", help="an earlier --save file: show its registers and stack next to these")
    args = ap.parse_args(argv)
    rows = [] if args.only_extra else selected_rows(ap, args)
    if args.extra or args.only_extra:
        rows += EXTRA_ROWS
    with tempfile.TemporaryDirectory(prefix="bench-regalloc-") as tmp:
        ours = stats_of(ours_ptx(rows, tmp), retry=not args.plain)
        theirs = {} if args.no_triton else stats_of(triton_ptx(rows, tmp))
    before = json.load(open(args.against)) if args.against else {}
    if args.save:
        with open(args.save, "w") as f:
            json.dump(ours, f, indent=1)
    headers = ["row", "regs", "stack", "spill"]
    if theirs:
        headers += ["triton regs", "triton stack", "triton spill", "stack over"]
    if before:
        headers += ["before regs", "before stack"]
    lines, over, changed = [], [], []
    for row in rows:
        n = row["name"]
        o, t, b = ours.get(n), theirs.get(n), before.get(n)
        line = [n, cell(o, "regs"), cell(o, "stack"), cell(o, "spill")]
        for s in ([o] if "error" in (o or {}) else []):
            line[1] = "err: " + s["error"][:60]
        if theirs:
            gap = ""
            if o and t and "error" not in o and "error" not in t:
                gap = o["stack"] - t["stack"]
                if gap > 64:
                    over.append(n)
            line += [cell(t, "regs"), cell(t, "stack"), cell(t, "spill"), gap]
        if before:
            line += [cell(b, "regs"), cell(b, "stack")]
            if b and o and "error" not in b and "error" not in o and b["regs"] != o["regs"]:
                changed.append(f"{n} {b['regs']}->{o['regs']}")
        lines.append(line)
    print(table(headers, lines))
    if theirs:
        print(f"\nrows whose stack frame exceeds Triton's by more than 64 bytes: {', '.join(over) or 'none'}")
    if before:
        print(f"rows whose registers changed: {', '.join(changed) or 'none'}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_FLAG:
        triton_worker(json.loads(sys.argv[2]))
    else:
        main()
