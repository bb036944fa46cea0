"""Scratch shared-memory access for LLIR rules that exchange elements between threads: word stores and loads at byte offsets, row-major linear indices."""

from __future__ import annotations

from math import prod

from llvmlite import ir

from ttbuild.backend.llir.context import I8, I32


def smem_store(ctx, offset_bytes, v):
    b = ctx.builder
    if isinstance(v.type, ir.IntType) and v.type.width < 8:
        v = b.zext(v, I8)
    b.store(v, b.bitcast(ctx.smem(offset_bytes), ir.PointerType(v.type, addrspace=3)))


def smem_load(ctx, offset_bytes, t):
    b = ctx.builder
    mt = I8 if isinstance(t, ir.IntType) and t.width < 8 else t
    v = b.load(b.bitcast(ctx.smem(offset_bytes), ir.PointerType(mt, addrspace=3)))
    return b.trunc(v, t) if mt != t else v


def linear(b, idx, shape):
    """Row-major linear index (i32) of an index tuple."""
    acc = None
    for d, v in enumerate(idx):
        stride = prod(shape[d + 1:])
        term = b.mul(v, ir.Constant(I32, stride)) if stride != 1 else v
        acc = term if acc is None else b.add(acc, term)
    return acc if acc is not None else ir.Constant(I32, 0)
