"""`torch.finfo(dtype)` / `torch.iinfo(dtype)` as fixed facts of the dtypes' formats (IEEE 754 binary16/32/64, bfloat16, two's complement); standard library only, torch never imported."""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class FloatInfo:
    """torch.finfo's fields for one floating dtype (the values torch prints for it)."""

    bits: int
    max: float
    eps: float
    tiny: float
    resolution: float

    @property
    def min(self) -> float:
        return -self.max

    @property
    def smallest_normal(self) -> float:
        return self.tiny


@dataclass(frozen=True)
class IntInfo:
    """torch.iinfo's fields for one integer dtype."""

    bits: int
    min: int
    max: int


def _ints(bits: int, signed: bool) -> IntInfo:
    return IntInfo(bits, -(1 << (bits - 1)) if signed else 0, (1 << (bits - 1 if signed else bits)) - 1)


_F64 = sys.float_info
FINFO = {
    "float16": FloatInfo(16, 65504.0, 2.0 ** -10, 2.0 ** -14, 0.001),
    "bfloat16": FloatInfo(16, (2 - 2.0 ** -7) * 2.0 ** 127, 2.0 ** -7, 2.0 ** -126, 0.01),
    "float32": FloatInfo(32, (2 - 2.0 ** -23) * 2.0 ** 127, 2.0 ** -23, 2.0 ** -126, 1e-06),
    "float64": FloatInfo(64, _F64.max, _F64.epsilon, _F64.min, 1e-15),
}
for _alias, _name in (("half", "float16"), ("float", "float32"), ("double", "float64")):
    FINFO[_alias] = FINFO[_name]
IINFO = {f"{'u' if not s else ''}int{b}": _ints(b, s) for b in (8, 16, 32, 64) for s in (True, False)}
IINFO.update({"int": IINFO["int32"], "long": IINFO["int64"], "short": IINFO["int16"]})


def type_info(function: str, dtype_path: str):
    """`torch.finfo(torch.float32)` -> its FloatInfo (`function` "torch.finfo" / "torch.iinfo", `dtype_path` the
    dotted dtype "torch.float32"); None when either is not one of these facts."""
    if not dtype_path.startswith("torch."):
        return None
    name = dtype_path[len("torch."):]
    table = FINFO if function == "torch.finfo" else IINFO if function == "torch.iinfo" else {}
    return table.get(name)
