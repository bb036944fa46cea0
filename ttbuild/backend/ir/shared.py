"""Shared-memory encodings `#ttg.swizzled_shared` and `#ttg.nvmma_shared`: frozen dataclasses with printer (`attr`), parser and element offsets.

Swizzled tiles hold mma.sync operands and the pipeliner's rings; nvmma tiles are what wgmma
descriptors and TMA read.

Triton: include/triton/Dialect/TritonGPU/IR/TritonGPUAttrDefs.td (SwizzledSharedEncodingAttr,
NVMMASharedEncodingAttr). Parsing any encoding: ttbuild.backend.ir.encodings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttbuild.backend.ir.attrtext import fmt_list, int_field, int_list


@dataclass(frozen=True)
class SwizzledShared:
    """`#ttg.swizzled_shared<{vec, perPhase, maxPhase, order}>`: a shared-memory tile, row-major
    with dimension order[0] fastest, whose groups of `vec` elements along order[0] are permuted
    per row: group ^= (row / perPhase) % maxPhase (row = index along order[1]). Leading
    dimensions beyond the last two are whole tiles one after another."""
    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...]

    def attr(self) -> str:
        """Triton's spelling, `#ttg.swizzled_shared<{vec, perPhase, maxPhase, order}>`."""
        return (f"#ttg.swizzled_shared<{{vec = {self.vec}, perPhase = {self.per_phase}, "
                f"maxPhase = {self.max_phase}, order = {fmt_list(self.order)}}}>")

    @classmethod
    def parse(cls, text: str) -> "SwizzledShared":
        """Inverse of attr(); ValueError when a field is missing."""
        return cls(int_field(text, "vec"), int_field(text, "perPhase"), int_field(text, "maxPhase"), int_list(text, "order"))

    def offset(self, index, shape) -> int:
        """Element offset of `index` in a tile of `shape` (pure Python; LLIR mirrors it)."""
        rank = len(shape)
        o0, o1 = self.order[0], (self.order[1] if rank > 1 else None)
        col = index[o0]
        if o1 is not None:
            phase = (index[o1] // self.per_phase) % self.max_phase
            col = ((col // self.vec) ^ phase) * self.vec + col % self.vec
        off, stride = col, shape[o0]
        for d in self.order[1:]:
            off += index[d] * stride
            stride *= shape[d]
        return off


@dataclass(frozen=True)
class NvmmaShared:
    """`#ttg.nvmma_shared<{swizzlingByteWidth, transposed, elementBitWidth}>`: a rank-2
    shared tile in the layout wgmma's matrix descriptors (and TMA) read. The contiguous
    dimension (the last one, or the first when `transposed`) is cut into blocks of
    `swizzle` bytes; block after block, each holds every row of the tile, row after row; within
    a row of 8 rows the 16-byte chunks are XORed with (row / (128 / swizzle)) % (swizzle / 16)
    (CuTe Swizzle<3,4,3> for 128 bytes; Triton: nvmmaSharedToLinearLayout; PTX ISA 9.7.15.5.1,
    "Shared memory matrix layout"). As a `SwizzledShared` over one block: vec = 16 bytes,
    perPhase = 128 / swizzle, maxPhase = swizzle / 16."""
    swizzle: int
    transposed: bool
    elem_bits: int

    @property
    def order(self) -> tuple[int, int]:
        """Dimensions fastest-first: (1, 0), or (0, 1) when transposed."""
        return (0, 1) if self.transposed else (1, 0)

    @property
    def block_elems(self) -> int:
        """Elements of one block along the contiguous dimension."""
        return self.swizzle * 8 // self.elem_bits

    @property
    def vec(self) -> int:
        """Elements of one 16-byte chunk (the unit the swizzle permutes)."""
        return 128 // self.elem_bits

    @property
    def per_phase(self) -> int:
        """Rows that share one swizzle phase (128 / swizzle)."""
        return 128 // self.swizzle

    @property
    def max_phase(self) -> int:
        """Distinct swizzle phases (swizzle / 16)."""
        return self.swizzle // 16

    def attr(self) -> str:
        """Triton's spelling, `#ttg.nvmma_shared<{swizzlingByteWidth, transposed, elementBitWidth}>`."""
        return (f"#ttg.nvmma_shared<{{swizzlingByteWidth = {self.swizzle}, transposed = "
                f"{'true' if self.transposed else 'false'}, elementBitWidth = {self.elem_bits}}}>")

    @classmethod
    def parse(cls, text: str) -> "NvmmaShared":
        """Inverse of attr(); ValueError when a field is missing."""
        m = re.search(r"transposed\s*=\s*(true|false)", text)
        return cls(int_field(text, "swizzlingByteWidth"), bool(m and m.group(1) == "true"), int_field(text, "elementBitWidth"))

    def in_block(self) -> "SwizzledShared":
        """The swizzle within one block (a `SwizzledShared` of `block_elems` columns)."""
        return SwizzledShared(self.vec, self.per_phase, self.max_phase, self.order)

    def offset(self, index, shape) -> int:
        """Element offset of `index` in a tile of `shape`: its block's offset plus the swizzled
        offset within the block (pure Python; LLIR mirrors it)."""
        c, r = self.order
        blk, x = divmod(index[c], self.block_elems)
        inner, block_shape = list(index), list(shape)
        inner[c], block_shape[c] = x, self.block_elems
        return blk * shape[r] * self.block_elems + self.in_block().offset(inner, block_shape)
