"""Backend errors carry the failing op's source location.

Any error an LLIR rule raises, and any exception inside a TTGIR pass, reaches the user as a
CompilationError with a node id that `locs.locate` turns into file:line:col with a caret; unexpected
exceptions say "internal error" and keep the original as __cause__.
"""

from __future__ import annotations

import pytest

from ttbuild.backend.llir import emit, rules
from ttbuild.backend.ttgir import passes
from ttbuild.errors import CompilationError
from ttbuild.locs import locate
from ttbuild.registry import Registry
from ttbuild.stages import llir, parse, ttgir, ttir

SRC = """import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = x * 2.0 + x
    tl.store(y_ptr + offs, y, mask=m)
"""
LINES = SRC.splitlines()


def _front():
    out = parse.run({"source": SRC.encode()}, {"kernel": "k", "file": "lib/k.py"})
    t = ttir.run({"json": out["json"]}, {"signature": ["*fp32", "*fp32", "i32"], "constexprs": {"BLOCK": 256}})
    return out["loc"], t["ttir"]


def _with_rule(name: str, fn) -> Registry:
    """The real LLIR table with the rule for `name` replaced by `fn`."""
    reg = Registry("LLIR lowering rule")
    for n in rules.RULES:
        reg.register(n, fn if n == name else rules.RULES.lookup(n))
    return reg


def _assert_at(err: CompilationError, line_fragment: str, col_fragment: str):
    (lineno,) = [i + 1 for i, line in enumerate(LINES) if line_fragment in line]
    col = LINES[lineno - 1].index(col_fragment)
    assert (err.loc.file, err.loc.line, err.loc.col) == ("lib/k.py", lineno, col)
    head, text, caret = str(err).splitlines()
    assert head.startswith(f"lib/k.py:{lineno}:{col + 1}: error: ")
    assert text == "    " + LINES[lineno - 1] and caret == "    " + " " * col + "^"


def _llir_error(monkeypatch, rule) -> tuple[CompilationError, CompilationError]:
    loc, t = _front()
    g = ttgir.run({"ttir": t}, {"num_warps": 4})["ttgir"]
    monkeypatch.setattr(emit, "RULES", _with_rule("arith.addf", rule))
    with pytest.raises(CompilationError) as ei:
        llir.run({"ttgir": g}, {"target": "cuda:90"})
    err = ei.value
    assert err.node_id is not None and err.loc is None and err.stage == "llir"
    return err, locate(err, loc)


def test_compilation_error_raised_in_a_rule_carries_the_ops_location(monkeypatch):
    def bad(ctx, op, *operands):
        raise CompilationError("addf cannot do that")

    err, located = _llir_error(monkeypatch, bad)
    assert located.message == "addf cannot do that"
    _assert_at(located, "y = x * 2.0 + x", "x * 2.0 + x")


def test_unexpected_exception_in_a_rule_is_an_internal_error_at_the_op(monkeypatch):
    def buggy(ctx, op, *operands):
        return {}["missing"]

    err, located = _llir_error(monkeypatch, buggy)
    assert located.message == "internal error while lowering arith.addf: KeyError: 'missing'"
    assert isinstance(err.__cause__, KeyError)
    _assert_at(located, "y = x * 2.0 + x", "x * 2.0 + x")


def test_error_inside_a_loop_body_points_at_the_inner_op(monkeypatch):
    src_loop = SRC.replace("    y = x * 2.0 + x\n", "    y = x\n    for i in range(3):\n        y = y + x\n")
    out = parse.run({"source": src_loop.encode()}, {"kernel": "k", "file": "lib/k.py"})
    t = ttir.run({"json": out["json"]}, {"signature": ["*fp32", "*fp32", "i32"], "constexprs": {"BLOCK": 256}})
    g = ttgir.run({"ttir": t["ttir"]}, {"num_warps": 4})["ttgir"]
    monkeypatch.setattr(emit, "RULES", _with_rule("arith.addf", lambda ctx, op, *a: 1 / 0))
    with pytest.raises(CompilationError) as ei:
        llir.run({"ttgir": g}, {"target": "cuda:90"})
    located = locate(ei.value, out["loc"])
    lines = src_loop.splitlines()
    (lineno,) = [i + 1 for i, line in enumerate(lines) if "y = y + x" in line]
    assert located.loc.line == lineno and "ZeroDivisionError" in located.message


@pytest.mark.parametrize("exc, message", [
    (CompilationError("layouts disagree"), "layouts disagree"),
    (ValueError("boom"), "internal error while running coalesce: ValueError: boom"),
])
def test_ttgir_pass_errors_point_at_the_kernel(monkeypatch, exc, message):
    loc, t = _front()

    def failing(module, num_warps):
        raise exc

    monkeypatch.setattr(passes, "PASSES", (("coalesce", failing),))
    with pytest.raises(CompilationError) as ei:
        ttgir.run({"ttir": t}, {"num_warps": 4})
    assert ei.value.stage == "ttgir"
    located = locate(ei.value, loc)
    assert located.message == message
    assert located.loc.line == [i + 1 for i, line in enumerate(LINES) if line.startswith("def k(")][0]


@pytest.mark.parametrize("target,mma_v3,ok", [("cuda:90", False, True), ("cuda:80", False, False),
                                              ("cuda:86", False, False), ("cuda:90", True, False)])
def test_shared_memory_past_the_targets_limit_is_a_located_error(target, mma_v3, ok):
    """A 128x256x128 fp16 matmul at 3 stages needs 192 KiB of shared memory on mma.sync (2
    buffers): it fits sm_90's 227 KB and not sm_80's 163 KB or sm_86's 99 KB; on sm_90's wgmma
    (3 buffers, 288 KiB, Triton 3.6's figure too) it fits nowhere. Where it does not fit it
    fails at ttgir with Triton's OutOfResources text, at the kernel's def line, instead of at
    launch."""
    from pathlib import Path

    import ttbuild

    kernels = Path(__file__).parents[2] / "kernels"
    args = dict(kernel="matmul_kernel", signature="*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:16,i32:16",
                constexprs={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8,
                            "ACTIVATION": "", "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
                num_warps=8, num_stages=3, target=target, until="ttgir", disable_mma_v3=not mma_v3)
    if ok:
        assert b"ttg.shared = 196608" in ttbuild.compile(kernels / "matmul.py", **args)["ttgir"]
        return
    with pytest.raises(CompilationError) as ei:
        ttbuild.compile(kernels / "matmul.py", **args)
    limit = {"cuda:80": 166912, "cuda:86": 101376, "cuda:90": 232448}[target]
    need = 294912 if mma_v3 else 196608
    assert ei.value.message == (f"out of resource: shared memory, Required: {need}, Hardware limit: {limit} "
                                f"({target}). Reducing block sizes or `num_stages` may help.")
    assert ei.value.loc is not None and ei.value.loc.file.endswith("matmul.py")
    assert (kernels / "matmul.py").read_text().splitlines()[ei.value.loc.line - 1].startswith("def matmul_kernel")
