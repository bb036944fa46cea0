"""Differential check of the frontend on a GPU: random expression kernels compiled by Triton from their source and by Triton from our TTIR must store identical bytes.

Two halves, because no machine has both our compiler (MLIR wheels) and a GPU:
  python tests/frontend/differential.py generate OUT [N] [SEED] [expr|cf]   # here: sources, TTIR, manifest
  python tests/frontend/differential.py run OUT                   # GPU machine with triton + torch
`run` prints one line per mismatch and a summary, and exits 1 if any kernel differs.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

PARAMS = ["ph", "pf", "pi", "pu", "pl", "pbf", "pd", "n", "a"]
SIG = ["*fp16", "*fp32", "*i32", "*u16", "*i64", "*bf16", "*fp64", "i32", "fp32"]
SIG_OF = {"int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
          "uint16": "u16", "uint32": "u32", "uint64": "u64", "fp16": "fp16", "bf16": "bf16", "fp32": "fp32",
          "fp64": "fp64", "fp8e4nv": "fp8e4nv", "fp8e5": "fp8e5"}
BLOCK = 32
KERNEL = """@triton.jit
def {name}(out, ph, pf, pi, pu, pl, pbf, pd, n, a, BLOCK: tl.constexpr):
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
    tl.store(out + offs, r)


"""


CF_KERNEL = KERNEL.replace("    r = {expr}\n", "    v0 = 0\n    v1 = xf\n    v2 = n\n{expr}\n    r = v0 + v1 + v2\n")


def generate(out: Path, count: int, seed: int, kind: str = "expr") -> None:
    """`kind`: "expr" (one random expression) or "cf" (random if/else and for statements over
    three variables, from the CPU control-flow oracle's grammar; no while: inputs never end them)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_oracle_control_flow import stmts  # the control-flow grammar of the CPU oracle test
    from test_oracle_semantics import gen  # the expression grammar of the CPU oracle test

    template = KERNEL if kind == "expr" else CF_KERNEL

    from ttbuild.errors import CompilationError
    from ttbuild.frontend.codegen import CodeGen
    from ttbuild.stages import parse, ttir

    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    src, manifest = "import triton\nimport triton.language as tl\n\n\n", {}
    tries = 0
    while len(manifest) < count and tries < count * 20:
        tries += 1
        if kind == "expr":
            expr = gen(rng, 3)
        else:
            expr = "\n".join(stmts(rng, 2, "    ", []))
            if "while" in expr or not ("for " in expr or "if " in expr):
                continue
        name = f"k{len(manifest)}"
        one = "import triton\nimport triton.language as tl\n\n\n" + template.format(name=name, expr=expr)
        desc = json.loads(parse.run({"source": one.encode()}, {"kernel": name, "file": "d.py"})["json"])
        seen = {}

        class Probe(CodeGen):  # r's type decides the output pointer's dtype
            def visit_Assign(self, node):
                super().visit_Assign(node)
                if self.depth == 0 and node.targets[0].id == "r":
                    seen["r"] = self.scope["r"]  # noqa: B023  (runs within this iteration)

        try:
            Probe(desc, ["*fp32"] + SIG, {"BLOCK": BLOCK}).generate()
        except CompilationError:
            continue
        r = seen.get("r")
        if r is None or not hasattr(r, "type") or r.type.scalar.is_ptr():
            continue
        sig = ["*" + SIG_OF[r.type.scalar.name]] + SIG
        try:
            text = ttir.run({"json": json.dumps(desc).encode()}, {"signature": sig, "constexprs": {"BLOCK": BLOCK}})
        except CompilationError:
            continue
        (out / f"{name}.ttir").write_bytes(text["ttir"])
        src += template.format(name=name, expr=expr)
        manifest[name] = {"expr": expr, "signature": sig, "out": r.type.scalar.name}
    (out / "cases.py").write_text(src)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"{len(manifest)} kernels in {out}")


def run(out: Path) -> int:
    import importlib.util

    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    manifest = json.loads((out / "manifest.json").read_text())
    spec = importlib.util.spec_from_file_location("cases", out / "cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    target = GPUTarget("cuda", 90, 32)

    # Phase 1, before CUDA starts in this process: compile each kernel both ways in a forked
    # child, so an LLVM assertion inside Triton kills one case, not the run; the children fill
    # Triton's on-disk cache, so phase 2's compiles are cache hits.
    import os
    crashed = {}
    for name, case in manifest.items():
        sig = dict(zip(["out"] + PARAMS, case["signature"]))
        sig["BLOCK"] = "constexpr"
        for side in ("triton", "ours"):
            pid = os.fork()
            if pid == 0:
                try:
                    if side == "triton":
                        triton.compile(ASTSource(getattr(mod, name), sig, constexprs={"BLOCK": BLOCK}), target=target)
                    else:
                        triton.compile(str(out / f"{name}.ttir"), target=target)
                    os._exit(0)
                except BaseException:  # noqa: BLE001
                    os._exit(3)
            _, status = os.waitpid(pid, 0)
            if status != 0:
                crashed.setdefault(name, []).append(f"{side}:{'error' if os.WEXITSTATUS(status) == 3 else 'crash'}")
    for name, how in crashed.items():
        print(f"COMPILE {name} {how}: {manifest[name]['expr']}")
    cap = torch.cuda.get_device_capability()
    assert cap == (9, 0), cap
    g = torch.Generator(device="cuda").manual_seed(0)
    dev = "cuda"
    inputs = [
        torch.randn(BLOCK, device=dev, generator=g).half(),
        torch.randn(BLOCK, device=dev, generator=g) * 4,
        torch.randint(-50, 50, (BLOCK,), device=dev, generator=g, dtype=torch.int32),
        torch.randint(0, 3000, (BLOCK,), device=dev, generator=g, dtype=torch.int32).to(torch.int16),
        torch.randint(-10**6, 10**6, (BLOCK,), device=dev, generator=g, dtype=torch.int64),
        torch.randn(BLOCK, device=dev, generator=g).bfloat16(),
        torch.randn(BLOCK, device=dev, generator=g, dtype=torch.float64),
        5, 1.5,
    ]
    torch_dtype = {"int1": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
                   "int64": torch.int64, "uint8": torch.uint8, "uint16": torch.int16, "uint32": torch.int32,
                   "uint64": torch.int64, "fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
                   "fp64": torch.float64, "fp8e4nv": torch.uint8, "fp8e5": torch.uint8}
    bad = compared = errors = 0
    for name, case in manifest.items():
        if name in crashed:
            errors += any(h.startswith("ours") for h in crashed[name]) and not any(
                h.startswith("triton") for h in crashed[name])
            continue
        sig = dict(zip(["out"] + PARAMS, case["signature"]))
        sig["BLOCK"] = "constexpr"
        try:
            ref = triton.compile(ASTSource(getattr(mod, name), sig, constexprs={"BLOCK": BLOCK}), target=target)
            ours = triton.compile(str(out / f"{name}.ttir"), target=target)
        except Exception as e:  # noqa: BLE001
            errors += 1
            print(f"COMPILE {name}: {case['expr']}: {str(e).splitlines()[-1][:200]}")
            continue
        results = []
        for kernel, extra in ((ref, [BLOCK]), (ours, [])):
            size = BLOCK * torch.empty((), dtype=torch_dtype[case["out"]]).element_size()
            o = torch.empty(size, dtype=torch.uint8, device=dev).fill_(0x5A)  # poisoned, read back as bytes
            try:
                kernel[(1, 1, 1)](o, *inputs, *extra)
            except TypeError:
                kernel[(1, 1, 1)](o, *inputs)
            torch.cuda.synchronize()
            results.append(o.cpu())
        compared += 1
        if not torch.equal(results[0], results[1]):
            same_nan = False
            if case["out"] in ("fp16", "bf16", "fp32", "fp64"):
                a = results[0].view(torch_dtype[case["out"]]).double()
                b = results[1].view(torch_dtype[case["out"]]).double()
                same_nan = bool(torch.all((a == b) | (a.isnan() & b.isnan()) | ((a - b).abs() <= 1e-6 * a.abs())))
            if not same_nan:
                bad += 1
                print(f"MISMATCH {name} ({case['out']}): {case['expr']}")
    print(f"{compared} compared, {bad} mismatched, {errors} failed to compile only through our TTIR, "
          f"{len(crashed)} with a compile failure on either side")
    return 1 if bad or errors else 0


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    if mode == "generate":
        generate(where, int(sys.argv[3]) if len(sys.argv) > 3 else 200, int(sys.argv[4]) if len(sys.argv) > 4 else 0,
                 sys.argv[5] if len(sys.argv) > 5 else "expr")
    else:
        sys.exit(run(where))
