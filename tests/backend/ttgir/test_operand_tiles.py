"""Dot operand tiles staged once (ttbuild.backend.ttgir.sink_operand_tiles, tma_lowering; CPU). What is checked:

- a tensor that two dots read in the same encoding is written to shared memory once: the causal
  forms of attention (two passes, each with its QK^T on the same Q; backward's loops on the same
  K and V) need no more shared memory than their one-pass forms, and stage no more tiles;
- a tile loaded by TMA that is only read by wgmma is read where TMA wrote it: the Q tile of
  attention through descriptors goes straight from the copy to the QK^T dots, with no local_load,
  no tile written from registers and, in PTX, no 16-bit shared stores and loads before the loop;
  its copy is waited for only just before the loop, after the loop's prologue copies were issued;
- Triton 3.6 compiles the causal TTGIR (oracle).
Results on the H200: `tests/gpu` attention forward and backward rows, causal and not
(docs/STATUS.md, session 26).
"""

from __future__ import annotations

import re

import pytest
from kernel_rows import compile_row
from oracle import assert_triton_compiles

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import SCF, TTG, TTNG
from ttbuild.backend.ir.optraits import walk

PAIRS = [("attn_fwd_d64", "attn_fwd_d64_causal"), ("attn_fwd_d128", "attn_fwd_d128_causal"),
         ("attn_fwd_desc_d128", "attn_fwd_desc_d128_causal"), ("attn_bwd_d64", "attn_bwd_d64_causal"),
         ("attn_bwd_d128_w8", "attn_bwd_d128_causal_w8")]


def _staged(name: str) -> tuple[int, int]:
    """(ttg.shared in bytes, how many `ttg.local_alloc`s write a register tensor) of row `name`."""
    text = compile_row(name, "ttgir").decode()
    shared = int(re.search(r"ttg\.shared = (\d+) : i32", text).group(1))
    return shared, len(re.findall(r'"ttg\.local_alloc"\(%', text))


@pytest.mark.parametrize("plain,causal", PAIRS)
def test_causal_passes_share_their_operand_tiles(plain, causal):
    """The causal kernel runs the same loop twice (off the diagonal, then on it); the tiles both
    passes read are staged once, so it needs the shared memory of the one-pass kernel (before:
    16-64 KiB more, one copy of Q, or of K and V, per pass)."""
    (shared_plain, tiles_plain), (shared_causal, tiles_causal) = _staged(plain), _staged(causal)
    assert shared_causal == shared_plain
    assert tiles_causal <= tiles_plain + 1  # backward's second pass may stage its own dS^T tile


def test_tma_tile_read_by_wgmma_in_place():
    ctx = mu.context()
    with ctx:
        module = mu.parse_module(compile_row("attn_fwd_desc_d128_causal", "ttgir"), ctx, "ttgir")
        ops = walk(module.operation)
        copy = next(op for op in ops if op.name == TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL)  # Q, before the loops
        q_tile = copy.operands[len(copy.operands) - 2]  # desc, coords, barrier, destination, pred
        readers = [u.owner.operation.name for u in q_tile.uses]
        assert readers.count(TTNG.WARP_GROUP_DOT) == 2, readers  # both passes' QK^T read the copy's tile
        assert TTG.LOCAL_LOAD not in readers
        staged = [op for op in ops if op.name == TTG.LOCAL_ALLOC and len(op.operands)]  # tiles written from registers
        assert not [u for op in staged for u in op.results[0].uses if u.owner.operation.name == TTNG.WARP_GROUP_DOT]
        # Q is waited for just before the first loop, after that loop's prologue copies were issued
        top = [o.operation for o in copy.block.operations]
        wait = next(k for k, o in enumerate(top) if o.name == TTNG.WAIT_BARRIER and o.operands[0] == copy.operands[-3])
        assert top[wait + 3].name == SCF.FOR  # wait, inval, dealloc, the loop
        assert [o.name for o in top[top.index(copy):wait]].count(TTNG.BARRIER_EXPECT) == 2 * 2  # K, V of 2 slots
    ptx = compile_row("attn_fwd_desc_d128", "ptx").decode()
    prologue = ptx[:ptx.index("wgmma.mma_async")]
    assert "st.shared.b16" not in prologue and "ld.shared.b16" not in prologue


_LOOP_SRC = """
import triton
import triton.language as tl


@triton.jit
def tile_loop(a_desc, b_desc, c_ptr, K):
    acc = tl.zeros((64, 64), tl.float32)
    for k in range(0, K, 64):
        acc = tl.dot(a_desc.load([0, k]), b_desc.load([k, 0]), acc)
    rows = tl.arange(0, 64)
    tl.store(c_ptr + rows[:, None] * 64 + rows[None, :], acc)
"""


def test_tma_tile_in_a_loop_still_read_back(tmp_path):
    """In a loop left unpipelined (num_stages = 1) the next iteration's copy would rewrite the
    tile while the other warpgroup's wgmma of this one may still read it: the tile goes through
    registers into a staged operand tile, as before."""
    import ttbuild

    src = tmp_path / "tile_loop.py"
    src.write_text(_LOOP_SRC)
    ttgir = ttbuild.compile(src, kernel="tile_loop", signature="tensordesc<fp16[64, 64]>,tensordesc<fp16[64, 64]>,*fp32:16,i32",
                            num_warps=8, num_stages=1, until="ttgir")["ttgir"].decode()
    assert ttgir.count('"ttng.async_tma_copy_global_to_local"') == 2
    assert ttgir.count('"ttg.local_load"') == 2 and len(re.findall(r'"ttg\.local_alloc"\(%', ttgir)) == 2


def test_triton_compiles_the_causal_ttgir(tmp_path):
    path = tmp_path / "attn_fwd_desc_d128_causal.ttgir"
    path.write_bytes(compile_row("attn_fwd_desc_d128_causal", "ttgir"))
    assert_triton_compiles([str(path)])
