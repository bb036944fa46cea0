"""Test helper: a row of kernels/variants.toml compiled by name up to a stage, once per process."""

from __future__ import annotations

from pathlib import Path

import tomllib

import ttbuild

KDIR = Path(__file__).parents[1] / "kernels"
ROWS = {x["name"]: x for x in tomllib.loads((KDIR / "variants.toml").read_text())["variant"]}
_CACHE: dict = {}


def compile_row(name: str, until: str) -> bytes:
    """The stage output `until` ("ttir", "ttgir", "ptx", ...) of kernels/ row `name`."""
    if (name, until) not in _CACHE:
        v = ROWS[name]
        _CACHE[name, until] = ttbuild.compile(KDIR / v["file"], kernel=v["kernel"], signature=v["signature"],
                                              constexprs=v["constexprs"], num_warps=v["num_warps"],
                                              num_stages=v["num_stages"], until=until)[until]
    return _CACHE[name, until]


def past_loops(ttgir: bytes | str, pick) -> list:
    """`pick(op, result, readers)` for each result of an op of the kernel's body defined before one of its
    top-level `scf.for`s and read after that loop (`readers`: the reading ops, at any depth, that lie after
    it), with None answers left out; run inside the parsed module's context."""
    from ttbuild.backend import mlir_util as mu

    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        module = mu.parse_module(ttgir, ctx, "ttgir")
        func = next(op for op in module.body.operations if op.operation.name == "tt.func" and len(op.regions[0].blocks))
        ops = [op.operation for op in func.regions[0].blocks[0].operations]
        pos = {op: k for k, op in enumerate(ops)}

        def top(op):
            op = op.operation
            while op not in pos:
                op = op.parent.operation
            return op

        out = []
        for k, loop in enumerate(ops):
            if loop.name != "scf.for":
                continue
            for op in ops[:k]:
                for r in op.results:
                    readers = [u.owner for u in r.uses if pos[top(u.owner)] > k]
                    got = pick(op, r, readers) if readers else None
                    if got is not None:
                        out.append(got)
        return out


def attention_backward_grads(ttir: bytes, rewrite, seed: int) -> list:
    """kernels/attention.py `_attn_bwd` TTIR run on the CPU (tests/ttir_numpy.py) for its first two programs over
    160 tokens of head dim 128 (the second program's keys and queries partly past N_CTX), after `rewrite(module)`
    (None: as compiled): [dQ, dK, dV] as fp16 arrays, every element written (asserted)."""
    import numpy as np
    from ttir_numpy import Program

    from ttbuild.backend import mlir_util as mu

    rng = np.random.default_rng(seed)
    n, d = 160, 128
    q, k, v, do = ((rng.standard_normal(n * d) * 0.3).astype(np.float16) for _ in range(4))
    m, delta = (rng.standard_normal(n) * 0.1).astype(np.float32), (rng.standard_normal(n) * 0.1).astype(np.float32)
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        module = mu.parse_module(ttir, ctx, "ttir")
        if rewrite is not None:
            rewrite(module)
        grads = [np.full(n * d, np.nan, np.float16) for _ in range(3)]
        prog = Program(module)
        for pid in range(2):
            prog.run([q, k, v, 0.5, do, *grads, m, delta, n * d, n * d, d, 1, n], (pid, 0, 0))
    assert not any(np.isnan(g).any() for g in grads)
    return grads
