"""Ring slots of TMA-fed loops released through empty mbarriers (ttbuild.backend.ttgir.pipeline.release; CPU). What is checked:

- attention forward through descriptors on two warpgroups (kernels/ rows attn_fwd_desc_d128,
  causal too): one empty mbarrier per slot counting every thread; every thread arrives on the slot
  the previous iteration read right after the wait that retires that iteration's wgmma groups,
  from the second iteration on; every thread waits on the refill slot's empty barrier before the
  refill, whose expects and copies are marked released (K and V tiles of 32 KiB, read by
  different dots, each have their own full barriers: QK^T waits for K alone, P V for V);
- in PTX, that loop has no `bar.sync` left, the arrive is not the leader's alone and the refill is
  still fenced for the async proxy;
- one warpgroup (attn_fwd_desc_d64) or a loop of one wgmma (the 8-warp TMA matmuls) keep
  Triton's CTA barrier before the refill: no empty barriers;
- Triton 3.6 compiles the released TTGIR to a cubin (oracle).
The protocol itself ran on the H200 (docs/STATUS.md, session 25): `tests/gpu` attention through
descriptors at N 4096 / 16384, causal and not, matches torch.
"""

from __future__ import annotations

import re

from kernel_rows import compile_row
from oracle import assert_triton_compiles

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import ATTR, SCF, TTNG
from ttbuild.backend.ir.optraits import walk


def _loop_ops(name: str) -> list:
    """(op name, attribute names, the `count` attribute or None) of the ops of the row's first
    pipelined TMA loop (one whose body holds both a refill's ttng.barrier_expect and a wgmma), in
    program order."""
    ctx = mu.context()
    with ctx:
        module = mu.parse_module(compile_row(name, "ttgir"), ctx, "ttgir")
        loops = [op for op in walk(module.operation) if op.name == SCF.FOR
                 and {TTNG.BARRIER_EXPECT, TTNG.WARP_GROUP_DOT} <= {o.operation.name for o in op.regions[0].blocks[0].operations}]
        assert loops, f"{name}: no pipelined TMA loop"
        out = []
        for o in loops[0].regions[0].blocks[0].operations:
            attrs = o.operation.attributes
            names = {a.name if hasattr(a, "name") else a for a in attrs} | set(mu.props(o))
            count = mu.int_attr(attrs["count"]) if "count" in names and "count" in attrs else None
            out.append((o.operation.name, names, count))
        return out


def _inits(name: str) -> list[int]:
    """The arrival counts of the row's ttng.init_barrier ops."""
    text = compile_row(name, "ttgir").decode()
    return [int(c) for c in re.findall(r'"ttng\.init_barrier"\(%\S+\) \{count = (\d+) : i32\}', text)]


def test_two_warpgroups_hand_slots_back_through_empty_barriers():
    for row in ("attn_fwd_desc_d128", "attn_fwd_desc_d128_causal"):
        ops = _loop_ops(row)
        names = [n for n, _, _ in ops]
        first_wait = names.index(TTNG.WARP_GROUP_DOT_WAIT)
        arrive = names.index(TTNG.ARRIVE_BARRIER)
        # the first wait retires the previous iteration's groups (the QK dot's, which also takes P.V)
        assert names[:first_wait].count(TTNG.WARP_GROUP_DOT) == 1 and arrive > first_wait
        assert not any(n == TTNG.WARP_GROUP_DOT_WAIT for n in names[first_wait + 1:arrive])
        _, attrs, count = ops[arrive]
        assert "perThread" in attrs and count == 1
        expect = names.index(TTNG.BARRIER_EXPECT)
        waits = [i for i, n in enumerate(names) if n == TTNG.WAIT_BARRIER]
        dots = [i for i, n in enumerate(names) if n == TTNG.WARP_GROUP_DOT]
        # K's full wait before QK^T, V's before P V, then the refill's empty one
        assert len(waits) == 3 and waits[0] < dots[0] < first_wait < waits[1] < dots[1] < waits[2] < expect
        released = [n for n, a, _ in ops if ATTR.RELEASED in a]
        assert released == [TTNG.BARRIER_EXPECT, TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL] * 2  # K's group, V's group
        # 3 slots: full barriers armed by one thread (for K, for V), empty ones counting the 256 threads
        passes = 2 if row.endswith("causal") else 1
        assert _inits(row).count(256) == 3 * passes and _inits(row).count(1) == 1 + 2 * 3 * passes  # and Q's


def test_one_warpgroup_or_one_dot_keeps_the_cta_barrier():
    for row in ("attn_fwd_desc_d64", "matmul_tma_persistent_fp16_128x256x64_w8_s3",
                "matmul_desc_fp16_128x256x64_w8_s3"):
        names = [n for n, _, _ in _loop_ops(row)]
        # K and V of 8 KiB share a full barrier (lower_loops.SPLIT_BYTES), A and B one wgmma's
        assert TTNG.ARRIVE_BARRIER not in names and names.count(TTNG.WAIT_BARRIER) == 1, row
        assert all(c == 1 for c in _inits(row)), row
        ptx = compile_row(row, "ptx").decode()
        assert "bar.sync" in _ptx_loop(ptx), row


def _ptx_loop(ptx: str) -> str:
    """The PTX between the pipelined loop's label and its back branch (the loop holding the
    refill's expect_tx)."""
    for m in re.finditer(r"^(\$L__BB\d+_\d+):$", ptx, re.M):
        label = m.group(1)
        end = ptx.find(f"bra \t{label};", m.end())
        if end > 0 and "mbarrier.arrive.expect_tx" in ptx[m.end():end]:
            return ptx[m.end():end]
    raise AssertionError("no loop with a TMA refill in the PTX")


def test_the_released_loop_meets_no_cta_barrier():
    body = _ptx_loop(compile_row("attn_fwd_desc_d128", "ptx").decode())
    assert "bar.sync" not in body and "barrier.sync" not in body
    arrive = re.search(r"@(%p\d+) mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];", body)
    assert arrive, body
    # every thread arrives: its predicate is "a slot was read before" (extract >= 0), not the leader test of tid.x
    leader = re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64", body)
    assert leader and "fence.proxy.async.shared::cta" in body[leader.end():]
    assert body.count("mbarrier.try_wait.parity") == 3  # the slot's full barriers (K, V), then the refill's empty one


def test_triton_compiles_the_released_ttgir(tmp_path):
    path = tmp_path / "attn_fwd_desc_d128.ttgir"
    path.write_bytes(compile_row("attn_fwd_desc_d128", "ttgir"))
    assert_triton_compiles([str(path)])
