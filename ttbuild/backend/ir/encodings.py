"""The one parser of TTGIR encoding attributes: encoding text -> its dataclass, whose `attr()` prints it back.

Encodings: `#ttg.blocked`, `#ttg.slice`, `#ttg.nvidia_mma`, `#ttg.dot_op` (ttbuild.backend.ir.distributed),
`#ttg.swizzled_shared` and `#ttg.nvmma_shared` (ttbuild.backend.ir.shared).

`parse_encoding(enc.attr()) == enc` for every encoding; ValueError for any other text. The
spelling is Triton 3.6's (include/triton/Dialect/TritonGPU/IR/TritonGPUAttrDefs.td).
"""

from __future__ import annotations

import re

from ttbuild.backend.ir.distributed import Blocked, DotOperand, FmaOperand, NvidiaMma, Slice
from ttbuild.backend.ir.shared import NvmmaShared, SwizzledShared

__all__ = ["Blocked", "DotOperand", "FmaOperand", "NvidiaMma", "NvmmaShared", "Slice", "SwizzledShared",
           "parse_encoding", "shared_encoding"]

_SLICE = re.compile(r"#ttg\.slice<\{\s*dim\s*=\s*(\d+)\s*,\s*parent\s*=\s*(.*)\}>$", re.S)
_FMA_OPERAND = re.compile(r"#ttg\.dot_op<\{\s*opIdx\s*=\s*(\d+)\s*,\s*parent\s*=\s*(#ttg\.blocked<\{[^}]*\}>)\s*"
                          r"(,\s*kWidth\s*=\s*\d+\s*)?\}>$", re.S)
_MMA_OPERAND = re.compile(r"#ttg\.dot_op<\{\s*opIdx\s*=\s*(\d+)\s*,\s*parent\s*=\s*(.*)\s*,\s*kWidth\s*=\s*(\d+)\s*\}>$", re.S)
_SHARED = re.compile(r"#ttg\.(swizzled|nvmma)_shared<\{[^}]*\}>")


def parse_encoding(text: str):
    """Encoding attribute text -> Blocked, Slice (nested parents), NvidiaMma, DotOperand,
    FmaOperand (a `#ttg.dot_op` over a blocked parent), SwizzledShared or NvmmaShared;
    ValueError for other encodings or a malformed one."""
    text = text.strip()
    if text.startswith("#ttg.nvidia_mma<"):
        return NvidiaMma.parse(text)
    if text.startswith("#ttg.dot_op<") and "#ttg.blocked<" in text:
        m = _FMA_OPERAND.match(text)
        if not m:
            raise ValueError(f"unsupported dot_op encoding: {text}")
        return FmaOperand(int(m.group(1)), Blocked.parse(m.group(2)))
    if text.startswith("#ttg.dot_op<"):
        m = _MMA_OPERAND.match(text)
        if not m:
            raise ValueError(f"unsupported dot_op encoding: {text}")
        return DotOperand(int(m.group(1)), parse_encoding(m.group(2)), int(m.group(3)))
    if text.startswith("#ttg.slice<"):
        m = _SLICE.match(text)
        if not m:
            raise ValueError(f"bad slice encoding: {text}")
        return Slice(int(m.group(1)), parse_encoding(m.group(2)))
    if text.startswith("#ttg.swizzled_shared<"):
        return SwizzledShared.parse(text)
    if text.startswith("#ttg.nvmma_shared<"):
        return NvmmaShared.parse(text)
    return Blocked.parse(text)


def shared_encoding(text: str) -> str:
    """The shared encoding attribute (its text, `#ttg.swizzled_shared<{...}>` or
    `#ttg.nvmma_shared<{...}>`) inside a `!ttg.memdesc<...>` type's text; ValueError without one."""
    m = _SHARED.search(text)
    if not m:
        raise ValueError(f"unsupported shared encoding in {text}")
    return m.group(0)
