"""Tensor descriptors through TMA (CPU). What is checked:

Which variants take it (sm_90+, eligible descriptor parameters, not disable_tma), the tensormap
parameter and `tt.descriptor_load` in TTIR, the pipelined TTGIR (an S-slot ring per operand in its
wgmma encoding, one mbarrier per slot, the phase carried, Triton's LowerLoops form), the lowering of
other descriptor loads, and the `ttb.tma` record the runtime encodes the CUtensorMap from.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from oracle import assert_triton_compiles

import ttbuild
from ttbuild import tma
from ttbuild.irattrs import module_attrs
from ttbuild.options import Options
from ttbuild.signature import parse_entry
from ttbuild.stages import DEFAULT, Request

MATMUL = Path(__file__).parents[3] / "kernels" / "matmul_descriptor.py"
MISC = Path(__file__).parents[2] / "data" / "gpu_kernels" / "misc.py"  # tma_reduce_kernel, tma_reduce_made_kernel
DEVICE_CX = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
HOST_SIG = "tensordesc<fp16[128, 64]>:16,tensordesc<fp16[64, 128]>:16,tensordesc<fp16[128, 128]>:16,i32,i32,i32"

# B given K-major as a [BN, BK] block and transposed in the kernel (tutorial 09's persistent form)
BT_SRC = '''
import triton
import triton.language as tl


@triton.jit
def mm_bt(a_desc, b_desc, c_ptr, K, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([pid_n * BN, k * BK])
        acc = tl.dot(a, b.T, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def made_in_a_loop(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    for i in range(2):
        d = tl.make_tensor_descriptor(x_ptr + i * M * N, shape=[M, N], strides=[N, 1], block_shape=[BM, BN],
                                      padding_option="nan")
        x = d.load([0, 0])
        tl.store(out_ptr + i * BM * BN + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], x)


@triton.jit
def nan_padded(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    d = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN], padding_option="nan")
    x = d.load([0, 0])
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], x)


@triton.jit
def scale(in_desc, out_ptr, N, BM: tl.constexpr, BN: tl.constexpr):
    x = in_desc.load([tl.program_id(0) * BM, 0])
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], x * 2)
'''


def host(until="ttgir", **opts):
    return ttbuild.compile(MATMUL, kernel="matmul_host_descriptor_kernel", signature=HOST_SIG,
                           constexprs={"GROUP_SIZE_M": 8}, num_warps=4, num_stages=4, until=until, **opts)


@pytest.fixture(scope="module")
def bt_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("tma") / "bt.py"
    p.write_text(BT_SRC)
    return p


def test_only_sm90_variants_with_tma_on_key_their_ttir_with_it():
    params = [parse_entry(e) for e in ("tensordesc<fp16[128, 64]>", "i32")]
    ttir = lambda **o: DEFAULT.options(Request("k", "k.py", params, {}, Options(**o)))["ttir"]  # noqa: E731
    assert ttir(target="cuda:90")["tma"] is True
    assert "tma" not in ttir(target="cuda:80")
    assert "tma" not in ttir(target="cuda:90", disable_tma=True)
    # a rank-3 block or one past 256 elements keeps the pointer form
    assert not tma.eligible((2, 64, 64), 16) and not tma.eligible((512, 64), 16) and tma.eligible((256, 64), 8)


def test_ttir_takes_a_tensormap_per_descriptor_and_loads_through_it():
    ttir = host(until="ttir")["ttir"].decode()
    sig = re.search(r"function_type = \(([^)]*)\)", ttir).group(1)
    # per descriptor: the tensormap, then the pointer form (base, shape, strides but the last)
    assert sig.startswith("!tt.tensordesc<tensor<128x64xf16>>, !tt.ptr<f16>, i32, i32, i64, "
                          "!tt.tensordesc<tensor<64x128xf16>>, !tt.ptr<f16>, i32, i32, i64, "
                          "!tt.tensordesc<tensor<128x128xf16>>, !tt.ptr<f16>")
    assert ttir.count('"tt.descriptor_load"') == 2 and ttir.count('"tt.descriptor_store"') == 1
    assert '"tt.load"' not in ttir and '"tt.store"' not in ttir  # tiles in and out through TMA


@pytest.mark.parametrize("opts", [{"target": "cuda:80"}, {"target": "cuda:90", "disable_tma": True}])
def test_without_tma_descriptors_keep_the_pointer_form(opts):
    ttir = host(until="ttir", **opts)["ttir"].decode()
    assert "tensordesc" not in ttir and "descriptor_load" not in ttir
    assert ttir.count('"tt.load"') == 2
    assert tma.MODULE_ATTR not in module_attrs(ttir)


def test_pipelined_tma_loads_fill_wgmma_rings_through_slot_barriers():
    ttgir = host()["ttgir"].decode()
    S = 4
    assert "tt.descriptor_load" not in ttgir
    # one ring per operand in its wgmma encoding (B [64, 128]: two 128-byte swizzle blocks), S slots
    assert re.search(rf"memdesc<{S}x128x64xf16, #ttg\.nvmma_shared<\{{swizzlingByteWidth = 128, transposed = false", ttgir)
    assert re.search(rf"memdesc<{S}x64x128xf16, #ttg\.nvmma_shared<\{{swizzlingByteWidth = 128, transposed = false", ttgir)
    assert f"memdesc<{S}x1xi64" in ttgir
    assert ttgir.count('"ttng.init_barrier"') == S and ttgir.count('"ttng.inval_barrier"') == S
    body = ttgir[ttgir.index('"scf.for"'):]
    loop = body[:body.index('"scf.yield"')]
    # prologue: S-1 iterations, each one expect + two copies; the loop: one wait, one expect, two copies
    pro = ttgir[:ttgir.index('"scf.for"')]
    assert pro.count('"ttng.barrier_expect"') == S - 1 and pro.count('"ttng.async_tma_copy_global_to_local"') == 2 * (S - 1)
    assert loop.count('"ttng.wait_barrier"') == 1 and loop.count('"ttng.barrier_expect"') == 1
    assert loop.count('"ttng.async_tma_copy_global_to_local"') == 2
    assert re.search(r'"ttng.barrier_expect"\([^)]*\) \{size = 32768 : i32\}', loop)  # 2 x 128 x 64 x 2 bytes
    assert "pendings = 1" in loop and "ttg.async_wait" not in ttgir and "ttng.fence_async_shared" not in loop
    assert tma.decode_attr(module_attrs(ttgir)[tma.MODULE_ATTR]) == [
        {"swizzle": 128, "box": [128, 64]}, {"swizzle": 128, "box": [64, 64]}, {"swizzle": 128, "box": [128, 64]}]


def test_a_transposed_tma_tile_is_the_wgmma_operand_in_a_transposed_view(bt_file):
    out = ttbuild.compile(bt_file, kernel="mm_bt", signature="tensordesc<fp16[128, 64]>,tensordesc<fp16[128, 64]>,*fp16:16,i32,i32",
                          constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=4, num_stages=3, until="ttgir")
    ttgir = out["ttgir"].decode()
    assert "tt.trans" not in ttgir and "tt.descriptor_load" not in ttgir
    # B^T: the [128, 64] box written as is, read by wgmma as a K-contiguous [64, 128] operand
    assert re.search(r"memdesc<3x64x128xf16, #ttg\.nvmma_shared<\{swizzlingByteWidth = 128, transposed = true", ttgir)
    assert int(module_attrs(ttgir)["ttg.shared"]) >= 3 * 2 * 128 * 64 * 2 + 3 * 8


def test_a_descriptor_load_outside_a_loop_waits_on_its_own_barrier(bt_file):
    out = ttbuild.compile(bt_file, kernel="scale", signature="tensordesc<fp16[64, 32]>,*fp16:16,i32",
                          constexprs={"BM": 64, "BN": 32}, num_warps=4, until="ttgir")
    ttgir = out["ttgir"].decode()
    order = [m.group(1) for m in re.finditer(r'"(ttng\.\w+|ttg\.local_load)"', ttgir)]
    assert order == ["ttng.init_barrier", "ttng.barrier_expect", "ttng.async_tma_copy_global_to_local",
                     "ttng.wait_barrier", "ttg.local_load", "ttng.inval_barrier"]
    # 32 fp16 = 64-byte rows: the 64-byte swizzle, one box
    assert "swizzlingByteWidth = 64" in ttgir
    assert tma.decode_attr(module_attrs(ttgir)[tma.MODULE_ATTR]) == [{"swizzle": 64, "box": [64, 32]}]


def device(until="ttgir", **opts):
    return ttbuild.compile(MATMUL, kernel="matmul_descriptor_kernel", signature="*fp16:16,*fp16:16,*fp16:16,i32,i32,i32",
                           constexprs=DEVICE_CX, num_warps=4, num_stages=4, until=until, **opts)


def test_descriptors_made_in_the_kernel_write_their_tensormaps_into_global_scratch():
    """Tutorial 09's device-descriptor matmul: A, B and C get a tensormap each, made by the
    program in its 128-byte global scratch slots (box and extents innermost first, the row
    stride in bytes, fp16 = elemtype 6, the 128-byte swizzle); A and B load through TMA rings, C
    is written by one TMA store of the tile."""
    ttgir = device()["ttgir"].decode()
    assert "tt.make_tensor_descriptor" not in ttgir and "tt.descriptor_load" not in ttgir
    attrs = module_attrs(ttgir)
    assert attrs["ttg.global_scratch_memory_size"] == 384 and attrs["ttg.global_scratch_memory_alignment"] == 128
    creates = re.findall(r'"ttng.tensormap_create"\(([^)]*)\) \{([^}]*)\}', ttgir)
    assert len(creates) == 3
    for _, attr in creates:
        assert "elem_type = 6" in attr and "swizzle_mode = 3" in attr and "fill_mode = 0" in attr
        assert "operandSegmentSizes = array<i32: 1, 1, 2, 2, 1, 2>" in attr
    offsets = re.findall(r"ttg.global_scratch_memory_offset = (\d+)", ttgir)
    assert offsets == ["0", "128", "256"]
    assert ttgir.count('"ttng.tensormap_fenceproxy_acquire"') == 3 and ttgir.count('"ttng.wait_barrier"') == 1
    # the store: the accumulator's own layout into the tile, the fence, the TMA store and its wait
    tail = ttgir[ttgir.rindex('"ttg.local_alloc"('):]
    assert re.match(r'"ttg.local_alloc"\(%\w+\) .*\(tensor<128x128xf16, #ttg.nvidia_mma<', tail)
    assert [m for m in re.findall(r'"(ttng\.\w+)"', tail)] == [
        "ttng.fence_async_shared", "ttng.async_tma_copy_local_to_global", "ttng.async_tma_store_wait"]
    assert tma.MODULE_ATTR not in attrs  # no descriptor parameter: nothing for the runtime to encode
    # without TMA: the pointer form and no scratch
    ttgir80 = device(target="cuda:80")["ttgir"].decode()
    assert "tensormap" not in ttgir80 and "ttg.global_scratch_memory_size" not in module_attrs(ttgir80)


def test_a_descriptor_made_inside_runtime_control_flow_keeps_the_pointer_form(bt_file):
    ttir = ttbuild.compile(bt_file, kernel="made_in_a_loop", signature="*fp32:16,*fp32:16,i32,i32",
                           constexprs={"BM": 16, "BN": 16}, until="ttir")["ttir"].decode()
    assert "make_tensor_descriptor" not in ttir and '"tt.load"' in ttir


def test_nan_padding_fills_the_box_with_nan(bt_file):
    ttgir = ttbuild.compile(bt_file, kernel="nan_padded", signature="*fp32:16,*fp32:16,i32,i32",
                            constexprs={"BM": 16, "BN": 16}, until="ttgir")["ttgir"].decode()
    assert re.search(r'"ttng.tensormap_create".*fill_mode = 1 : i32', ttgir)


def test_box_and_copies_follow_the_swizzle_span():
    assert tma.box((64, 128), 16, 128) == (64, 64) and tma.copies((64, 128), 16, 128) == 2
    assert tma.box((64, 128), 8, 128) == (64, 128) and tma.copies((64, 16), 16, 0) == 1
    assert tma.decode_attr(tma.encode_attr([None, {"swizzle": 32, "box": [8, 16]}])) == [None, {"swizzle": 32, "box": [8, 16]}]
    with pytest.raises(ValueError):
        tma.decode_attr("128:axb")


def test_triton_accepts_our_tma_ttgir(tmp_path, bt_file):
    """Triton 3.6 (oracle) parses, verifies and compiles to cubin the TTGIR of a pipelined TMA
    matmul (both operand orders), of a lone TMA load, of device-made descriptors, of TMA
    reductions and of a persistent kernel's deferred stores: our ops carry its operand segments
    and attributes."""
    paths = []
    for name, out in (("host", host()),
                      ("bt", ttbuild.compile(bt_file, kernel="mm_bt", signature="tensordesc<fp16[128, 64]>,"
                                             "tensordesc<fp16[128, 64]>,*fp16:16,i32,i32",
                                             constexprs={"BM": 128, "BN": 128, "BK": 64}, num_stages=3, until="ttgir")),
                      ("scale", ttbuild.compile(bt_file, kernel="scale", signature="tensordesc<fp16[64, 32]>,*fp16:16,i32",
                                                constexprs={"BM": 64, "BN": 32}, until="ttgir")),
                      ("device", device()),
                      ("reduce", reduction(until="ttgir")),
                      ("reduce_made", reduction("max", "*u32:16,*u32:16,i32,i32", kernel="tma_reduce_made_kernel",
                                                until="ttgir")),
                      ("persistent_subtile", persistent())):
        p = tmp_path / f"{name}.ttgir"
        p.write_bytes(out["ttgir"])
        paths.append(p)
    assert_triton_compiles(paths)


def test_a_tma_store_writes_the_tile_box_by_box_from_one_thread(tmp_path):
    """PTX of the host-descriptor matmul's store (C's 128 x 128 fp16 block, 128-byte swizzle: two
    64-column boxes): every thread's writes fenced for the async proxy, a CTA barrier, the
    leader's bulk tensor stores, one commit and a read wait before the tile may be reused."""
    from ptx_util import assert_ptxas_accepts

    ptx = host(until="ptx")["ptx"].decode()
    stores = re.findall(r"@%p\d+ cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group \[%rd\d+, \{(%r\d+), (%r\d+)\}\], \[(%r\d+)\];", ptx)
    assert len(stores) == 2 and stores[0][1] == stores[1][1] and stores[0][0] != stores[1][0]
    tail = ptx[ptx.rindex("fence.proxy.async.shared::cta"):]
    assert tail.index("bar.sync") < tail.index("bulk_group") < tail.index("cp.async.bulk.commit_group") \
        < tail.index("cp.async.bulk.wait_group.read 0")
    assert_ptxas_accepts(ptx, tmp_path)


def persistent(subtile: bool = True, until: str = "ttgir", num_stages: int = 4):
    """kernels/matmul_persistent.py's descriptor-persistent kernel (tutorial 09's form)."""
    return ttbuild.compile(Path(MATMUL).parent / "matmul_persistent.py", kernel="matmul_persistent_kernel",
                           signature="*fp16:16,*fp16:16,*fp16:16,i32,i32:16,i32:16",
                           constexprs={**DEVICE_CX, "EPILOGUE_SUBTILE": subtile, "NUM_SMS": 132},
                           num_stages=num_stages, until=until)


def test_a_subtiled_epilogue_stores_the_halves_of_one_tile():
    """Tutorial 09's EPILOGUE_SUBTILE (reshape, permute, split, two desc.store of the halves):
    the accumulator is written once, from its own layout, into a 128 x 128 tile whose 64-column
    swizzle blocks are the halves; each half is TMA-stored from its sub-tile (no reshape,
    permute, split or layout conversion left). In the persistent loop the tile is allocated
    before the loop and the write waits for the previous tile's stores (one wait in the loop,
    one after it)."""
    ttgir = persistent()["ttgir"].decode()
    epilogue = ttgir[ttgir.rindex('"ttng.warp_group_dot_wait"'):]
    assert not re.search(r'"(tt\.reshape|tt\.trans|tt\.split|ttg\.convert_layout)"', epilogue)
    assert '"ttg.local_alloc"(' not in epilogue
    write = re.findall(r'"ttg\.local_store"\(%\w+, (%\w+)\) : \(tensor<128x128xf16, #ttg\.nvidia_mma<', epilogue)
    assert len(write) == 1
    assert re.search(rf'{write[0]} = "ttg\.local_alloc"\(\) .*-> !ttg\.memdesc<128x128xf16, #ttg\.nvmma_shared<.*mutable>',
                     ttgir[:ttgir.index('"scf.for"')])
    assert re.findall(r"offsets = array<i32: 0, (\d+)>", epilogue) == ["0", "64"]
    assert epilogue.count('"ttng.async_tma_copy_local_to_global"') == 2 and epilogue.count('"ttng.async_tma_store_wait"') == 2


# A TMA store in a loop (each program copies every num_programs-th row block, doubled) and once after one.
LOOP_SRC = '''
import triton
import triton.language as tl


@triton.jit
def double_rows(in_desc, out_desc, T, BM: tl.constexpr, BN: tl.constexpr):
    for t in range(tl.program_id(0), T, tl.num_programs(0)):
        x = in_desc.load([t * BM, 0])
        out_desc.store([t * BM, 0], x * 2)


@triton.jit
def double_once(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    x = in_desc.load([tl.program_id(0) * BM, 0])
    out_desc.store([tl.program_id(0) * BM, 0], x * 2)
'''
LOOP_SIG = "tensordesc<fp16[64, 64]>,tensordesc<fp16[64, 64]>"


@pytest.fixture(scope="module")
def loop_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("tma_loop") / "loops.py"
    p.write_text(LOOP_SRC)
    return p


def _store_ops(ttgir: str) -> list:
    return re.findall(r'"(scf\.for|scf\.yield|ttg\.local_alloc|ttg\.local_store|ttg\.local_dealloc|ttng\.fence_async_shared|'
                      r'ttng\.async_tma_copy_local_to_global|ttng\.async_tma_store_wait)"', ttgir)


def test_a_store_in_a_pipelined_loop_waits_at_its_next_write(loop_file):
    """Triton's pipelineTMAStores: in a loop of more than one stage (the kernel's num_stages, 3
    by default) the store tile is allocated before the loop, each iteration waits for the
    previous store to have read it, writes it (ttg.local_store), fences it and stores it; one
    wait after the loop. At num_stages=1, and outside a loop, the store is waited for at once."""
    ttgir = ttbuild.compile(loop_file, kernel="double_rows", signature=LOOP_SIG + ",i32",
                            constexprs={"BM": 64, "BN": 64}, until="ttgir")["ttgir"].decode()
    ops = _store_ops(ttgir)
    loop = ops.index("scf.for")
    assert "ttg.local_alloc" in ops[:loop]
    body = ops[loop + 1:ops.index("scf.yield")]  # the load's buffer and barrier, then the store
    assert body[-4:] == ["ttng.async_tma_store_wait", "ttg.local_store", "ttng.fence_async_shared",
                         "ttng.async_tma_copy_local_to_global"]
    assert ops[ops.index("scf.yield") + 1:][:2] == ["ttng.async_tma_store_wait", "ttg.local_dealloc"]
    for kernel, sig, stages in (("double_rows", LOOP_SIG + ",i32", 1), ("double_once", LOOP_SIG, 3)):
        ttgir = ttbuild.compile(loop_file, kernel=kernel, signature=sig, constexprs={"BM": 64, "BN": 64},
                                num_stages=stages, until="ttgir")["ttgir"].decode()
        assert '"ttg.local_store"' not in ttgir
        ops = _store_ops(ttgir)
        i = ops.index("ttng.async_tma_copy_local_to_global")
        assert ops[i + 1] == "ttng.async_tma_store_wait", (kernel, stages)


def test_a_deferred_store_waits_and_writes_behind_barriers(tmp_path, loop_file):
    """The PTX of the loop's store, in order: the read wait of the previous iteration's bulk
    group and a CTA barrier (no thread writes the tile before the TMA unit has read it), the
    tile's shared stores, every thread's async-proxy fence, a barrier, the leader's bulk tensor
    store and its commit; after the loop the last read wait. ptxas accepts it."""
    from ptx_util import assert_ptxas_accepts

    ptx = ttbuild.compile(loop_file, kernel="double_rows", signature=LOOP_SIG + ",i32",
                          constexprs={"BM": 64, "BN": 64}, until="ptx")["ptx"].decode()
    waits = [m.start() for m in re.finditer(r"cp\.async\.bulk\.wait_group\.read 0;", ptx)]
    assert len(waits) == 2
    loop = ptx[waits[0]:waits[1]]
    marks = [loop.index(s) for s in ("bar.sync", "st.shared", "fence.proxy.async.shared::cta")]
    assert marks == sorted(marks)
    tail = loop[marks[2]:]
    assert tail.index("bar.sync") < tail.index("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") \
        < tail.index("cp.async.bulk.commit_group")
    assert_ptxas_accepts(ptx, tmp_path)


def reduction(op="add", sig="tensordesc<fp32[32, 64]>,*fp32:16", kernel="tma_reduce_kernel", until="ptx", **opts):
    """tests/data/gpu_kernels/misc.py's descriptor reduction of a BM x BN = 32 x 64 block."""
    return ttbuild.compile(MISC, kernel=kernel, signature=sig, constexprs={"BM": 32, "BN": 64, "OP": op},
                           until=until, **opts)


def test_a_descriptor_reduction_is_a_tma_reduce_of_a_shared_tile(tmp_path):
    """`desc.atomic_add` of a TMA descriptor: `tt.descriptor_reduce` (kind add) in TTIR; in TTGIR
    the value written to a shared tile, the async-proxy fence, `ttng.async_tma_reduce` and the
    store wait (Triton's form); in PTX one `cp.reduce.async.bulk.tensor` per box (fp32 rows of
    256 bytes: two 32-column boxes of the 128-byte swizzle), one commit, the read wait."""
    from ptx_util import assert_ptxas_accepts

    out = reduction()
    ttir = out["ttir"].decode()
    assert re.search(r'"tt\.descriptor_reduce"\(%arg0, %\d+, %\d+, %\d+\) <\{kind = 1 : i32\}>', ttir)
    assert '"tt.atomic_rmw"' not in ttir
    ttgir = out["ttgir"].decode()
    order = [ttgir.index(s) for s in ('"ttg.local_alloc"(%', '"ttng.fence_async_shared"', '"ttng.async_tma_reduce"',
                                      '"ttng.async_tma_store_wait"')]
    assert order == sorted(order) and "{kind = 1 : i32}" in ttgir[order[2]:order[3]]
    ptx = out["ptx"].decode()
    boxes = re.findall(r"@%p\d+ cp\.reduce\.async\.bulk\.tensor\.2d\.global\.shared::cta\.add\.bulk_group "
                       r"\[%rd\d+, \{(%r\d+), (%r\d+)\}\], \[(%r\d+)\];", ptx)
    assert len(boxes) == 2 and boxes[0][1] == boxes[1][1] and boxes[0][0] != boxes[1][0] and boxes[0][2] != boxes[1][2]
    tail = ptx[ptx.rindex("fence.proxy.async.shared::cta"):]
    assert tail.index("bar.sync") < tail.index("cp.reduce") < tail.index("cp.async.bulk.commit_group") \
        < tail.index("cp.async.bulk.wait_group.read 0")
    assert_ptxas_accepts(ptx, tmp_path)


@pytest.mark.parametrize("op, kind", [("min", 2), ("max", 3), ("and", 6), ("or", 7), ("xor", 8)])
def test_every_reduction_kind_reaches_its_ptx_op(op, kind):
    out = reduction(op, "tensordesc<i32[32, 64]>,*i32:16")
    assert f"<{{kind = {kind} : i32}}>" in out["ttir"].decode()
    ptx = out["ptx"].decode()
    assert ptx.count(f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.bulk_group") == 2
    assert not re.search(r"\s(atom|red)\.", ptx)


@pytest.mark.parametrize("opts", [{"target": "cuda:80"}, {"target": "cuda:90", "disable_tma": True}])
def test_without_tma_a_descriptor_reduction_is_relaxed_atomics(opts):
    ttir = reduction(until="ttir", **opts)["ttir"].decode()
    assert "descriptor_reduce" not in ttir
    assert ttir.count('"tt.atomic_rmw"') == 1 and "sem = 1 : i32" in ttir


def test_a_map_made_in_the_kernel_takes_the_descriptors_signedness():
    """Integer descriptor types carry signedness as Triton's (`si32` / `ui32`), and the map the
    program writes takes it as its element type (.s32 = 3, .u32 = 2, .u64 = 4: PTX tensormap.replace
    numbering), which is what a TMA min / max compares by."""
    for sig, name, elem in (("*i32:16,*i32:16,i32,i32", "si32", 3), ("*u32:16,*u32:16,i32,i32", "ui32", 2),
                            ("*u64:16,*u64:16,i32,i32", "ui64", 4)):
        out = reduction("max", sig, kernel="tma_reduce_made_kernel", until="ptx")
        assert f"!tt.tensordesc<tensor<32x64x{name}>>" in out["ttir"].decode()
        assert f"elem_type = {elem} : i32" in out["ttgir"].decode()
        assert re.search(rf"tensormap\.replace\.tile\.elemtype\.shared::cta\.b1024\.b32 \[%rd\d+\], {elem};",
                         out["ptx"].decode())


def test_16_bit_float_min_max_needs_tma():
    """Triton 3.6: fp16 / bf16 descriptor min / max only where the target has TMA."""
    sig = "tensordesc<fp16[32, 64]>,*fp16:16"
    assert "shared::cta.max.bulk_group" in reduction("max", sig)["ptx"].decode()
    from ttbuild.errors import CompilationError

    with pytest.raises(CompilationError, match="16-bit float types require native tma support"):
        reduction("max", sig, until="ttir", target="cuda:80")


def test_int64_bitwise_reductions_keep_the_pointer_form():
    """and / or / xor through an INT64 tensor map raise an illegal instruction on the H200
    (measured), so an int64 descriptor's bitwise reductions are relaxed atomics; uint64 ones and
    int64 min / max go through TMA."""
    ttir = reduction("xor", "tensordesc<i64[32, 64]>,*i64:16", until="ttir")["ttir"].decode()
    assert "descriptor_reduce" not in ttir and ttir.count('"tt.atomic_rmw"') == 1
    for op, sig in (("xor", "tensordesc<u64[32, 64]>,*u64:16"), ("max", "tensordesc<i64[32, 64]>,*i64:16")):
        assert '"tt.descriptor_reduce"' in reduction(op, sig, until="ttir")["ttir"].decode()
