"""tl.rand/randn/randint/randint4x: Philox 4x32-10 as Triton computes it, checked by running our TTIR against an independent numpy Philox (itself pinned to Random123's known-answer vectors) and by Triton accepting the TTIR."""

from __future__ import annotations

import numpy as np
import pytest
import ttir_eval  # noqa: E402  (tests/frontend is on sys.path: rootdir-relative test modules)
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_triton_compiles

from ttbuild.errors import CompilationError
from ttbuild.stages import parse, ttir

M0, M1 = 0xD2511F53, 0xCD9E8D57  # Random123 philox4x32 multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments
MASK = 0xFFFFFFFF


def philox4x32(ctr, key, rounds=10):
    """Reference Philox4x32 (Salmon et al., SC'11; Random123's philox4x32_R) on Python ints."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for i in range(rounds):
        if i:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK
    return c0, c1, c2, c3


def test_reference_matches_random123_known_answers():
    assert philox4x32((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert philox4x32((MASK,) * 4, (MASK, MASK)) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)
    assert philox4x32((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == \
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)


def reference(seed: int, offsets: np.ndarray, rounds=10):
    """Triton's mapping onto Philox: seed → key (lo, hi) after widening to 64 bits by its sign;
    offset → counter (lo, hi, 0, 0), the high word an arithmetic shift."""
    s = seed & (2**64 - 1)
    key = (s & MASK, (s >> 32) & MASK)
    return np.array([philox4x32((int(o) & MASK, (int(o) >> 32) & MASK, 0, 0), key, rounds) for o in offsets],
                    dtype=np.uint64).astype(np.uint32).T


def uniform(u32: np.ndarray) -> np.ndarray:
    x = u32.view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


KERNEL = """import triton
import triton.language as tl


@triton.jit
def k(out0, out1, out2, out3, seed, OFF: tl.constexpr, N: tl.constexpr, OP: tl.constexpr, ROUNDS: tl.constexpr):
    offs = OFF + tl.arange(0, N)
    if OP == "randint4x":
        a, b, c, d = tl.randint4x(seed, offs, ROUNDS)
        tl.store(out0 + tl.arange(0, N), a)
        tl.store(out1 + tl.arange(0, N), b)
        tl.store(out2 + tl.arange(0, N), c)
        tl.store(out3 + tl.arange(0, N), d)
    elif OP == "randint":
        tl.store(out0 + tl.arange(0, N), tl.randint(seed, offs, n_rounds=ROUNDS))
    elif OP == "rand":
        tl.store(out0 + tl.arange(0, N), tl.rand(seed, offs, ROUNDS))
    elif OP == "randn":
        tl.store(out0 + tl.arange(0, N), tl.randn(seed, offs, ROUNDS))
    elif OP == "rand4x":
        a, b, c, d = tl.rand4x(seed, offs, ROUNDS)
        tl.store(out0 + tl.arange(0, N), a)
        tl.store(out3 + tl.arange(0, N), d)
    else:
        a, b, c, d = tl.randn4x(seed, offs, ROUNDS)
        tl.store(out0 + tl.arange(0, N), a)
        tl.store(out1 + tl.arange(0, N), b)
"""


def build(op, seed_type="i32", off=0, n=16, rounds=10, out="u32"):
    p = parse.run({"source": KERNEL.encode()}, {"kernel": "k", "file": "k.py"})
    sig = [f"*{out}"] * 4 + [seed_type]
    return ttir.run({"json": p["json"]}, {"signature": sig, "constexprs": {"OFF": off, "N": n, "OP": op,
                                                                          "ROUNDS": rounds}})["ttir"].decode()


def evaluate(text, seed, n, dtype=np.uint32):
    bufs = {f"o{i}": np.zeros(n, dtype) for i in range(4)}
    ttir_eval.run(text, ["o0", "o1", "o2", "o3", seed], bufs)
    return [bufs[f"o{i}"] for i in range(4)]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(-2**31, 2**31 - 1), off=st.integers(0, 2**31 - 64), rounds=st.sampled_from([10, 7]))
def test_randint4x_bits_equal_the_reference(seed, off, rounds):
    got = evaluate(build("randint4x", off=off, rounds=rounds), seed, 16)
    want = reference(seed, np.arange(off, off + 16), rounds)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_randint_is_the_first_stream_and_64_bit_seeds_split():
    seed = -(2**40) - 12345  # negative: sign-extended into the high key word
    got = evaluate(build("randint", seed_type="i64"), seed, 16)[0]
    np.testing.assert_array_equal(got, reference(seed, np.arange(16))[0])


def test_rand_is_uniform_float_of_the_same_bits():
    seed = 1234
    got = evaluate(build("rand", out="fp32", n=64), seed, 64, np.float32)[0]
    want = uniform(reference(seed, np.arange(64))[0])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert got.min() >= 0.0 and got.max() < 1.0


def test_rand4x_each_stream():
    got = evaluate(build("rand4x", out="fp32"), 99, 16, np.float32)
    ref = reference(99, np.arange(16))
    np.testing.assert_array_equal(got[0], uniform(ref[0]))
    np.testing.assert_array_equal(got[3], uniform(ref[3]))


def test_randn_is_box_muller_of_the_first_two_streams():
    seed = 7
    got = evaluate(build("randn", out="fp32", n=64), seed, 64, np.float32)[0]
    ref = reference(seed, np.arange(64))
    u1, u2 = np.maximum(np.float32(1e-7), uniform(ref[0])), uniform(ref[1])
    want = np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(6.283185307179586) * u2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    two = evaluate(build("randn4x", out="fp32", n=64), seed, 64, np.float32)
    np.testing.assert_array_equal(two[0], got)
    np.testing.assert_allclose(two[1], np.sqrt(-2.0 * np.log(u1)) * np.sin(np.float32(6.283185307179586) * u2),
                               rtol=1e-5, atol=1e-6)


def test_randint_returns_uint32_like_triton():
    src = KERNEL.replace('tl.store(out0 + tl.arange(0, N), tl.randint(seed, offs, n_rounds=ROUNDS))',
                         'tl.static_assert(tl.randint(seed, offs).dtype == tl.uint32)')
    p = parse.run({"source": src.encode()}, {"kernel": "k", "file": "k.py"})
    ttir.run({"json": p["json"]}, {"signature": ["*u32"] * 4 + ["i32"],
                                   "constexprs": {"OFF": 0, "N": 16, "OP": "randint", "ROUNDS": 10}})


def test_float_seed_is_rejected_with_a_location():
    with pytest.raises(CompilationError, match="Philox seed must be an integer") as e:
        build("rand", seed_type="fp32", out="fp32")
    assert e.value.node_id is not None


def test_triton_accepts_random_ttir(tmp_path):
    paths = []
    for op, out in (("randint4x", "u32"), ("rand", "fp32"), ("randn", "fp32"), ("randn4x", "fp32")):
        p = tmp_path / f"{op}.ttir"
        p.write_text(build(op, seed_type="i64" if op == "rand" else "i32", out=out, n=128))
        paths.append(str(p))
    assert_triton_compiles(paths)
