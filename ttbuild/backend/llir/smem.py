"""Shared-memory access for LLIR rules: scratch word stores and loads at byte offsets, row-major linear indices, and `MemDesc`, the lowered form of a `!ttg.memdesc` view."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from llvmlite import ir

from ttbuild.backend.ir.types import MemDescType
from ttbuild.backend.llir.context import I8, I32
from ttbuild.errors import CompilationError


def smem_store(ctx, offset_bytes, v):
    """Store scalar v at byte `offset_bytes` of the shared scratch (i1 as i8, a pointer as its i64 address)."""
    b = ctx.builder
    if isinstance(v.type, ir.IntType) and v.type.width < 8:
        v = b.zext(v, I8)
    elif isinstance(v.type, ir.PointerType):  # a pointer tensor's element crosses as its address
        v = b.ptrtoint(v, ir.IntType(64))
    b.store(v, b.bitcast(ctx.smem(offset_bytes), ir.PointerType(v.type, addrspace=3)))


def smem_load(ctx, offset_bytes, t):
    b = ctx.builder
    if isinstance(t, ir.PointerType):
        return b.inttoptr(smem_load(ctx, offset_bytes, ir.IntType(64)), t)
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


@dataclass(frozen=True)
class MemDesc:
    """A shared-memory view: `ptr` (i8 addrspace(3)*) to element 0, its shape, element type and
    the order of its last len(order) dimensions (fastest first)."""
    ptr: ir.Value
    shape: tuple[int, ...]
    elem: str
    order: tuple[int, ...]


def parse_memdesc(t) -> tuple[tuple[int, ...], str, tuple[int, ...]]:
    """`!ttg.memdesc<2x256xf32, #ttg.swizzled_shared<{..., order = [0]}>, ...>` ->
    ((2, 256), 'f32', (0,)). Raises CompilationError for other spellings."""
    try:
        md = MemDescType.parse(t)
        return md.shape, md.elem, md.order  # nvmma: `transposed` puts dimension 0 fastest
    except ValueError:
        raise CompilationError(f"unsupported shared-memory descriptor {t}", stage="llir") from None
