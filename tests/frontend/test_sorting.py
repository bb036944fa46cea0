"""tl.sort, tl.topk, tl.flip, tl.bitonic_merge (tests/frontend/kernels/sorting.py) against numpy on the CPU and Triton 3.6's TTGIR.

Our TTIR runs on the CPU (ttir_eval) against numpy's sort/flip; Triton makes the same TTGIR (as a sorted
list of lines) from its source and from our TTIR; misuse fails where Triton's does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import ttir_eval  # noqa: E402  (tests/frontend is on sys.path)
from oracle import ROW_SOURCE, row_jobs, run_triton

from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

FILE = Path(__file__).resolve().parent / "kernels" / "sorting.py"
SIG = {np.int32: "*i32", np.uint32: "*u32", np.float32: "*fp32", np.float16: "*fp16", np.int8: "*i8"}


def _ttir(kernel: str, sig: str, constexprs: dict) -> str:
    p = parse.run({"source": FILE.read_bytes()}, {"kernel": kernel, "file": "sorting.py"})
    return ttir.run({"json": p["json"]}, {"signature": sig.split(","), "constexprs": constexprs})["ttir"].decode()


def _values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.floating):
        return (rng.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def _run(kernel, dtype, x, out_shape, constexprs, out_dtype=None):
    text = _ttir(kernel, f"{SIG[dtype]},{SIG[out_dtype or dtype]}", constexprs)
    bufs = {"x": x.ravel().copy(), "y": np.zeros(int(np.prod(out_shape)), out_dtype or dtype)}
    ttir_eval.run(text, ["x", "y"], bufs)
    return bufs["y"].reshape(out_shape)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float32, np.float16, np.int8])
@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("shape", [(1, 32), (4, 16), (2, 2), (8, 1)])
def test_sort_rows_equals_numpy(dtype, desc, shape):
    x = _values(dtype, shape, hash((shape, desc)) % 1000)
    want = np.sort(x, axis=-1)
    got = _run("sort_rows_kernel", dtype, x, shape, {"M": shape[0], "N": shape[1], "DESC": desc})
    np.testing.assert_array_equal(got, want[:, ::-1] if desc else want)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_sort_vector_with_dim_0_and_repeated_values(dtype):
    x = np.array([3, -1, 3, 0, 7, -1, 2, 2, 9, -5, 0, 3, 1, 1, 4, -2], dtype)
    np.testing.assert_array_equal(_run("sort_vector_kernel", dtype, x, (16,), {"N": 16, "DESC": False}), np.sort(x))
    np.testing.assert_array_equal(_run("sort_vector_kernel", dtype, x, (16,), {"N": 16, "DESC": True}),
                                  np.sort(x)[::-1])


def test_packed_key_sort_gives_a_stable_order():
    n, N = 50, 64
    keys = np.random.default_rng(5).integers(0, 6, N).astype(np.int32)
    text = _ttir("sort_packed_kernel", "*i32,*i32,*i32,*i32,i32", {"N": N})
    base = np.arange(6, dtype=np.int32) * 1000
    bufs = {"k": keys.copy(), "pos": np.zeros(N, np.int32), "ko": np.zeros(N, np.int32), "base": base}
    ttir_eval.run(text, ["k", "pos", "ko", "base", n], bufs)
    order = np.argsort(np.where(np.arange(N) < n, keys, 0xFFFF), kind="stable")
    np.testing.assert_array_equal(bufs["pos"], order)
    np.testing.assert_array_equal(bufs["ko"][:n], np.sort(keys[:n]) * 1001)
    assert (bufs["ko"][n:] == 0xFFFF - 1).all()


def test_an_unsigned_offset_is_zero_extended_before_addptr():
    # Triton 3.6 `semantic.add`: tt.addptr reads offsets as signed, so a uint32 one becomes int64
    text = _ttir("sort_packed_kernel", "*i32,*i32,*i32,*i32,i32", {"N": 64})
    assert re.search(r'"arith.extui"\(%\w+\) : \(tensor<64xi32>\) -> tensor<64xi64>', text)
    assert re.search(r'"tt.addptr"\(%\w+, %\w+\) : \(tensor<64x!tt.ptr<i32>>, tensor<64xi64>\)', text)


@pytest.mark.parametrize("dtype, out", [(np.int32, np.int32), (np.float32, np.float32), (np.int8, np.int32)])
@pytest.mark.parametrize("k", [1, 4, 16])
def test_topk_is_the_k_largest_descending(dtype, out, k):
    # below the full size topk halves with tl.max, which widens int8 to int32 (Triton's rule)
    x = _values(dtype, (4, 16), k)
    got = _run("topk_rows_kernel", dtype, x, (4, k), {"M": 4, "N": 16, "K": k}, out_dtype=out if k < 16 else dtype)
    np.testing.assert_array_equal(got, np.sort(x, axis=-1)[:, ::-1][:, :k])


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_flip_reverses_one_dim(dim, dtype):
    x = _values(dtype, (4, 8), dim + 3)
    np.testing.assert_array_equal(_run("flip_kernel", dtype, x, (4, 8), {"M": 4, "N": 8, "DIM": dim}),
                                  np.flip(x, axis=dim))


@pytest.mark.parametrize("desc", [False, True])
def test_bitonic_merge_sorts_a_bitonic_sequence(desc):
    x = _values(np.float32, (32,), 9)
    bitonic = np.concatenate([np.sort(x[:16]), np.sort(x[16:])[::-1]])
    got = _run("merge_halves_kernel", np.float32, bitonic, (32,), {"N": 32, "DESC": desc})
    np.testing.assert_array_equal(got, np.sort(x)[::-1] if desc else np.sort(x))


@pytest.mark.parametrize("kernel, constexprs, message", [
    ("sort_columns_kernel", {"M": 4, "N": 8}, "static_assert failed: only minor dimension is currently supported"),
    ("topk_rows_kernel", {"M": 4, "N": 8, "K": 16}, "k=16 is larger than"),
    ("flip_kernel", {"M": 4, "N": 8, "DIM": 2}, "static_assert failed"),
    # the halving maxes leave a scalar, which Triton 3.6 fails to reshape (an AttributeError there)
    ("topk_rows_kernel", {"M": 1, "N": 8, "K": 1}, "tl.reshape needs a block, got a scalar"),
])
def test_misuse_is_a_located_error(kernel, constexprs, message):
    with pytest.raises(CompilationError, match=message) as e:
        _ttir(kernel, "*fp32,*fp32", constexprs)
    assert e.value.node_id or e.value.loc


# (case, kernel, signature, constexprs): what Triton builds from source and from our TTIR alike
CASES = [
    ("rows_i32", "sort_rows_kernel", "*i32:16,*i32:16", {"M": 4, "N": 16, "DESC": False}),
    ("rows_f16_desc", "sort_rows_kernel", "*fp16:16,*fp16:16", {"M": 2, "N": 64, "DESC": True}),
    ("vector_u32", "sort_vector_kernel", "*u32:16,*u32:16", {"N": 128, "DESC": True}),
    ("vector_f32", "sort_vector_kernel", "*fp32:16,*fp32:16", {"N": 8, "DESC": False}),
    ("packed", "sort_packed_kernel", "*i32:16,*i32:16,*i32:16,*i32:16,i32", {"N": 1024}),
    ("topk_bf16", "topk_rows_kernel", "*bf16:16,*fp32:16", {"M": 4, "N": 32, "K": 4}),
    ("topk_i8", "topk_rows_kernel", "*i8:16,*i32:16", {"M": 2, "N": 16, "K": 2}),
    ("flip_0", "flip_kernel", "*fp32:16,*fp32:16", {"M": 8, "N": 16, "DIM": 0}),
    ("flip_last", "flip_kernel", "*i16:16,*i16:16", {"M": 8, "N": 16, "DIM": -1}),
    ("merge", "merge_halves_kernel", "*fp32:16,*fp32:16", {"N": 64, "DESC": True}),
]


# For each job: Triton compiles the kernel from its source and compiles our TTIR; prints both TTGIRs
# as sorted lists of lines (ops with their types, attributes and layouts spelled out) without
# locations, SSA names (Triton names values after the source's variables, we after node ids),
# layout alias names, or the entry's `noinline = false` attribute: order aside, the same TTGIR.
COMPARE = ROW_SOURCE + r"""
def norm(text):
    text = re.sub(r"loc\([^()]*(\([^()]*\))?[^()]*\)", "", text).replace(" attributes {noinline = false}", "")
    text = text.replace(" fastmath<none>", "")  # an explicit `none` (our extf) is the absent attribute
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#loc")]
    alias = dict(re.match(r"(#\w+) = (.*)", ln).groups() for ln in lines if re.match(r"#\w+ = ", ln))
    body = [re.sub(r"#\w+", lambda m: alias.get(m.group(0), m.group(0)), ln) for ln in lines if ln[0] != "#"]
    return sorted(re.sub(r"%[\w.#]+", "%", ln) for ln in body)

out = {}
for job in json.loads(sys.argv[2]):
    src = row_source(getattr(mod, job["kernel"]), job["signature"], job["constexprs"])
    out[job["case"]] = [norm(triton.compile(src, target=target).asm["ttgir"]),
                        norm(triton.compile(job["ttir"], target=target).asm["ttgir"])]
print(json.dumps(out))
"""


def test_triton_builds_the_same_ttir(tmp_path):
    jobs = row_jobs(CASES, _ttir, tmp_path)
    out = json.loads(run_triton(COMPARE, str(FILE), json.dumps(jobs)).splitlines()[-1])
    differ = {case: {"triton only": sorted(set(theirs) - set(ours)), "ours only": sorted(set(ours) - set(theirs)),
                     "lines": [len(theirs), len(ours)]} for case, (theirs, ours) in out.items() if theirs != ours}
    assert len(out) == len(CASES) and not differ, json.dumps(differ, indent=1)
    assert all(len(theirs) > 40 for theirs, _ in out.values())  # whole kernels were compared
