"""Triton 3.6 as a test oracle: the Python that imports triton (this one, or $TTBUILD_TRITON_PYTHON), and scripts run in it.

Triton runs in a subprocess so its bundled LLVM never shares a process with llvmlite and MLIR
(README, "Triton as an oracle"). Tests that need it skip where no such Python is found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Compiles each path given on the command line (.ttir or .ttgir) with Triton through to cubin.
COMPILE_TO_CUBIN = """
import sys, triton
from triton.backends.compiler import GPUTarget
for arg in sys.argv[1:]:
    path, _, opts = arg.partition("|")  # "path|num_warps=8,num_stages=3": the variant's own options
    options = {k: int(v) for k, v in (o.split("=") for o in opts.split(",") if o)}
    k = triton.compile(path, target=GPUTarget("cuda", 90, 32), options=options)
    assert k.asm["cubin"][:4] == b"\\x7fELF", path
    print("ok", path)
"""


# Prelude of scripts that run Triton's frontend on the @jit functions of the module file given as
# argv[1]: `make_ir(fn, signature, constexprs)` returns the TTIR module (Triton's ASTSource.make_ir
# for sm_90, a fresh context per call).
MAKE_IR = r"""
import importlib.util, json, sys, warnings
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from triton._C.libtriton import ir
from triton.compiler.compiler import make_backend
spec = importlib.util.spec_from_file_location("cases", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
target = GPUTarget("cuda", 90, 32)
backend = make_backend(target)
options = backend.parse_options({})


def make_ir(fn, sig, constexprs):
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    src = ASTSource(fn, sig, constexprs=constexprs)
    return src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
"""


# Prelude of scripts that compile variant rows of the module file given as argv[1] with Triton
# (sm_90): `mod`, `target`, `row_source(fn, signature, constexprs)` and `ops(ttgir)`. row_source is
# Triton's ASTSource for a row: a `constexpr` entry per constexpr (a `{"dtype": name}` value as that
# tl dtype) and per constexpr parameter left to its default (as the JIT binds it), the signature's
# types in order, `:16` as tt.divisibility 16. ops counts a TTGIR text's ops by name.
ROW_SOURCE = r"""
import collections, importlib.util, inspect, json, re, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("kmod", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
target = GPUTarget("cuda", 90, 32)


def row_source(fn, signature, constexprs):
    ents, sig, attrs = iter(signature.split(",")), {}, {}
    cx = {n: tl.core.dtype(v["dtype"]) if isinstance(v, dict) else v for n, v in constexprs.items()}
    for i, n in enumerate(fn.arg_names):
        if n in cx:
            sig[n] = "constexpr"
        elif fn.params[i].is_constexpr and fn.params[i].default is not inspect.Parameter.empty:
            sig[n], cx[n] = "constexpr", fn.params[i].default
        else:
            ty, _, div = next(ents).partition(":")
            sig[n] = ty
            if div:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return ASTSource(fn, sig, constexprs=cx, attrs=attrs)


def ops(text):
    return collections.Counter(m.group(1) for m in re.finditer(r'^\s*(?:%\S+ = )?"?([a-z_]+\.[a-z_.]+)', text, re.M))
"""


# For each job of row_jobs: Triton compiles the kernel from its source (row_source) and compiles
# our TTIR; prints the op counts of both TTGIRs per case (a TTIR file enters Triton's pipeline
# after its TTIR passes; its TTGIR passes canonicalize both alike).
COMPARE_OPS = ROW_SOURCE + r"""
out = {}
for job in json.loads(sys.argv[2]):
    src = row_source(getattr(mod, job["kernel"]), job["signature"], job["constexprs"])
    theirs = triton.compile(src, target=target).asm["ttgir"]
    ours = triton.compile(job["ttir"], target=target).asm["ttgir"]
    out[job["case"]] = [ops(theirs), ops(ours)]
print(json.dumps(out))
"""


def row_jobs(cases, ttir_of, tmp_path) -> list[dict]:
    """The jobs a ROW_SOURCE script reads (argv[2], JSON): per (case, kernel, signature,
    constexprs) of `cases`, our TTIR `ttir_of(kernel, signature, constexprs)` written under
    `tmp_path` and named by its path."""
    jobs = []
    for case, kernel, sig, cx in cases:
        path = tmp_path / f"{case}.ttir"
        path.write_text(ttir_of(kernel, sig, cx))
        jobs.append({"case": case, "kernel": kernel, "signature": sig, "constexprs": cx, "ttir": str(path)})
    return jobs


def triton_python() -> str:
    """The interpreter to run Triton in; skips the calling test when there is none."""
    try:
        import triton  # noqa: F401  (only whether it imports)
        return sys.executable
    except ImportError:
        pass
    py = os.environ.get("TTBUILD_TRITON_PYTHON")
    if not py:
        pytest.skip("triton is not importable and TTBUILD_TRITON_PYTHON is not set")
    return py


def run_triton(script: str, *args: str, timeout: float = 600) -> str:
    """Run `script` with `args` in Triton's interpreter; its stdout. Fails the test on a non-zero exit."""
    proc = subprocess.run([triton_python(), "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def assert_triton_compiles(paths) -> None:
    """Triton accepts every IR file in `paths` and finishes its pipeline to cubin."""
    out = run_triton(COMPILE_TO_CUBIN, *paths)
    assert out.count("ok ") == len(paths), out


# Triton's TTGIR (or argv[3]: "ptx", "llir", ...) of one row of a kernel file: argv = file, JSON [kernel,
# signature, constexprs, num_warps]; a `:16` in the signature is Triton's tt.divisibility 16 on that argument.
TRITON_TTGIR = r"""
import json, sys, importlib.util
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("k", sys.argv[1]); mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
kernel, sig, cx, num_warps = json.loads(sys.argv[2])
fn = getattr(mod, kernel)
parts = sig.split(",")
types = dict(zip([n for n in fn.arg_names if n not in cx], [s.split(":")[0] for s in parts]))
types.update({n: "constexpr" for n in cx})
attrs = {(i,): [["tt.divisibility", 16]] for i, s in enumerate(parts) if s.endswith(":16")}
print(triton.compile(ASTSource(fn, types, constexprs=cx, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                     options={"num_warps": num_warps}).asm[sys.argv[3]])
"""


def triton_ttgir(source, kernel: str, signature: str, constexprs: dict, num_warps: int = 4, stage: str = "ttgir") -> str:
    """Triton 3.6's TTGIR (or the `stage` named: "ptx", "llir", ...) for a row of the kernel file
    `source` (sm_90)."""
    return run_triton(TRITON_TTGIR, source, json.dumps([kernel, signature, constexprs, num_warps]), stage)
