"""Loops fenced in kernels of several accumulation phases (ttbuild.backend.ttgir.loop_fences): attention backward at d128 on 4 and 8 warps.

What is checked: which kernels the pass takes (attention backward: its dK/dV and dQ phases; not a
forward attention nor a GEMM, whose TTGIR gets no copy); that in its TTGIR no scalar nor cheap tile
computed before a top-level loop is read after it but through a copy made after the loop; ptxas -v
on the 8-warp rows (no spill, down from 32 bytes; the 4-warp rows: test_split_rows.py) and their
loops (no STL / LDL, the same two waits per iteration); on the CPU (numpy), the TTIR with the
tiles made again and the copies computes the same dQ, dK, dV as without.
"""

from __future__ import annotations

import pytest
from kernel_rows import ROWS, attention_backward_grads, compile_row, past_loops
from ptx_util import ptxas_verbose, sass_loops

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ttgir.loop_fences import cheap, fence_scalars, phases, sink_past_loops

_compile = compile_row


def _func(module):
    """The module's kernel (its tt.func with a body)."""
    return next(op for op in module.body.operations if op.operation.name == "tt.func" and len(op.regions[0].blocks))


@pytest.mark.parametrize("name,count", [("attn_bwd_d128", 3), ("attn_bwd_d128_causal", 3), ("attn_bwd_d128_w8", 2),
                                        ("attn_bwd_d128_causal_w8", 2), ("attn_bwd_d64", 2),
                                        ("attn_fwd_d128_causal", 0), ("matmul_fp16_128x256x64_w8_s3", 1)])
def test_which_kernels_have_phases(name, count):
    """Attention backward starts accumulators in each dK/dV block's first loop and in the dQ
    loop (the causal form's unmasked loops go on with the masked loops' ones): fenced. A forward
    attention (d128 causal: its second pass goes on with the first's accumulator, 64 registers)
    and a GEMM (one loop) are left alone; their TTGIR has no copy."""
    text = _compile(name, "ttgir")
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        module = mu.parse_module(text, ctx, "ttgir")
        assert phases(_func(module), ROWS[name]["num_warps"]) == count
    assert (b"lop3.b32" in text) == (count >= 2)


def _kept_across(ttgir: bytes) -> list[str]:
    """Ops of the TTGIR's kernel defined before a top-level loop whose result something after
    that loop reads, other than the opaque copies: scalars (i32, i64, pointers; not constants)
    and cheap tensor ops."""
    def pick(op, r, readers):
        kind = mu.elem_str(r.type)
        scalar = not mu.is_tensor(r) and (kind in ("i32", "i64") or mu.pointee(kind)) and op.name != "arith.constant"
        if not (scalar or (mu.is_tensor(r) and cheap(op))):
            return None
        return op.name if any(o.name not in ("tt.ptr_to_int", "tt.elementwise_inline_asm") for o in readers) else None

    return past_loops(ttgir, pick)


@pytest.mark.parametrize("name", ["attn_bwd_d128", "attn_bwd_d128_causal", "attn_bwd_d128_w8", "attn_bwd_d128_causal_w8"])
def test_nothing_cheap_kept_across_a_loop(name):
    """After the pass, a scalar computed before a top-level loop reaches the code after it only
    through its copy, and a range, splat, offset, mask or pointer tile not at all. Before it, on 8
    warps, the keys' offsets and masks went from the k, v loads to the dK, dV stores."""
    assert _kept_across(_compile(name, "ttgir")) == []


@pytest.mark.parametrize("name,loops", [("attn_bwd_d128_w8", 2), ("attn_bwd_d128_causal_w8", 4)])
def test_8_warps_no_spill(name, loops, tmp_path):
    """ptxas -v: no stack and no spill (32 bytes of stack before the pass, spilled outside the
    loops); in the SASS no loop spills or reloads and each waits for its wgmmas twice per
    iteration, as before."""
    info = ptxas_verbose(_compile(name, "ptx"), tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in info, info
    bodies = [b for b in sass_loops(tmp_path / "k.cubin") if "HGMMA" in b]
    assert len(bodies) == loops
    for b in bodies:
        assert "STL" not in b and "LDL" not in b, b
        assert b.count("WARPGROUP.DEPBAR") == 2 and b.count("HGMMA") >= 17


@pytest.mark.parametrize("name", ["attn_bwd_d128_w8", "attn_bwd_d128_causal_w8"])
def test_fences_compute_the_same(name):
    """The kernel's TTIR as compiled and with the pass's rewrites (tiles made again after each
    loop, scalars read through copies: more than ten of them here), run on the CPU
    (tests/ttir_numpy.py) over the same inputs, 160 tokens (the second program's keys and queries
    partly past N_CTX): the same dQ, dK, dV, every element written."""
    import numpy as np

    def fence(module):
        func = _func(module)
        sink_past_loops(func.regions[0].blocks[0], cheap)
        assert fence_scalars(func) > 10

    ttir = _compile(name, "ttir")
    before, after = (attention_backward_grads(ttir, rewrite, 5) for rewrite in (None, fence))
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
