"""Registers and stack frame of each kernel of a cubin, read from its `.nv.info` ELF section (ptxas -v's figures without -v, which changes the cubin's bytes)."""

from __future__ import annotations

import struct

# `.nv.info` attributes (CUDA's EIATTR codes, as cuobjdump -elf names them): each is
# (format, code) then a payload; format 4 (EIFMT_SVAL) carries a 16-bit size and that many bytes,
# formats 2 and 3 (BVAL, HVAL) two bytes, format 1 (NVAL) none.
EIATTR_FRAME_SIZE = 0x11   # (symbol index u32, bytes u32): the function's stack frame
EIATTR_REGCOUNT = 0x2F     # (symbol index u32, registers u32)


def _sections(data: bytes):
    """(name, offset, size) of each section of an ELF64 little-endian file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    for h in heads:
        start = names + h[0]
        yield data[start:data.index(b"\0", start)].decode(), h[4], h[5]


def kernel_resources(cubin: bytes) -> tuple[int, int]:
    """(most registers, largest stack frame in bytes) over the cubin's functions; (0, 0) for a
    file without `.nv.info` or not ELF. Raises nothing on odd input: the figures steer a choice
    between two valid cubins, never correctness."""
    if cubin[:4] != b"\x7fELF":
        return 0, 0
    regs = frame = 0
    try:
        for name, off, size in _sections(cubin):
            if name != ".nv.info":
                continue
            end = off + size
            while off + 2 <= end:
                fmt, code = cubin[off], cubin[off + 1]
                if fmt == 4:
                    n, = struct.unpack_from("<H", cubin, off + 2)
                    if code in (EIATTR_FRAME_SIZE, EIATTR_REGCOUNT) and n >= 8:
                        value, = struct.unpack_from("<I", cubin, off + 8)
                        if code == EIATTR_REGCOUNT:
                            regs = max(regs, value)
                        else:
                            frame = max(frame, value)
                    off += 4 + n
                else:
                    off += 4 if fmt in (2, 3) else 2
    except (struct.error, ValueError, IndexError):
        return 0, 0
    return regs, frame
