"""Tensor-core operand staging math: the shared encodings Triton gives a dot operand's tile (NVMMASharedEncodingAttr::get for wgmma and TMA, SwizzledSharedEncodingAttr::get for mma.sync).

Source: Triton lib/Dialect/TritonGPU/IR/Dialect.cpp; the encodings are ttbuild.backend.ir.shared.
"""

from __future__ import annotations

from ttbuild.backend.ir.shared import NvmmaShared, SwizzledShared


def nvmma_for_operand(shape, order, elem_bits: int) -> NvmmaShared | None:
    """Triton's NVMMASharedEncodingAttr::get for a rank-2 tile stored with `order` (fastest
    first): the widest of 128/64/32-byte swizzles that the contiguous extent is a multiple of;
    None when that extent is under 32 bytes (no wgmma descriptor fits)."""
    inner = shape[order[0]] * elem_bits // 8
    for w in (128, 64, 32):
        if inner % w == 0:
            return NvmmaShared(w, order[0] != len(shape) - 1, elem_bits)
    return None


def for_operand(op_idx: int, shape, order, elem_bits: int, k_width: int) -> SwizzledShared:
    """Triton's SwizzledSharedEncodingAttr::get for an MMAv2 dot operand (Ampere branch):
    perPhase = max(1, 128 / (inner extent * 4 / kWidth)); an 8 x 8 x (4 kWidth) matrix shape;
    vec = the operand's extent of that matrix along the contiguous dimension, maxPhase = its
    extent along the other one / perPhase. `order` is the tile's memory order (fastest first)."""
    rank = len(shape)
    inner = shape[order[0]]
    per_phase = max(1, 128 // max(1, inner * 4 // k_width))
    mat = (8, 8, 4 * k_width)
    k_fast = order[0] == (rank - 1 if op_idx == 0 else rank - 2)
    mn = mat[0] if op_idx == 0 else mat[1]
    k = mat[2]
    vec = k if k_fast else mn
    stride = mn if k_fast else k
    max_phase = max(stride // per_phase, 1)
    return SwizzledShared(vec, per_phase, max_phase, tuple(order))
