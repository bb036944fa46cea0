"""TMA facts shared by the frontend, the ttgir and llir stages, the metadata writer and the runtime; stdlib only.

Which descriptor parameters load through TMA, the copy box, the record of the choice in TTGIR.

A descriptor made in the kernel (`tl.make_tensor_descriptor` at the kernel's top level) gets its
CUtensorMap written by the program itself into a per-program global scratch slot (Triton's
`ttng.tensormap_create`, lowered by the ttgir stage). A `tensordesc<...>` kernel parameter compiled for a TMA target (sm_90 and newer: Triton's
`supports_tma`, third_party/nvidia/backend/compiler.py) is passed as the address of a
`CUtensorMap` in global memory (`<name>.tensormap`, a u64) in front of its pointer-form
parameters (base, shape, strides but the last: ttbuild.frontend.abi.runtime_params), so the
kernel loads tiles with `cp.async.bulk.tensor` while stores, gathers and atomics keep the pointer
form. The runtime encodes the map with `cuTensorMapEncodeTiled` (CUDA driver API, "Tensor Map
Object Management") from the box and swizzle the TTGIR stage recorded.
"""

from __future__ import annotations

# The TTGIR module attribute that records, per tensordesc parameter in order, None (pointer form)
# or {"swizzle": bytes, "box": [rows, cols]} (encode_attr's text): what the runtime encodes the
# CUtensorMap with.
MODULE_ATTR = "ttb.tma"

# cuTensorMapEncodeTiled's limits: boxDim[i] <= 256 elements (CUDA driver API).
MAX_BOX = 256


def eligible(block_shape, elem_bits: int) -> bool:
    """Whether a descriptor parameter of this block loads through TMA: rank 2 (ttbuild lowers
    2-D copies), each block dimension at most 256 elements (one box, or one box per swizzle
    span along the contiguous dimension), elements of 8 to 64 bits."""
    return len(block_shape) == 2 and all(0 < d <= MAX_BOX for d in block_shape) and 8 <= elem_bits <= 64


def enabled(capability: int, disable: bool) -> bool:
    """Whether a variant loads descriptors through TMA: a TMA target (capability >= 90) and not
    `disable_tma`. The ttir stage's `tma` option (Triton's make_ttir rewrites descriptors to
    pointers below sm_90); which descriptors take it is `eligible`'s."""
    return capability >= 90 and not disable


def box(block_shape, elem_bits: int, swizzle: int) -> tuple[int, int]:
    """The copy box of a rank-2 block: with a swizzle of `swizzle` bytes the contiguous
    dimension is cut into swizzle spans (cuTensorMapEncodeTiled requires boxDim[0] * element
    size <= the swizzle span; one copy per span, as Triton's getTMABlockShape); unswizzled,
    the whole block."""
    rows, cols = block_shape
    if swizzle:
        cols = min(cols, swizzle * 8 // elem_bits)
    return rows, cols


def copies(block_shape, elem_bits: int, swizzle: int) -> int:
    """How many box copies one block load takes."""
    return block_shape[1] // box(block_shape, elem_bits, swizzle)[1]


def encode_attr(entries: list) -> str:
    """The MODULE_ATTR value of `entries` (None or {"swizzle", "box"}): per entry `-` or
    `swizzle:rowsxcols`, joined by `;` (no quotes, which MLIR would print escaped)."""
    return ";".join("-" if e is None else f"{e['swizzle']}:{'x'.join(str(d) for d in e['box'])}" for e in entries)


def decode_attr(value) -> list:
    """MODULE_ATTR's entries (None or {"swizzle", "box"}) from the attribute's string (as
    ttbuild.irattrs.module_attrs reads it); [] when absent. Raises ValueError for a malformed
    value."""
    if not value:
        return []
    out = []
    for part in str(value).split(";"):
        if part == "-":
            out.append(None)
            continue
        try:
            sw, dims = part.split(":")
            out.append({"swizzle": int(sw), "box": [int(d) for d in dims.split("x")]})
        except ValueError:
            raise ValueError(f"{MODULE_ATTR} entry {part!r} is not '-' or 'swizzle:rowsxcols'") from None
    return out
