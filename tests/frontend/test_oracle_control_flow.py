"""Triton as oracle for control flow: random kernels with if/else, for and while over rebinding variables are accepted by our frontend exactly when Triton 3.6 accepts them, and our TTIR for the accepted ones compiles in Triton."""

from __future__ import annotations

import json
import random

import pytest
from oracle import run_triton, triton_python

from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

VARS = ["v0", "v1", "v2"]
LEAVES = ["xf", "xi", "n", "a", "1", "2.0", "v0", "v1", "v2"]
OPS = ["+", "-", "*"]
CONDS = ["n > 0", "a > 1.0", "BLOCK > 4", "v0 > 3", "tl.sum(xi, axis=0) > 0"]
HEADER = "import triton\nimport triton.language as tl\n\n\n"
SIG = ["*fp32", "*i32", "i32", "fp32"]
SIG_NAMES = ["pf", "pi", "n", "a"]


def stmts(rng: random.Random, depth: int, indent: str, loop_vars: list[str]) -> list[str]:
    out = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        leaves = LEAVES + loop_vars
        if depth == 0 or r < 0.5:
            out.append(f"{indent}{rng.choice(VARS)} = {rng.choice(leaves)} {rng.choice(OPS)} {rng.choice(leaves)}")
        elif r < 0.7:
            out.append(f"{indent}if {rng.choice(CONDS)}:")
            out += stmts(rng, depth - 1, indent + "    ", loop_vars)
            if rng.random() < 0.6:
                out.append(f"{indent}else:")
                out += stmts(rng, depth - 1, indent + "    ", loop_vars)
        elif r < 0.9:
            iv = f"i{depth}"
            bounds = rng.choice(["n", "4", "0, n, 2", "1, BLOCK"])
            out.append(f"{indent}for {iv} in range({bounds}):")
            out += stmts(rng, depth - 1, indent + "    ", loop_vars + [iv])
        else:
            out.append(f"{indent}while {rng.choice(['n > 0', 'v1 < 10'])}:")
            out += stmts(rng, depth - 1, indent + "    ", loop_vars)
    return out


def kernel(name: str, body: list[str], asserts: list[str] = ()) -> str:
    lines = ["@triton.jit", f"def {name}(pf, pi, n, a, BLOCK: tl.constexpr):",
             "    offs = tl.arange(0, BLOCK)", "    xf = tl.load(pf + offs)", "    xi = tl.load(pi + offs)",
             "    v0 = 0", "    v1 = xf", "    v2 = n", *body, *asserts,
             "    tl.store(pf + offs, v0 + v1 + v2)", "", ""]
    return "\n".join(lines)


TL_NAMES = {"int1": "int1", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
            "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
            "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}


def ours(src: str, name: str):
    """(TTIR, static_asserts pinning each variable's final dtype and rank) or None if rejected."""
    import json as _json

    from ttbuild.frontend.codegen import CodeGen
    from ttbuild.frontend.irtext import Value

    p = parse.run({"source": src.encode()}, {"kernel": name, "file": "cf.py"})
    seen = {}

    class Probe(CodeGen):  # records the variables' values just before the final store
        def visit_Expr(self, node):
            if self.depth == 0 and getattr(getattr(node.value, "func", None), "attr", "") == "store":
                seen.update({v: self.scope.get(v) for v in VARS})
            return super().visit_Expr(node)

    try:
        Probe(_json.loads(p["json"]), SIG, {"BLOCK": 8}).generate()
        text = ttir.run({"json": p["json"]}, {"signature": SIG, "constexprs": {"BLOCK": 8}})["ttir"]
    except CompilationError as e:
        assert not e.message.startswith("internal error"), e.message
        return None
    asserts = []
    for v, val in seen.items():
        assert isinstance(val, Value), (v, val)
        asserts.append(f"    tl.static_assert({v}.dtype == tl.{TL_NAMES[val.type.scalar.name]})")
        asserts.append(f"    tl.static_assert(len({v}.shape) == {len(val.type.shape)})")
    return text, asserts


ORACLE = r"""
import importlib.util, json, sys
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from triton._C.libtriton import ir
from triton.compiler.compiler import make_backend
spec = importlib.util.spec_from_file_location("cases", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
sig = dict(zip(json.loads(sys.argv[3]), json.loads(sys.argv[4]))); sig["BLOCK"] = "constexpr"
target = GPUTarget("cuda", 90, 32)
backend = make_backend(target)
options = backend.parse_options({})
out = {}
for name in json.loads(sys.argv[2]):
    context = ir.context(); ir.load_dialects(context); backend.load_dialects(context)
    try:
        ASTSource(getattr(mod, name), sig, constexprs={"BLOCK": 8}).make_ir(
            target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
        out[name] = "ok"
    except Exception as e:
        out[name] = "error: " + " | ".join(l for l in str(e).splitlines() if l.strip() and "^" not in l)[-300:]
ours_ok = json.loads(sys.argv[5])
for path in ours_ok:  # our TTIR for the kernels we accept must finish Triton's pipeline
    try:
        triton.compile(path, target=target)
    except Exception as e:
        out[path] = "ttir rejected: " + str(e)[-300:]
print(json.dumps(out))
"""


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_control_flow_agrees_with_triton(tmp_path, seed):
    triton_python()  # skip before generating the cases when no Triton can be found
    rng = random.Random(seed)
    names, bodies, src = [], {}, HEADER
    for i in range(60):
        name = f"k{i}"
        bodies[name] = stmts(rng, 2, "    ", [])
        src += kernel(name, bodies[name])
        names.append(name)
    mine, ok_paths, checked = {}, [], HEADER
    for name in names:
        result = ours(src, name)
        mine[name] = result is not None
        # Triton sees each kernel with our final dtypes and ranks pinned by static_assert.
        checked += kernel(name, bodies[name], result[1] if result else [])
        if result is not None and len(ok_paths) < 12:
            path = tmp_path / f"{name}.ttir"
            path.write_bytes(result[0])
            ok_paths.append(str(path))
    (tmp_path / "cases.py").write_text(checked)
    out = run_triton(ORACLE, str(tmp_path / "cases.py"), json.dumps(names), json.dumps(SIG_NAMES), json.dumps(SIG),
                     json.dumps(ok_paths), timeout=900)
    theirs = json.loads(out.splitlines()[-1])
    disagree = [(n, mine[n], theirs[n]) for n in names if mine[n] != (theirs[n] == "ok")]
    rejected = {p: theirs[p] for p in ok_paths if theirs.get(p, "").startswith("ttir rejected")}
    assert not disagree and not rejected, "\n".join(map(str, disagree)) + json.dumps(rejected, indent=1)
    assert any(mine.values()) and not all(mine.values())  # the sample exercises both outcomes
