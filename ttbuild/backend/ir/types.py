"""`TensorType` and `MemDescType`: shape, element type and encoding of a ranked tensor and of a `!ttg.memdesc`, parsed and printed.

The spelling is Triton 3.6's (TritonGPUTypes.td).

`MemDescType.parse(t).ir() == t` for every memdesc this compiler makes; the encodings are
ttbuild.backend.ir.encodings'. Shapes are tuples of element counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlir import ir

from ttbuild.backend.ir.encodings import parse_encoding, shared_encoding

_MEMDESC = re.compile(r"!ttg\.memdesc<([0-9x]+)x([a-zA-Z0-9]+),")
SHARED_MEMORY = "#ttg.shared_memory"


@dataclass(frozen=True)
class TensorType:
    """A `tensor<shape x elem, encoding>`: `encoding` is the attribute's text (None without one)."""
    shape: tuple[int, ...]
    elem: str
    encoding: str | None = None

    @classmethod
    def of(cls, t) -> "TensorType":
        """From an `ir.RankedTensorType` (or a type that is one); TypeError otherwise."""
        rt = ir.RankedTensorType(t)
        return cls(tuple(rt.shape), str(rt.element_type), str(rt.encoding) if rt.encoding is not None else None)

    def layout(self):
        """The parsed encoding (ttbuild.backend.ir.encodings.parse_encoding); ValueError if none."""
        if self.encoding is None:
            raise ValueError(f"tensor without an encoding: {self}")
        return parse_encoding(self.encoding)


def with_encoding(t, layout) -> ir.RankedTensorType:
    """The ranked tensor type `t` (shape, element type kept) in `layout` (an encoding dataclass)."""
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(rt.shape, rt.element_type, ir.Attribute.parse(layout.attr()))


@dataclass(frozen=True)
class MemDescType:
    """`!ttg.memdesc<shape x elem, encoding, #ttg.shared_memory[, mutable]>`: a shared-memory
    buffer or view. `encoding` is the shared encoding's text (`#ttg.swizzled_shared<{...}>` or
    `#ttg.nvmma_shared<{...}>`)."""
    shape: tuple[int, ...]
    elem: str
    encoding: str
    mutable: bool = False

    @classmethod
    def parse(cls, t) -> "MemDescType":
        """From a memdesc `ir.Type` or its text; ValueError for other types or encodings."""
        text = str(t)
        shape, elem = cls.header(text)
        return cls(shape, elem, shared_encoding(text), ", mutable" in text)

    @staticmethod
    def header(t) -> tuple[tuple[int, ...], str]:
        """(shape, element type) of a memdesc type, whatever its encoding; ValueError for other types."""
        m = _MEMDESC.match(str(t))
        if not m:
            raise ValueError(f"not a shared-memory descriptor: {t}")
        return tuple(int(s) for s in m.group(1).split("x")), m.group(2)

    @staticmethod
    def shape_of(t) -> tuple[int, ...]:
        """Just the shape of a memdesc type (any encoding); ValueError for other types."""
        return MemDescType.header(t)[0]

    def is_mbarrier(self) -> bool:
        """One mbarrier (1 x i64) or a ring of them (S x 1 x i64)."""
        return self.elem == "i64" and len(self.shape) <= 2 and self.shape[-1] == 1

    def layout(self):
        """The parsed shared encoding (SwizzledShared or NvmmaShared)."""
        return parse_encoding(self.encoding)

    @property
    def order(self) -> tuple[int, ...]:
        """The tile's dimensions fastest-first, as its encoding stores them."""
        return tuple(self.layout().order)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        return f"!ttg.memdesc<{dims}x{self.elem}, {self.encoding}, {SHARED_MEMORY}{', mutable' if self.mutable else ''}>"

    def ir(self) -> ir.Type:
        """The MLIR type (parsed in the current context)."""
        return ir.Type.parse(str(self))


def unswizzled(order) -> str:
    """`#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order}>`: a plain row-major
    tile with dimensions `order` fastest-first (the pipeliner's rings of plain loads)."""
    return ("#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = ["
            + ", ".join(str(o) for o in order) + "]}>")


def barrier_type(slots: int | None = None) -> ir.Type:
    """One mbarrier (a mutable 1 x i64 shared-memory descriptor, Triton's barrier memdescs), or
    a ring of `slots` of them (slots x 1 x i64)."""
    shape = (1,) if slots is None else (slots, 1)
    return MemDescType(shape, "i64", unswizzled([0]), mutable=True).ir()


def token_type() -> ir.Type:
    """`!ttg.async.token`: what async copies, commit groups and waits pass along."""
    return ir.Type.parse("!ttg.async.token")


def memdesc_type(shape, elem: str, order, encoding: str | None = None) -> ir.Type:
    """A mutable shared-memory descriptor of `shape` x `elem`: in `encoding` (text) or, without
    it, the unswizzled encoding of `order`."""
    return MemDescType(tuple(shape), elem, encoding or unswizzled(order), mutable=True).ir()


def tensor_in(v, layout) -> ir.RankedTensorType:
    """The type of tensor value `v` in `layout` instead of its own encoding (with_encoding)."""
    return with_encoding(v.type, layout)
