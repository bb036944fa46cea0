"""Kernel parameters as cuLaunchKernel takes them: one 8-byte slot per parameter, packed by one struct, pointed at by a void*[].

The struct codes follow the metadata's dtypes (ttbuild.runtime.metadata.Param); scalars that
Python holds in another form (a float for a bf16 parameter) are converted first. The C launch
path (claunch.c) reads the same layout from its own description (`c_launch_data`).
"""

from __future__ import annotations

import ctypes
import struct

from ..metadata import MetadataError

# struct codes per dtype; each parameter gets its own 8-byte slot (natural alignment for all of
# them), so the void*[] entries are base + 8*i.
PACK = {
    "i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
    "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "fp16": "e", "fp32": "f", "fp64": "d", "bf16": "H",
}
SLOT = 8


def bf16_bits(x: float) -> int:
    """Round-to-nearest-even fp32 -> bf16 bit pattern (what torch's .to(bfloat16) does)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    if (u & 0x7F800000) == 0x7F800000 and u & 0x7FFFFF:  # NaN: keep it quiet
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def converter(convert: tuple):
    """`vals -> [converted vals]` applying `convert[i]` where it is not None, or None when no
    parameter needs one."""
    if all(c is None for c in convert):
        return None
    return lambda vals: [v if c is None else c(v) for c, v in zip(convert, vals)]


def packer(variant, scratch: bool) -> struct.Struct:
    """The struct that packs `variant`'s launch parameters (and, with `scratch`, the global
    scratch address after them), one 8-byte little-endian slot each. Raises MetadataError for
    a dtype the runtime cannot pass."""
    fmt = "<"
    for p in variant.launch_params:
        code = "Q" if p.kind == "pointer" else PACK.get(p.dtype)
        if code is None:
            raise MetadataError(f"{variant.json_path}: cannot pass {p.dtype} parameter {p.name}")
        fmt += code + "x" * (SLOT - struct.calcsize("<" + code))
    if scratch:
        fmt += "Q"
    return struct.Struct(fmt)


def conversions(params) -> tuple:
    """Per launch parameter, the conversion its Python value needs before packing, or None:
    bf16 scalars to their bit pattern, other float scalars to float (an int passed for one)."""
    return tuple(
        (lambda v: bf16_bits(float(v))) if p.kind == "scalar" and p.dtype == "bf16"
        else float if p.kind == "scalar" and p.dtype in ("fp16", "fp32", "fp64")
        else None
        for p in params)


def new_slot(n: int) -> tuple:
    """(buffer of `n` 8-byte parameter slots, address of the void*[] pointing at them, that
    array): what cuLaunchKernel's kernelParams wants."""
    buffer = ctypes.create_string_buffer(SLOT * n)
    base = ctypes.addressof(buffer)
    pointers = (ctypes.c_void_p * n)(*[base + SLOT * i for i in range(n)])
    return buffer, ctypes.addressof(pointers), pointers


def c_launch_data(params, fn_address: int, block_x: int, shared: int, scratch=None, scratch_use=None) -> bytes:
    """What claunch.c reads for one variant in one context: bytes "<QIII" (raw function handle
    `fn_address`, block x, shared bytes, parameter count) and one code per parameter: 'p'
    pointer, the struct code of a scalar, 'z' for bf16; with `scratch_use` (a
    scratch.ScratchUse), "<QQQ" after them: bytes per program and alignment (`scratch`) and the
    address of the GlobalScratch's epoch."""
    codes = "".join("p" if p.kind == "pointer" else "z" if p.dtype == "bf16" else PACK[p.dtype] for p in params)
    data = struct.pack("<QIII", fn_address, block_x, shared, len(codes)) + codes.encode()
    if scratch_use is not None:
        data += struct.pack("<QQQ", *scratch, scratch_use.scratch.epoch_address)
    return data
