"""Smaller standard-library functions (tests/frontend/kernels/stdlib.py): CPU values, Triton 3.6's TTGIR, PTX, refusals.

tl.reduce_or, tl.cat, tl.add/sub/mul, tl.swizzle2d, tl.TRITON_MAX_TENSOR_NUMEL, tl.philox and its
helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import ttir_eval  # noqa: E402  (tests/frontend is on sys.path)
from oracle import row_jobs, run_triton
from test_sorting import COMPARE

import ttbuild
from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

FILE = Path(__file__).resolve().parent / "kernels" / "stdlib.py"


def _ttir(kernel: str, sig: str, constexprs: dict, src: bytes | None = None) -> str:
    p = parse.run({"source": src or FILE.read_bytes()}, {"kernel": kernel, "file": "stdlib.py"})
    return ttir.run({"json": p["json"]}, {"signature": sig.split(","), "constexprs": constexprs})["ttir"].decode()


def test_reduce_or_of_rows_and_columns():
    flags = (1 << np.random.default_rng(3).integers(0, 31, (4, 8))).astype(np.int32)
    bufs = {"f": flags.ravel().copy(), "o": np.zeros(12, np.int32)}
    ttir_eval.run(_ttir("any_flag_kernel", "*i32,*i32", {"M": 4, "N": 8}), ["f", "o"], bufs)
    np.testing.assert_array_equal(bufs["o"][:4], np.bitwise_or.reduce(flags, axis=1))
    np.testing.assert_array_equal(bufs["o"][4:], np.bitwise_or.reduce(flags, axis=0))


def test_add_sub_mul_are_the_operators():
    x, y = np.arange(16, dtype=np.int32) - 5, np.arange(16, dtype=np.int32) * 7
    bufs = {"x": x, "y": y, "o": np.zeros(16, np.int32)}
    ttir_eval.run(_ttir("arith_kernel", "*i32,*i32,*i32", {"N": 16}), ["x", "y", "o"], bufs)
    np.testing.assert_array_equal(bufs["o"], (x + y) * 3 - 2 * x + 6)


@pytest.mark.parametrize("kernel, sig, cx", [("cat_sum_kernel", "*fp32:16,*fp32:16,*fp32:16", {"N": 64}),
                                             ("grouped_tile_kernel", "*i32:16,i32,i32", {"GROUP": 4}),
                                             ("any_flag_kernel", "*i32:16,*i32:16", {"M": 16, "N": 32}),
                                             ("noise_kernel", "*fp32:16,*fp32:16,i32", {"N": 256})])
def test_builds_to_ptx(kernel, sig, cx):
    out = ttbuild.compile(FILE, kernel=kernel, signature=sig, constexprs=cx, until="ptx")
    assert b".entry " + kernel.encode() in out["ptx"]


HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p):\n    x = tl.load(p + tl.arange(0, 8))\n"


@pytest.mark.parametrize("body, message", [
    ("    tl.store(p + tl.arange(0, 16), tl.cat(x, x))\n", "current implementation of `cat` always may reorder"),
    ("    tl.store(p, tl.reduce_or(x, 0))\n", "reduce_or only supported for integers"),
    ("    tl.store(p, tl.reduce_or(x.to(tl.int32), 1))\n", "axis 1 out of range"),
    ("    tl.store(p, tl.uint_to_uniform_float(x.to(tl.int16)))\n", "takes \\(u\\)int32 or \\(u\\)int64"),
    ("    tl.store(p, tl.philox_impl(x.to(tl.int32), 1, 2, 3, 4, 5)[0])\n", "dtype not supported in philox_impl"),
])
def test_misuse_is_refused(body, message):  # (Triton 3.6 refuses each too)
    with pytest.raises(CompilationError, match=message):
        _ttir("k", "*fp32", {}, (HEAD + body).encode())


def test_64_bit_philox_counters_are_not_supported_yet():
    from ttbuild.errors import NotSupportedYet

    with pytest.raises(NotSupportedYet, match="64-bit counters"):
        _ttir("k", "*fp32", {}, (HEAD + "    tl.store(p, tl.philox(1, x.to(tl.uint64), 0, 0, 0)[0])\n").encode())


CASES = [
    ("any_flag", "any_flag_kernel", "*i32:16,*i32:16", {"M": 16, "N": 32}),
    ("any_flag_i8", "any_flag_kernel", "*i8:16,*i8:16", {"M": 4, "N": 64}),
    ("cat_sum", "cat_sum_kernel", "*fp32:16,*fp32:16,*fp32:16", {"N": 64}),
    ("arith_f16", "arith_kernel", "*fp16:16,*fp16:16,*fp16:16", {"N": 128}),
    ("arith_i64", "arith_kernel", "*i64:16,*i64:16,*i64:16", {"N": 32}),
    ("swizzle", "grouped_tile_kernel", "*i32:16,i32,i32", {"GROUP": 4}),
    ("swizzle_div", "grouped_tile_kernel", "*i32:16,i32:16,i32:16", {"GROUP": 8}),
    ("noise", "noise_kernel", "*fp32:16,*fp32:16,i32", {"N": 256}),
    ("noise_seed64", "noise_kernel", "*fp32:16,*fp32:16,i64", {"N": 64}),
]


def test_triton_builds_the_same_ttir(tmp_path):
    jobs = row_jobs(CASES, _ttir, tmp_path)
    out = json.loads(run_triton(COMPARE, str(FILE), json.dumps(jobs)).splitlines()[-1])
    differ = {case: {"triton only": sorted(set(theirs) - set(ours)), "ours only": sorted(set(ours) - set(theirs))}
              for case, (theirs, ours) in out.items() if theirs != ours}
    assert len(out) == len(CASES) and not differ, json.dumps(differ, indent=1)
