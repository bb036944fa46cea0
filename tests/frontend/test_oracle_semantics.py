"""Triton as oracle for typing: random expressions must get the same result dtype and shape from our frontend as from Triton 3.6 (or be rejected by both)."""

from __future__ import annotations

import json
import random

import pytest
from oracle import MAKE_IR, run_triton, triton_python

from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

TENSOR_LEAVES = ["xh", "xf", "xi", "xb", "n", "a", "xu", "xl", "xbf", "xd"]
NUMBER_LEAVES = ["1", "2.5", "-3", "True", "BLOCK", "0"]
BINOPS = ["+", "-", "*", "/", "//", "%", "<", ">=", "==", "!=", "&", "|", "^", "<<", ">>"]
CALLS = ["tl.where({0} > 0, {1}, {2})", "tl.maximum({0}, {1})", "tl.minimum({0}, {1})",
         "({0}).to(tl.float16)", "({0}).to(tl.int32)", "({0}).to(tl.float32)", "({0}).to(tl.uint8)",
         "tl.abs({0})", "tl.exp({0})", "tl.sum({0}, axis=0)", "tl.max({0}, axis=0)", "-({0})",
         "tl.cdiv({0}, {1})", "tl.zeros_like({0})", "tl.argmax({0}, axis=0)", "tl.cumsum({0}, axis=0)",
         "tl.min({0}, axis=0, return_indices=True)[1]", "tl.sum({0}, axis=0, keep_dims=True)",
         "({0}).to(tl.float8e5)", "({0}).to(tl.float8e4nv)", "({0}).to(tl.bfloat16)", "({0}).to(tl.int1)",
         "tl.clamp({0}, {1}, {2})", "tl.fdiv({0}, {1})", "tl.umulhi({0}, {1})", "tl.join({0}, {1})",
         "tl.div_rn({0}, {1})"]
DTYPES = ["int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5"]
HEADER = """import triton
import triton.language as tl


"""
KERNEL = """@triton.jit
def {name}(ph, pf, pi, pu, pl, pbf, pd, n, a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    xh = tl.load(ph + offs)
    xf = tl.load(pf + offs)
    xi = tl.load(pi + offs)
    xu = tl.load(pu + offs)
    xl = tl.load(pl + offs)
    xbf = tl.load(pbf + offs)
    xd = tl.load(pd + offs)
    xb = xi > 0
    r = {expr}
    tl.static_assert(r.dtype == tl.{dtype})
    tl.static_assert(len(r.shape) == {rank})


"""
SIG = ["*fp16", "*fp32", "*i32", "*u16", "*i64", "*bf16", "*fp64", "i32", "fp32"]


def gen(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(TENSOR_LEAVES if rng.random() < 0.7 else NUMBER_LEAVES)
    if rng.random() < 0.6:
        return f"({gen(rng, depth - 1)} {rng.choice(BINOPS)} {gen(rng, depth - 1)})"
    return rng.choice(CALLS).format(*(gen(rng, depth - 1) for _ in range(3)))


def ours(expr: str):
    """(dtype name, rank) our frontend gives `expr`, or None if it rejects it."""
    for dt in DTYPES:
        for rank in (0, 1, 2):
            src = HEADER + KERNEL.format(name="k", expr=expr, dtype=dt, rank=rank)
            p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "o.py"})
            try:
                ttir.run({"json": p["json"]}, {"signature": SIG, "constexprs": {"BLOCK": 32}})
                return dt, rank
            except CompilationError as e:
                if "static_assert failed" not in e.message:
                    return None
    raise AssertionError(f"no dtype fits {expr}")


ORACLE = MAKE_IR + r"""
sig = dict(zip(["ph", "pf", "pi", "pu", "pl", "pbf", "pd", "n", "a", "BLOCK"], json.loads(sys.argv[3]) + ["constexpr"]))
out = {}
for name in json.loads(sys.argv[2]):
    try:
        make_ir(getattr(mod, name), sig, {"BLOCK": 32})
        out[name] = "ok"
    except Exception as e:
        out[name] = "error: " + (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
print(json.dumps(out))
"""


# random shifts draw Triton's bit-width warning here as there (test_diagnostics checks it)
@pytest.mark.filterwarnings("ignore::ttbuild.errors.CompilerWarning")
@pytest.mark.parametrize("seed", [20240611, 7, 1234])
def test_result_types_match_triton(tmp_path, seed):
    triton_python()  # skip before generating the cases when no Triton can be found
    rng = random.Random(seed)
    exprs = sorted({gen(rng, 3) for _ in range(250)})
    cases, mine = {}, {}
    for i, e in enumerate(exprs):
        mine[e] = ours(e)
        dt, rank = mine[e] or ("float32", 1)  # rejected by us: expect Triton to reject too
        cases[f"k{i}"] = (e, dt, rank)
    path = tmp_path / "cases.py"
    path.write_text(HEADER + "".join(KERNEL.format(name=n, expr=e, dtype=d, rank=r) for n, (e, d, r) in cases.items()))
    theirs = json.loads(run_triton(ORACLE, str(path), json.dumps(list(cases)), json.dumps(SIG)).splitlines()[-1])
    disagree = []
    for name, (e, _dt, _rank) in cases.items():
        we_accept, they_accept = mine[e] is not None, theirs[name] == "ok"
        if we_accept != they_accept:
            disagree.append((e, mine[e], theirs[name]))
    assert not disagree, "\n".join(map(str, disagree))
