"""Tensor descriptors (tl.make_tensor_descriptor, desc.load / desc.store, tl.load_tensor_descriptor / tl.store_tensor_descriptor), lowered to pointer blocks as Triton rewrites them without TMA: run in the numpy TTIR evaluator against numpy on shapes that are not multiples of the block, negative and far offsets, both paddings; a descriptor used in a loop; diagnostics at the line, with Triton's messages."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import ttir_eval  # noqa: E402  (tests/frontend is on sys.path)

import ttbuild  # noqa: E402
from ttbuild.errors import CompilationError  # noqa: E402
from ttbuild.locs import locate  # noqa: E402
from ttbuild.stages import parse, ttir  # noqa: E402

BM, BN = 8, 16
KERNEL = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def desc_copy(out_ptr, pad_ptr, in_ptr, M, N, stride_m, om, on, BM: tl.constexpr, BN: tl.constexpr):
        src = tl.make_tensor_descriptor(in_ptr, shape=[M, N], strides=[stride_m, 1], block_shape=[BM, BN])
        nan = tl.make_tensor_descriptor(in_ptr, [M, N], [stride_m, 1], [BM, BN], padding_option="nan")
        dst = tl.make_tensor_descriptor(out_ptr, [M, N], [stride_m, 1], [BM, BN])
        pad = tl.make_tensor_descriptor(pad_ptr, [BM, 2 * BN], [2 * BN, 1], [BM, BN])
        x = src.load([om, on])
        dst.store([om, on], x * 2.0)
        pad.store([0, 0], x)
        y = tl.load_tensor_descriptor(nan, [om, on])
        tl.store_tensor_descriptor(pad, [0, BN], y)
    ''')


def _ttir(src: str, kernel: str, signature, constexprs) -> str:
    p = parse.run({"source": src.encode()}, {"kernel": kernel, "file": "k.py"})
    return ttir.run({"json": p["json"]}, {"signature": list(signature), "constexprs": constexprs})["ttir"].decode()


_TTIR = _ttir(KERNEL, "desc_copy", ["*fp32", "*fp32", "*fp32", "i32", "i32", "i32", "i32", "i32"], {"BM": BM, "BN": BN})


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 3 * BM), n=st.integers(1, 2 * BN), om=st.integers(-BM - 2, 3 * BM),
       on=st.integers(-BN - 2, 2 * BN), seed=st.integers(0, 2**32 - 1))
def test_descriptor_load_store_match_numpy(m, n, om, on, seed):
    """The tile at (om, on): in-bounds elements copied (x2), nothing outside (M, N) written, and
    the out-of-bounds elements of the loaded tile 0 (zero padding) or NaN ("nan"), as a TMA
    load fills them; negative offsets are out of bounds too."""
    a = np.random.default_rng(seed).standard_normal((m, n)).astype(np.float32)
    bufs = {"in": a.reshape(-1).copy(), "out": np.full(m * n, -7.0, np.float32),
            "pad": np.full(BM * 2 * BN, -7.0, np.float32)}
    ttir_eval.run(_TTIR, ["out", "pad", "in", m, n, n, om, on], bufs)
    rows, cols = np.arange(om, om + BM)[:, None], np.arange(on, on + BN)[None, :]
    inside = (rows >= 0) & (rows < m) & (cols >= 0) & (cols < n)
    want = np.where(inside, a[np.clip(rows, 0, m - 1), np.clip(cols, 0, n - 1)], 0.0).astype(np.float32)
    pad = bufs["pad"].reshape(BM, 2 * BN)
    np.testing.assert_array_equal(pad[:, :BN], want)
    assert np.isnan(pad[:, BN:][~inside]).all()
    np.testing.assert_array_equal(pad[:, BN:][inside], want[inside])
    out = np.full((m, n), -7.0, np.float32)
    r, c = np.nonzero(inside)
    out[rows[r, 0], cols[0, c]] = a[rows[r, 0], cols[0, c]] * 2.0
    np.testing.assert_array_equal(bufs["out"].reshape(m, n), out)


GATHER = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def desc_gather(out_ptr, dst_ptr, in_ptr, idx_ptr, M, N, y, R: tl.constexpr, W: tl.constexpr):
        src = tl.make_tensor_descriptor(in_ptr, [M, N], [N, 1], [1, W])
        dst = tl.make_tensor_descriptor(dst_ptr, [M, N], [N, 1], [1, W])
        rows = tl.load(idx_ptr + tl.arange(0, R))
        x = src.gather(rows, y)
        tl.store(out_ptr + tl.arange(0, R)[:, None] * W + tl.arange(0, W)[None, :], x)
        dst.scatter(x + 1.0, rows, y)
    ''')
R, W = 8, 8
_GATHER = _ttir(GATHER, "desc_gather", ["*fp32", "*fp32", "*fp32", "*i32", "i32", "i32", "i32"], {"R": R, "W": W})


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 12), n=st.integers(1, 2 * W), y=st.integers(-W - 2, 2 * W),
       rows=st.lists(st.integers(-3, 14), min_size=R, max_size=R, unique=True), seed=st.integers(0, 2**32 - 1))
def test_gather_and_scatter_match_numpy(m, n, y, rows, seed):
    """desc.gather(rows, y): rows `rows` (any order, out of range included) at columns y..y+W,
    out-of-bounds elements 0; desc.scatter writes exactly the in-bounds ones (a TMA gather4 /
    scatter4, as Triton rewrites them to pointers without TMA)."""
    a = np.random.default_rng(seed).standard_normal((m, n)).astype(np.float32)
    bufs = {"in": a.reshape(-1).copy(), "out": np.full(R * W, -7.0, np.float32),
            "dst": np.full(m * n, -7.0, np.float32), "idx": np.array(rows, np.int32)}
    ttir_eval.run(_GATHER, ["out", "dst", "in", "idx", m, n, y], bufs)
    r, c = np.array(rows)[:, None], np.arange(y, y + W)[None, :]
    inside = (r >= 0) & (r < m) & (c >= 0) & (c < n)
    want = np.where(inside, a[np.clip(r, 0, m - 1), np.clip(c, 0, n - 1)], 0.0).astype(np.float32)
    np.testing.assert_array_equal(bufs["out"].reshape(R, W), want)
    dst = np.full((m, n), -7.0, np.float32)
    i, j = np.nonzero(inside)
    dst[r[i, 0], c[0, j]] = want[i, j] + 1.0
    np.testing.assert_array_equal(bufs["dst"].reshape(m, n), dst)


def test_gather_and_scatter_build_through_ptx():
    out = ttbuild.compile(GATHER, kernel="desc_gather", signature="*fp32:16,*fp32:16,*fp32:16,*i32:16,i32,i32:16,i32",
                          constexprs={"R": R, "W": W}, until="ptx")
    ptx = out["ptx"].decode()
    assert "ld.global" in ptx and "st.global" in ptx
    assert "tt.descriptor_gather" not in out["ttir"].decode()  # rewritten to pointers, as without TMA


LOOP = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def row_sums(out_ptr, in_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
        desc = tl.make_tensor_descriptor(in_ptr, [M, N], [N, 1], [BM, BN])
        acc = tl.zeros((BM,), tl.float32)
        for k in range(0, tl.cdiv(N, BN)):
            acc += tl.sum(desc.load([0, k * BN]), axis=1)
        tl.store(out_ptr + tl.arange(0, BM), acc, mask=tl.arange(0, BM) < M)
    ''')


def test_a_descriptor_made_before_a_loop_loads_in_it(tmp_path):
    """Made once, loaded in every iteration (the evaluator runs no loops: the GPU test runs this
    kernel); it builds through PTX, its masked load inside the scf.for."""
    import ttbuild

    f = tmp_path / "row_sums.py"
    f.write_text(LOOP)
    out = ttbuild.compile(f, kernel="row_sums", signature="*fp32:16,*fp32:16,i32,i32:16",
                          constexprs={"BM": BM, "BN": BN}, until="ptx", target="cuda:80")
    text = out["ttir"].decode()
    loop = text[text.index('"scf.for"'):]
    assert '"tt.load"' in loop and "tt.make_tensor_descriptor" not in text
    assert "ld.global" in out["ptx"].decode()
    # on sm_90 the program writes the tensormap once and each iteration loads through TMA
    out = ttbuild.compile(f, kernel="row_sums", signature="*fp32:16,*fp32:16,i32,i32:16",
                          constexprs={"BM": BM, "BN": BN}, until="ptx", target="cuda:90")
    text = out["ttir"].decode()
    assert text.index("tt.make_tensor_descriptor") < text.index('"scf.for"') < text.index("tt.descriptor_load")
    ptx = out["ptx"].decode()
    assert "tensormap.cp_fenceproxy" in ptx and "cp.async.bulk.tensor.2d" in ptx


def _error(body: str) -> tuple[CompilationError, list[str]]:
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p, n, B: tl.constexpr):\n"
           + textwrap.indent(textwrap.dedent(body), "    "))
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "lib/k.py"})
    with pytest.raises(CompilationError) as ei:
        ttir.run({"json": out["json"]}, {"signature": ["*fp32", "i32"], "constexprs": {"B": 16}})
    return locate(ei.value, out["loc"]), src.splitlines()


MK = "d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [B, B])\n"


@pytest.mark.parametrize("body, line, message", [
    ("d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [B, 2])\n", "d = tl.make_tensor_descriptor",
     "Descriptor block shape must have at least 16 bytes in the last dimension, but got 2 * 4 = 8 bytes"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [1, n], [B, B])\n", "d = tl.make_tensor_descriptor",
     "Tensor descriptor last dim must be 1"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [n], [B, B])\n", "d = tl.make_tensor_descriptor",
     "Expected 2 strides but got 1"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [B, 12])\n", "d = tl.make_tensor_descriptor", "powers of two"),
    (MK + "x = d.load([0])\n", "x = d.load", "1 offsets for a descriptor of rank 2"),
    (MK + "d.store([0, 0], tl.zeros((B, 8), tl.float32))\n", "d.store",
     "value shape [16, 8] does not match the descriptor's block shape [16, 16]"),
    (MK + "d.atomic_min([0, 0], tl.zeros((B, B), tl.float32))\n", "d.atomic_min",
     "desc.atomic_min: unsupported dtype fp32 (Triton allows uint32, int32, uint64, int64, fp16, bf16)"),
    (MK + "d.atomic_and([0, 0], tl.zeros((B, B), tl.float32))\n", "d.atomic_and", "unsupported dtype fp32"),
    (MK + "d.atomic_add([0, 0], tl.zeros((B, 8), tl.float32))\n", "d.atomic_add",
     "desc.atomic_add: value shape [16, 8] does not match the descriptor's block shape [16, 16]"),
    (MK + "x = d.gather(tl.arange(0, 8), 0)\n", "x = d.gather", "descriptor block must have 1 row, but got [16, 16]"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [1, B])\nx = d.gather(tl.arange(0, 4), 0)\n", "x = d.gather",
     "descriptor gather must have at least 8 rows, but got [4]"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [1, 4])\nx = d.gather(tl.arange(0, 8), 0)\n", "x = d.gather",
     "descriptor gather of fp32 must have at least 8 columns, but got 4"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [1, B])\nd.scatter(tl.zeros((8, 8), tl.float32), "
     "tl.arange(0, 8), 0)\n", "d.scatter", "value shape [8, 8] does not match the gathered shape [8, 16]"),
    ("d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [1, B])\nx = d.gather(p, 0)\n", "x = d.gather",
     "desc.gather: x offsets must be a 1-D integer tensor"),
    (MK + "x = d.shapes\n", "x = d.shapes", "a tensor descriptor has no attribute 'shapes'"),
    ("x = tl.load_tensor_descriptor(p, [0])\n", "x = tl.load_tensor_descriptor", "needs a tensor descriptor"),
    ("x = p.load([0, n])\n", "x = p.load", ".load([...]) is a tensor descriptor's call, and this is a value of "
                                           "type pointer<fp32>, not a tensor descriptor"),
])
def test_misuse_is_located_with_tritons_message(body, line, message):
    err, lines = _error(body)
    assert message in err.message, err.message
    assert lines[err.loc.line - 1].strip().startswith(line)


def test_block_shape_and_dtype_are_constexprs():
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p, n, B: tl.constexpr):\n"
           "    d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [B, 2 * B])\n"
           "    tl.static_assert(d.block_shape[1] == 32)\n"
           "    x = d.load([0, 0]).to(d.dtype)\n"
           "    d.atomic_add([0, 0], x)\n")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    text = ttir.run({"json": out["json"]}, {"signature": ["*fp32", "i32"], "constexprs": {"B": 16}})["ttir"].decode()
    assert '"tt.atomic_rmw"' in text and "sem = 1 : i32" in text  # relaxed, as a TMA reduction


PARAMS = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def scale_desc(in_desc, out_desc, scale):
        BM: tl.constexpr = in_desc.block_shape[0]
        BN: tl.constexpr = in_desc.block_shape[1]
        pm = tl.program_id(0) * BM
        pn = tl.program_id(1) * BN
        out_desc.store([pm, pn], in_desc.load([pm, pn]) * scale)
    ''')


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 2 * BM), n=st.integers(1, 2 * BN), pad=st.integers(0, 2), seed=st.integers(0, 2**32 - 1))
def test_descriptor_parameters_are_base_shape_and_strides(m, n, pad, seed):
    """A `tensordesc<fp32[8, 16]>` parameter is (base, shape as i32, row stride as i64), the
    stride marked a 16-byte multiple; the program tiles of an (m, n) array with padded rows are
    scaled in place of a copy and nothing outside (m, n) is written."""
    text = _ttir(PARAMS, "scale_desc", ["tensordesc<fp32[8, 16]>", "tensordesc<fp32[8, 16]>", "fp32"], {})
    head = text.splitlines()[1]
    assert "(!tt.ptr<f32>, i32, i32, i64, !tt.ptr<f32>, i32, i32, i64, f32)" in head
    assert head.count("tt.divisibility = 4 : i32") == 2  # 16 bytes of fp32 strides
    stride = -(-n // 4) * 4 + 4 * pad
    a = np.random.default_rng(seed).standard_normal((m, stride)).astype(np.float32)
    bufs = {"in": a.reshape(-1).copy(), "out": np.full(m * stride, -7.0, np.float32)}
    for pm in range(-(-m // BM)):
        for pn in range(-(-n // BN)):
            ttir_eval.run(text, ["in", m, n, stride, "out", m, n, stride, 3.0], bufs, program_id=(pm, pn))
    out = bufs["out"].reshape(m, stride)
    np.testing.assert_array_equal(out[:, :n], a[:, :n] * 3.0)
    assert (out[:, n:] == -7.0).all()


def test_a_descriptor_kernel_builds_and_the_runtime_expands_its_arguments(tmp_path, monkeypatch):
    """Through the CLI to cubin; the metadata lists the expanded parameters and the descriptors;
    the runtime expands Triton's host TensorDescriptor, its own and a plain tensor into them, picks
    the `:16` variant only when every extent is a multiple of 16, and refuses a descriptor the
    kernel was not built for by name."""
    import json
    import subprocess
    from dataclasses import dataclass

    sys.path.insert(0, str(Path(__file__).parents[1] / "runtime"))
    from runtime_fakes import FakeTorch, RecordingDriver

    import ttbuild.runtime as rt

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "k.py").write_text(PARAMS)
    rows = "".join(
        f'[[variant]]\nname = "{name}"\nfile = "k.py"\nkernel = "scale_desc"\n'
        f'signature = "tensordesc<fp32[8, 16]>{div},tensordesc<fp32[8, 16]>{div},fp32"\n'
        "disable_tma = true\n\n"  # the pointer form (tests/runtime/test_runtime_tma.py: the TMA form)
        for name, div in (("scale16", ":16"), ("scale_any", "")))
    (proj / "variants.toml").write_text(rows)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "ttbuild", "build", str(proj), "-o", str(out), "--cache", "off"],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "lib" / "scale16.json").read_text())
    assert doc["descriptors"][0] == {"name": "in_desc", "dtype": "fp32", "block_shape": [8, 16]}
    assert [p["name"] for p in doc["params"]][:4] == ["in_desc", "in_desc.shape0", "in_desc.shape1", "in_desc.stride0"]

    torch = FakeTorch(monkeypatch)

    class Tensor(torch.Tensor):
        def __init__(self, ptr, shape, strides):
            super().__init__(ptr, "float32")
            self.shape, self._strides = shape, strides

        def stride(self):
            return self._strides

    @dataclass
    class TritonDescriptor:  # the fields of triton.tools.tensor_descriptor.TensorDescriptor
        base: object
        shape: list
        strides: list
        block_shape: list

    drv = RecordingDriver(raw=False)
    lib = rt.load(str(out), driver=drv)
    drv.params_of = {"scale_desc": 9}
    x, y = Tensor(0x1000, (32, 48), (48, 1)), Tensor(0x8000, (32, 48), (48, 1))
    kernel = lib.scale_desc
    assert kernel.select(TritonDescriptor(x, [32, 48], [48, 1], [8, 16]), y, 2.0).variant == "scale16"
    assert kernel.select(rt.TensorDescriptor.from_tensor(x, [8, 16]), y, 2.0).variant == "scale16"
    assert kernel.select(Tensor(0x1000, (30, 40), (48, 1)), y, 2.0).variant == "scale_any"
    kernel[(4, 3)](x, out_desc=y, scale=2.0)
    raw = drv.launches[-1]["raw"]
    assert [int.from_bytes(r[:4], "little") for r in raw[1:3]] == [32, 48]
    assert int.from_bytes(raw[3], "little") == 48
    with pytest.raises(rt.DescriptorError, match=r"in_desc: descriptor block shape \[16, 16\], the kernel was built for \[8, 16\]"):
        kernel[(1,)](TritonDescriptor(x, [32, 48], [48, 1], [16, 16]), y, 2.0)
    with pytest.raises(rt.DescriptorError, match="out_desc: strides must be multiples of 16 bytes"):
        kernel[(1,)](x, Tensor(0x8000, (32, 46), (46, 1)), 2.0)


def test_dot_T_is_the_2d_transpose_and_refused_on_other_ranks():
    """`b.T` (tutorial 09's `tl.dot(a, b.T, acc)`) is tl.trans of a 2-D block."""
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(p, n, B: tl.constexpr):\n"
           "    r = tl.arange(0, B)\n    x = tl.load(p + r[:, None] * B + r[None, :] * 2)\n"
           "    tl.store(p + r[:, None] * B + r[None, :], x.T)\n")
    out = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    text = ttir.run({"json": out["json"]}, {"signature": ["*fp32", "i32"], "constexprs": {"B": 16}})["ttir"].decode()
    assert '"tt.trans"' in text and "order = array<i32: 1, 0>" in text
    err, lines = _error("r = tl.arange(0, B)\nx = r.T\n")
    assert ".T transposes a 2-D block, got shape [16]" in err.message and lines[err.loc.line - 1].strip() == "x = r.T"


MAYBE_DESC = '''import triton
import triton.language as tl


@triton.jit
def _maybe_desc(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@triton.jit
def k(x, y, n, B: tl.constexpr):
    dx = _maybe_desc(x, shape=[n, B], strides=[B, 1], block_shape=[B, B])
    dy = _maybe_desc(y, shape=[n, B], strides=[B, 1], block_shape=[B, B])
    dy.store([0, 0], dx.load([0, 0]) + 1.0)
    tl.static_assert(isinstance(n, tl.tensor) and not isinstance(B, tl.tensor))
    tl.static_assert(isinstance(B, (tl.constexpr, tl.tensor_descriptor)) and not isinstance(x, tl.constexpr))
'''


@pytest.mark.parametrize("signature", ["tensordesc<fp32[16, 16]>,*fp32:16,i32", "*fp32:16,*fp32:16,i32"])
def test_isinstance_tensor_descriptor_picks_the_branch_at_compile_time(tmp_path, signature):
    """Tutorial 06's `_maybe_make_tensor_desc`: isinstance(x, tl.tensor_descriptor) is a constexpr
    (Triton runs isinstance on its frontend objects), so a descriptor parameter is used as given and
    a pointer gets a descriptor made in the kernel (the other branch would refuse either: a
    descriptor is no pointer base); tl.tensor and tl.constexpr answer alike (static_assert)."""
    f = tmp_path / "k.py"
    f.write_text(MAYBE_DESC)
    out = ttbuild.compile(f, kernel="k", signature=signature, constexprs={"B": 16}, until="ttir")
    text = out["ttir"].decode()
    # both load and store through TMA (ttbuild.tma: the default target has it), each made one
    # made once
    made = 1 if signature.startswith("tensordesc") else 2
    assert text.count('"tt.descriptor_load"') == 1 and text.count('"tt.descriptor_store"') == 1
    assert text.count('"tt.make_tensor_descriptor"') == made


def test_isinstance_of_another_class_is_refused():
    err, _ = _error("b = isinstance(n, int)\n")
    assert err.message.startswith("isinstance() in a kernel takes tl.tensor, tl.tensor_descriptor or tl.constexpr")
