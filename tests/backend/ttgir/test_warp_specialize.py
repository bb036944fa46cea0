"""Warp specialization of loops marked `tl.range(..., warp_specialize=True)` (ttbuild.backend.ttgir.warp_specialize, llir.control_flow; CPU). What is checked:

- the kernels/ rows that mark their loop (attention forward through descriptors at d128, the
  TMA-persistent matmul) get one `ttg.warp_specialize` op: the consumers' region has no K/V (or
  A/B) descriptor load left, waits on the full barriers and arrives on the empty ones; the
  producer's region holds only the loop nest, scalar address math, the empty-barrier wait, the
  expect and the TMA copies; the module launches `ttg.total-num-warps`, also in the metadata;
- in PTX: a block of the total's threads, the partitions' named barriers (never `bar.sync 0`
  after the split), setmaxnreg with 8 consumer warps under the kernel's 168-register cap, and
  beside 4 consumer warps a producer warpgroup under a 128-register cap (two CTAs an SM);
- the persistent 4-warp row runs two consumer groups (ping-pong): region 2 is region 0's code,
  the groups hand the K loop over on named barriers 4 and 5, and a tile loop whose K bounds
  change per tile keeps one group;
- the same source unmarked (the rows without `_ws`) compiles with no partition;
- a marked loop whose addresses need a load compiles as if unmarked.
On the H200 the `_ws` rows compute the same results as their unmarked rows (tests/gpu);
figures in docs/STATUS.md, session 27.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kernel_rows import compile_row

import ttbuild
from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import walk

ROWS = {"attn_fwd_desc_d128_ws": 12, "attn_fwd_desc_d64_ws": 8, "attn_fwd_desc_d64_causal_ws": 8,
        "matmul_tma_persistent_fp16_128x128x64_w4_s4_ws": 12,
        "matmul_tma_persistent_fp16_128x256x64_w8_s3_ws": 12}
PRODUCER_OPS = {SCF.FOR, SCF.YIELD, TTG.MEMDESC_INDEX, TTNG.WAIT_BARRIER, TTNG.BARRIER_EXPECT,
                TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL, TT.GET_PROGRAM_ID, TTG.WARP_RETURN}


def _regions(text: bytes, regions=(0, 1)):
    """(ops of the consumers' region, ops of the producer's, the module's total warps) of a TTGIR;
    `regions`: which regions' ops, in that order."""
    ctx = mu.context()
    with ctx:
        module = mu.parse_module(text, ctx, "ttgir")
        ws = [op for op in walk(module.operation) if op.name == TTG.WARP_SPECIALIZE]
        total = module.operation.attributes["ttg.total-num-warps"].value if ws else None
        return ([[o.name for blk in op.regions[i].blocks for top in blk.operations
                  for o in [top.operation, *walk(top)]] for op in ws for i in regions], total)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_marked_loop_runs_as_a_producer_and_consumers(name):
    (consumer, producer), total = _regions(compile_row(name, "ttgir"))
    loops = 2 if "causal" in name else 1  # the causal kernel's two passes, each marked
    assert total == ROWS[name]
    assert TT.DESCRIPTOR_LOAD not in consumer
    assert TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL not in consumer or name.startswith("attn")  # attention's Q, once
    assert consumer.count(TTNG.ARRIVE_BARRIER) == 2 * loops  # in the loop, and the last fill's after it
    assert TTNG.WARP_GROUP_DOT in consumer
    others = {o for o in producer if not o.startswith("arith.")} - PRODUCER_OPS
    assert not others, others
    assert producer.count(TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL) == 2 * loops
    assert producer.count(TTNG.BARRIER_EXPECT) == loops
    # the persistent kernel's producer walks the tiles and, inside, the K steps; the causal
    # kernel's walks both passes, one after the other
    assert producer.count(SCF.FOR) == (2 if name.startswith("matmul") else loops)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_unmarked_row_has_no_partitions(name):
    plain = name.removesuffix("_ws")
    assert _regions(compile_row(plain, "ttgir")) == ([], None)


def test_ptx_of_partitions():
    ptx = compile_row("matmul_tma_persistent_fp16_128x256x64_w8_s3_ws", "ptx").decode()
    assert re.search(r"\.reqntid 384\b", ptx) and re.search(r"\.maxnreg 168\b", ptx)
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx and "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    split = ptx.index("setmaxnreg")
    after = re.findall(r"bar\.sync\s+(\d+)(?:,\s*(\d+))?;", ptx[split:])
    assert after and all(b != "0" for b, _ in after), after  # no CTA-wide barrier once partitioned
    assert ("1", "256") in after  # the consumers' barrier



def test_persistent_four_warp_loop_runs_two_consumer_groups():
    """Ping-pong: the second consumer group (region 2) is the first's code; each waits on its
    order barrier before a K loop and arrives on the other's after it, the second group first
    arriving once on the first's (group 0 starts)."""
    name = "matmul_tma_persistent_fp16_128x128x64_w4_s4_ws"
    ttgir = compile_row(name, "ttgir")
    (first, producer, second), total = _regions(ttgir, (0, 1, 2))
    assert total == 12 and b"partitionNumWarps = array<i32: 4, 4>" in ttgir
    skip = {TTNG.NAMED_BARRIER_ARRIVE, "arith.constant"}  # the second group's first arrive
    assert [o for o in first if o not in skip] == [o for o in second if o not in skip]
    assert first.count(TTNG.NAMED_BARRIER_WAIT) == second.count(TTNG.NAMED_BARRIER_WAIT) == 1
    assert first.count(TTNG.NAMED_BARRIER_ARRIVE) == 1 and second.count(TTNG.NAMED_BARRIER_ARRIVE) == 2
    assert TTNG.NAMED_BARRIER_WAIT not in producer
    ptx = compile_row(name, "ptx").decode()
    assert re.search(r"\.reqntid 384\b", ptx) and ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 2
    for bar in ("4", "5"):
        assert re.search(rf"bar\.sync\s+{bar}, 256;", ptx) and re.search(rf"bar\.arrive\s+{bar}, 256;", ptx)
    assert re.search(r"bar\.sync\s+3, 128;", ptx)  # the second group's own CTA barrier


def test_four_consumer_warps_take_a_producer_warpgroup_and_two_ctas_of_registers():
    """Beside 4 consumer warps the producer is a warpgroup too (blocks of whole warpgroups); the
    8-warp block is capped at 128 registers (two CTAs an SM's 64K) and setmaxnreg moves the
    producer's down to 40 and the consumers' up to 216 (128 * 8 = 40 * 4 + 216 * 4)."""
    out = ttbuild.compile(SOURCE.replace("{OFF}", "tl.program_id(0) * 128"), kernel="k", signature=SIG, num_warps=4,
                          num_stages=3, until="ptx")
    assert _regions(out["ttgir"])[1] == 8 and b"partitionNumWarps = array<i32: 4>" in out["ttgir"]
    ptx = out["ptx"].decode()
    assert re.search(r"\.reqntid 256\b", ptx) and re.search(r"\.maxnreg 128\b", ptx)
    assert "setmaxnreg.inc.sync.aligned.u32 216;" in ptx and "setmaxnreg.dec.sync.aligned.u32 40;" in ptx


@pytest.mark.parametrize("num_warps, total, plan", [
    (4, 8, (128, 216, 40)),    # one warpgroup beside the producer's: two CTAs an SM
    (8, 12, (168, 232, 40)),   # two consumer warpgroups (attention d128, the w8 matmul)
    (4, 12, (168, 232, 40)),   # ping-pong: two groups of one warpgroup
    (4, 4, None),              # no partitions
])
def test_register_plan_fills_the_sm_and_moves_registers_by_warpgroup(num_warps, total, plan):
    """Per block, what launches (cap x threads) fits the CTAs an SM holds in 64K registers, and
    after setmaxnreg the partitions use no more than the cap gave the block."""
    from ttbuild.backend.llir.control_flow import register_plan

    got = register_plan(num_warps, total)
    assert (got and (got.cap, got.consumer, got.producer)) == plan
    if got:
        ctas = 2 if total <= 8 else 1
        assert got.cap * 32 * total * ctas <= 65536
        assert got.consumer * (total - 4) + got.producer * 4 <= got.cap * total
        assert all(v % 8 == 0 and 24 <= v <= 256 for v in (got.consumer, got.producer))


def test_a_four_warp_consumer_too_large_for_two_ctas_runs_one():
    """Attention at d128 on 4 consumer warps needs about 250 registers: under the two-CTA plan
    (216) ptxas serializes its wgmma, so the cubin stage keeps the one-CTA form (no cap, no
    setmaxnreg); at d64 the plan holds (128 registers launched, two CTAs an SM)."""
    import warnings

    from ttbuild.backend.nvptx.cubin_info import kernel_resources

    src = (Path(__file__).resolve().parents[3] / "kernels" / "attention.py").read_text()
    for d, two_ctas in ((128, False), (64, True)):
        sig = (f"fp32,*fp32:16,i32,i32,tensordesc<fp16[128, {d}]>,tensordesc<fp16[64, {d}]>,"
               f"tensordesc<fp16[64, {d}]>,tensordesc<fp16[128, {d}]>,i32:16")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = ttbuild.compile(src, kernel="_attn_fwd_desc", signature=sig, num_warps=4, num_stages=3,
                                  constexprs={"HEAD_DIM": d, "BLOCK_M": 128, "BLOCK_N": 64, "STAGE": 1,
                                              "WARP_SPECIALIZE": True})
        assert not [w for w in seen if "serialized" in str(w.message)], d
        regs, frame = kernel_resources(out["cubin"])
        assert frame == 0 and (regs == 128) == two_ctas, (d, regs)


def test_metadata_records_total_warps():
    from ttbuild.frontend import abi
    from ttbuild.graph.meta import build_metadata

    variant = {"name": "k_ws", "kernel": "k", "file": "k.py", "constexprs": {}, "signature": "i32",
               "num_warps": 8, "num_ctas": 1, "num_stages": 3, "target": "cuda:90", "arch": "sm_90a"}
    blobs = {s: b"out" for s in ("parse", "ttir", "llir", "ptx", "cubin")}
    attrs = re.search(rb'"ttg.total-num-warps" = \d+ : i32', compile_row("matmul_tma_persistent_fp16_128x256x64_w8_s3_ws",
                                                                         "ttgir")).group(0)
    for extra, total in ((b", " + attrs, 12), (b"", None)):
        ttgir = b'module attributes {"ttg.num-warps" = 8 : i32, ttg.shared = 0 : i32' + extra + \
            b"} {\n  tt.func public @k() {\n    tt.return\n  }\n}\n"
        blobs.update(abi=abi.record([abi.entry("n", "scalar", "i32")], []), ttgir=ttgir)
        doc = build_metadata(variant, blobs, "k_ws.cubin")
        assert doc["num_warps"] == 8 and doc.get("total_num_warps") == total


SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def k(a_desc, b_desc, c_desc, rows, K):
    off = {OFF}
    acc = tl.zeros((128, 128), tl.float32)
    for ki in tl.range(0, K, 64, warp_specialize=True):
        a = a_desc.load([off, ki])
        b = b_desc.load([ki, 0])
        acc = tl.dot(a, b, acc)
    c_desc.store([off, 0], acc.to(tl.float16))
'''
SIG = "tensordesc<fp16[128, 64]>,tensordesc<fp16[64, 128]>,tensordesc<fp16[128, 128]>,*i32,i32"


PERSISTENT = '''
import triton
import triton.language as tl


@triton.jit
def k(a_desc, b_desc, c_desc, M, K):
    for tile in tl.range(tl.program_id(0), M // 128, 132, warp_specialize=True):
        acc = tl.zeros((128, 128), tl.float32)
        for ki in range(0, {KHI}, 64):
            a = a_desc.load([tile * 128, ki])
            b = b_desc.load([ki, 0])
            acc = tl.dot(a, b, acc)
        c_desc.store([tile * 128, 0], acc.to(tl.float16))
'''


@pytest.mark.parametrize("khi, total", [("K", 12), ("tl.minimum(K, (tile + 1) * 64)", 8)])
def test_two_consumer_groups_need_k_bounds_set_before_the_tile_loop(khi, total):
    """A group skips the other group's fills by the K loop's trip count, so that count must be
    the same for every tile: a K bound computed from the tile keeps one consumer group."""
    out = ttbuild.compile(PERSISTENT.replace("{KHI}", khi), kernel="k", signature=SIG.rsplit(",", 2)[0] + ",i32,i32",
                          num_warps=4, num_stages=3, until="ptx")
    assert _regions(out["ttgir"])[1] == total
    assert "cp.async.bulk.tensor" in out["ptx"].decode()


@pytest.mark.parametrize("off, specialized", [("tl.program_id(0) * 128", True), ("tl.load(rows)", False)])
def test_a_load_in_the_producers_slice_leaves_the_loop_unspecialized(off, specialized):
    """The producer only computes scalars: an address that needs a load (here a row read from
    memory) keeps the loop as it would be unmarked, software-pipelined, and it still builds."""
    out = ttbuild.compile(SOURCE.replace("{OFF}", off), kernel="k", signature=SIG, num_warps=4, num_stages=3,
                          until="ptx")
    regions, total = _regions(out["ttgir"])
    assert bool(regions) == specialized and (total == 8) == specialized
    assert "cp.async.bulk.tensor" in out["ptx"].decode()
