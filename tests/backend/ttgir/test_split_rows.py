"""Loops split by rows (ttbuild.backend.ttgir.split_rows): attention backward at d128 in tutorial 06's 4-warp config.

What is checked: which loops are split (accumulators over 192 fp32 registers per thread) and which
are left alone (8 warps, d64, a reduction over the rows); the split TTGIR (each dK/dV loop once
per 64 keys, accumulators 64x128, nothing 2-D live across a loop); ptxas -v on it (no wgmma
serialization, spills of at most 8 bytes, down from 1192 / 1840 bytes); Triton 3.6 compiling our TTGIR to
cubin (oracle). Results on the GPU: tests/gpu/test_gpu_tensorcore.py, every `_attn_bwd` row.
"""

from __future__ import annotations

import re

import pytest
from kernel_rows import KDIR, ROWS, attention_backward_grads, compile_row, past_loops
from ptx_util import ptxas_verbose, sass_loops

import ttbuild
from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ttgir.split_rows import split_rows

_compile = compile_row


def _splits(ttir: bytes, num_warps: int) -> int:
    ctx = mu.context()
    with ctx, mu.ir.Location.unknown(ctx):
        return split_rows(mu.parse_module(ttir, ctx, "ttir"), num_warps)


@pytest.mark.parametrize("name,splits", [("attn_bwd_d128", 1), ("attn_bwd_d128_causal", 1), ("attn_bwd_d128_w8", 0),
                                         ("attn_bwd_d128_causal_w8", 0), ("attn_bwd_d64", 0)])
def test_which_loops_split(name, splits):
    """Two 128x128 fp32 accumulators on 4 warps need 256 registers per thread: split (the causal
    form's masked and unmasked loops as one region). On 8 warps or at d64 they need 128: left."""
    assert _splits(_compile(name, "ttir"), ROWS[name]["num_warps"]) == splits


REDUCED = '''
import triton
import triton.language as tl


@triton.jit
def two_acc(A, B, C, Out, n):
    r = tl.arange(0, 128)
    a = tl.load(A + r[:, None] * 128 + r[None, :])
    x = tl.zeros((128, 128), tl.float32)
    y = tl.zeros((128, 128), tl.float32)
    for i in range(n):
        b = tl.load(B + i * 16384 + r[:, None] * 128 + r[None, :])
        x += tl.dot(a, b)
        y += tl.dot(a, tl.trans(b))
    tl.store(Out + r, tl.sum(x + y, axis=0))


@triton.jit
def two_acc_rows(A, B, C, Out, n):
    r = tl.arange(0, 128)
    a = tl.load(A + r[:, None] * 128 + r[None, :])
    x = tl.zeros((128, 128), tl.float32)
    y = tl.zeros((128, 128), tl.float32)
    for i in range(n):
        b = tl.load(B + i * 16384 + r[:, None] * 128 + r[None, :])
        x += tl.dot(a, b)
        y += tl.dot(a, tl.trans(b))
    tl.store(Out + r[:, None] * 128 + r[None, :], (x + y).to(tl.float16))
'''


@pytest.mark.parametrize("kernel,out,splits", [("two_acc", "*fp32:16", 0), ("two_acc_rows", "*fp16:16", 1)])
@pytest.mark.parametrize("into_b", [False, True])
def test_what_keeps_the_loop(kernel, out, splits, into_b, tmp_path):
    """Split when the rows stay apart up to the store; not when they meet in tl.sum(axis=0)
    after the loop, nor when the store goes to B, which the loop reads (block 0's store would run
    before block 1's loads)."""
    src = tmp_path / "two_acc.py"
    src.write_text(REDUCED.replace("tl.store(Out", "tl.store(B") if into_b else REDUCED)
    ttir = ttbuild.compile(src, kernel=kernel, signature=f"*fp16:16,*fp16:16,*fp16:16,{out},i32",
                           num_warps=4, until="ttir")["ttir"]
    assert _splits(ttir, 4) == (0 if into_b else splits)


@pytest.mark.parametrize("name,kv,dq", [("attn_bwd_d128", 2, 1), ("attn_bwd_d128_causal", 4, 2)])
def test_split_ttgir(name, kv, dq):
    """Each dK/dV loop runs once per 64 keys (dK, dV accumulate 64x128 tiles on wgmma; no
    128x128 fp32 accumulator is left), then the dQ loop; the keys' stores follow each block."""
    text = _compile(name, "ttgir").decode()
    assert text.count('"scf.for"') == kv + dq
    acc = re.findall(r'"ttng.warp_group_dot"\([^)]*\) \{[^}]*\} : \([^)]*, (tensor<\d+x\d+xf32)', text)
    assert acc.count("tensor<64x128xf32") == 2 * kv and acc.count("tensor<128x128xf32") == dq, acc
    assert _tiles_across_loops(text) == [], "mask / offset / pointer tiles kept across a loop"
    stores = [m.start() for m in re.finditer(r'"tt.store"\(', text)]
    fors = [m.start() for m in re.finditer(r'"scf.for"', text)]
    assert len(stores) == 5 and stores[1] < fors[kv // 2]  # block 0's dV, dK before block 1's loop


def _tiles_across_loops(ttgir: bytes | str) -> list[str]:
    """Names of the 2-D tensors a top-level op defines before a top-level loop and something
    after that loop reads."""
    return past_loops(ttgir, lambda op, r, readers: r.get_name() if len(mu.shape_of(r.type)) == 2 else None)


@pytest.mark.parametrize("name,bound", [("attn_bwd_d128", 8), ("attn_bwd_d128_causal", 72)])
def test_ptxas_keeps_the_wgmmas_in_flight(name, bound, tmp_path):
    """ptxas -v: no C7512 (wgmma serialized for registers) and spills bounded, outside the loops
    (test_no_spill_and_wgmmas_in_flight_in_the_loops): 8 / 60 bytes today (a thread's row index
    kept across them; the causal form 4 until its two passes shared their K and V tiles in session
    26: ptxas spends the registers differently once the second tile's stores are gone, at the same
    speed on the H200); 192 / 940 before loop_fences made the values after each loop there,
    1192 / 1840 unsplit, Triton 3.6's build of the same config 2692 / 2404."""
    info = ptxas_verbose(_compile(name, "ptx"), tmp_path)
    assert "C75" not in info, info
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    assert int(spill.group(1)) <= bound and int(spill.group(2)) <= bound + bound // 2, info


def test_triton_accepts_the_split_ttgir(tmp_path):
    """Triton 3.6 parses, verifies and compiles our split TTGIR to cubin (oracle; skips without it)."""
    from oracle import assert_triton_compiles

    path = tmp_path / "attn_bwd_d128_causal.ttgir"
    path.write_bytes(_compile("attn_bwd_d128_causal", "ttgir"))
    assert_triton_compiles([str(path)])


@pytest.mark.parametrize("name", ["attn_bwd_d128", "attn_bwd_d128_causal"])
def test_split_computes_the_same(name):
    """The kernel's TTIR before and after split_rows, run on the CPU (tests/ttir_numpy.py) over
    the same inputs, 160 tokens (the second program's keys and queries partly past N_CTX): the
    same dQ, dK, dV, every element written."""
    import numpy as np

    def split(module):
        assert split_rows(module, ROWS[name]["num_warps"]) == 1

    ttir = _compile(name, "ttir")
    before, after = (attention_backward_grads(ttir, rewrite, 3) for rewrite in (None, split))
    for a, b in zip(after, before):
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name,loops", [("attn_bwd_d128", 3), ("attn_bwd_d128_causal", 6)])
def test_no_spill_and_wgmmas_in_flight_in_the_loops(name, loops, tmp_path):
    """In the SASS, no loop spills or reloads (unsplit: 86 STL / 93 LDL in the dK/dV loop) and each
    waits for its wgmmas twice per iteration, the waits the TTGIR places (unsplit: a
    WARPGROUP.DEPBAR after each of the 40 HGMMAs, ptxas's serialization)."""
    ptxas_verbose(_compile(name, "ptx"), tmp_path)
    bodies = [b for b in sass_loops(tmp_path / "k.cubin") if "HGMMA" in b]
    assert len(bodies) == loops
    for b in bodies:
        assert "STL" not in b and "LDL" not in b, b
        assert b.count("WARPGROUP.DEPBAR") == 2 and b.count("HGMMA") >= 18


MATMUL_SIG = "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:16,i32:16"
MATMUL_CX = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8, "ACTIVATION": "",
             "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}


def _matmul_w4(until):
    return ttbuild.compile(KDIR / "matmul.py", kernel="matmul_kernel", signature=MATMUL_SIG, constexprs=MATMUL_CX,
                           num_warps=4, num_stages=3, until=until)[until]


def test_matmul_128x256_on_4_warps_computes_the_same():
    """kernels/matmul.py (tutorial 03's form) at 128x256x64 on 4 warps: one 256-register
    accumulator, split into two 64-row blocks, each carrying its own A pointer tile through the K
    loop. Run on the CPU before and after (200x272x96, masked edges): the same C, every element
    written, C = A B within fp16 rounding."""
    import numpy as np
    from ttir_numpy import Program

    m, n, k = 200, 272, 96
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(m * k).astype(np.float16), rng.standard_normal(k * n).astype(np.float16)
    outs = []
    for split in (False, True):
        ctx = mu.context()
        with ctx, mu.ir.Location.unknown(ctx):
            module = mu.parse_module(_matmul_w4("ttir"), ctx, "ttir")
            if split:
                assert split_rows(module, 4) == 1
            c = np.full(m * n, np.nan, np.float16)
            prog = Program(module)
            for pid in range(4):
                prog.run([a, b, c, m, n, k, k, n, n], (pid, 0, 0))
        outs.append(c.astype(np.float32))
    ref = a.reshape(m, k).astype(np.float32) @ b.reshape(k, n).astype(np.float32)
    assert not np.isnan(outs[0]).any()
    np.testing.assert_array_equal(outs[1], outs[0])
    np.testing.assert_allclose(outs[0], ref.ravel(), rtol=1e-2, atol=1e-2)


def test_matmul_128x256_on_4_warps_fits(tmp_path):
    """The same config through ptxas: no spill and no C75xx (unsplit: 1312 bytes of spills and
    C7511, wgmma serialized)."""
    info = ptxas_verbose(_matmul_w4("ptx"), tmp_path)
    assert "C75" not in info and "0 bytes spill stores" in info, info
