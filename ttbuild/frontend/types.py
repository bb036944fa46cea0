"""Triton's type system for the frontend: scalar dtypes, pointers, blocks, signature entries as types and the promotion rules.

Rules follow Triton 3.6 `triton/language/semantic.py` (`computation_type_impl`,
`integer_promote_impl`, `to_tensor`): a Python number (literal or constexpr) of a kind no higher
than the tensor's (bool < int < float) takes the tensor's dtype; otherwise fp64 > fp32 > fp16 >
bf16, `/` and `%` on 16-bit floats compute in fp32, integers follow C's usual arithmetic
conversions. No MLIR here: types render to MLIR spelling as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ttbuild.signature import SigEntry


class Kind(IntEnum):
    """Kinds of scalar dtypes in the order Triton's promotion ranks them (bool < int < float; semantic.py
    computation_type_impl)."""
    BOOLEAN = 0
    INTEGRAL = 1
    FLOATING = 2


class _ScalarType:
    """What the scalar types (DType, PointerType) answer alike: their own scalar type and shape ()."""

    __slots__ = ()

    @property
    def scalar(self):
        """A scalar's scalar type is itself (BlockType.scalar gives its element)."""
        return self

    @property
    def shape(self) -> tuple[int, ...]:
        """A scalar's shape: ()."""
        return ()


@dataclass(frozen=True, repr=False)
class DType(_ScalarType):
    """A scalar element type, named as Triton names it: int1, int8..int64, uint8..uint64, fp8e4nv,
    fp8e5, fp16, bf16, fp32, fp64."""

    name: str

    @property
    def bits(self) -> int:
        """Width in bits (int1 is 1, fp8 8, bf16 16)."""
        return _BITS[self.name]

    def is_int(self) -> bool:
        """Signed or unsigned integer, int1 included."""
        return self.name.startswith(("int", "uint"))

    def is_bool(self) -> bool:
        """int1, Triton's boolean."""
        return self.name == "int1"

    def is_unsigned(self) -> bool:
        """uint8..uint64, and int1 (as Triton's core.dtype.UINT_TYPES counts it)."""
        # Triton counts int1 among the unsigned types (core.dtype.UINT_TYPES).
        return self.name.startswith("uint") or self.name == "int1"

    def is_signed(self) -> bool:
        """int8..int64 (not int1)."""
        return self.name.startswith("int") and self.name != "int1"

    def is_float(self) -> bool:
        """Any floating type: fp8e4nv, fp8e5, fp16, bf16, fp32, fp64."""
        return self.name.startswith(("fp", "bf"))

    def is_fp8(self) -> bool:
        """fp8e4nv or fp8e5."""
        return self.name.startswith("fp8")

    def is_ptr(self) -> bool:
        """Always False: a DType is a scalar element type, never a pointer."""
        return False

    def kind(self) -> Kind:
        """The promotion kind: BOOLEAN for int1, FLOATING for floats, INTEGRAL otherwise."""
        if self.is_bool():
            return Kind.BOOLEAN
        return Kind.FLOATING if self.is_float() else Kind.INTEGRAL

    @property
    def mlir(self) -> str:
        """MLIR spelling of the element type: i32, f16, bf16, f8E4M3FN..."""
        return _MLIR[self.name]

    def int_range(self) -> tuple[int, int]:
        """(lowest, highest) value of an integer dtype, both inclusive; int1 is (0, 1)."""
        if self.is_unsigned() or self.is_bool():
            return 0, (1 << self.bits) - 1
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__  # diagnostics that format lists or tuples of types speak Triton too


@dataclass(frozen=True, repr=False)
class PointerType(_ScalarType):
    """A pointer to `element` in global memory (address space 1): MLIR `!tt.ptr<f32>`."""

    element: DType

    def is_ptr(self) -> bool:
        """Always True."""
        return True

    def is_int(self) -> bool:
        """Always False: pointer arithmetic takes integer offsets, a pointer is not one."""
        return False

    def is_float(self) -> bool:
        """Always False."""
        return False

    def is_bool(self) -> bool:
        """Always False."""
        return False

    @property
    def mlir(self) -> str:
        """MLIR spelling: `!tt.ptr<f32>`."""
        return f"!tt.ptr<{self.element.mlir}>"

    def __str__(self) -> str:
        return f"pointer<{self.element}>"

    __repr__ = __str__


Scalar = DType | PointerType


# Triton's cap on a block's element count (triton/language/core.py TRITON_MAX_TENSOR_NUMEL,
# checked by validate_block_shape): a block past it would unroll into millions of registers' worth
# of code (a BLOCK_SIZE of 2**24 ran the ptx stage for minutes at gigabytes).
MAX_TENSOR_NUMEL = 1048576


@dataclass(frozen=True)
class TensorDescType:
    """A TMA tensor descriptor parameter (Triton's `!tt.tensordesc<tensor<128x64xf16>>`): the
    address of a CUtensorMap whose box is `block` of `element` (ttbuild.tma)."""

    element: "DType"
    block: tuple[int, ...]

    @property
    def mlir(self) -> str:
        """MLIR spelling `!tt.tensordesc<tensor<128x64xf16>>`, integer elements with their signedness (si32, ui32)."""
        # integers carry their signedness (si32 / ui32), as Triton's tensor_descriptor_base_type
        # builds the type: a map made in the kernel takes it as its element type (.s32 / .u32),
        # which decides how a TMA reduction's min / max compares
        elem = self.element.mlir
        if self.element.is_int() and not self.element.is_bool():
            elem = ("s" if self.element.is_signed() else "u") + elem
        return "!tt.tensordesc<tensor<" + "".join(f"{d}x" for d in self.block) + elem + ">>"


@dataclass(frozen=True, repr=False)
class BlockType:
    """A block (tensor) of `shape` elements of `element`: MLIR `tensor<1024xf32>`. Raises
    CompilationError (located by the code generator) past MAX_TENSOR_NUMEL elements."""

    element: Scalar
    shape: tuple[int, ...]

    def __post_init__(self):
        numel = 1
        for d in self.shape:
            numel *= d
        if numel > MAX_TENSOR_NUMEL:
            from ttbuild.errors import CompilationError

            raise CompilationError(f"numel ({numel}) exceeds triton maximum tensor numel ({MAX_TENSOR_NUMEL}): "
                                   f"a block of shape {list(self.shape)}")

    @property
    def scalar(self) -> Scalar:
        """The element type (a DType or PointerType)."""
        return self.element

    @property
    def mlir(self) -> str:
        """MLIR spelling: `tensor<128x64xf16>`."""
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.element.mlir + ">"

    def __str__(self) -> str:
        """As Triton prints a tensor's type (triton/language/core.py, tensor.__str__): fp16[128, 64]."""
        return f"{self.element}[{', '.join(str(d) for d in self.shape)}]"

    __repr__ = __str__


Type = DType | PointerType | BlockType

_INTS = [f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)]
_BITS = {"int1": 1, **{n: int(n.split("int")[1]) for n in _INTS},
         "fp8e4nv": 8, "fp8e5": 8, "fp16": 16, "bf16": 16, "fp32": 32, "fp64": 64}
_MLIR = {"int1": "i1", **{n: "i" + n.split("int")[1] for n in _INTS},
         "fp8e4nv": "f8E4M3FN", "fp8e5": "f8E5M2", "fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64"}
DTYPES = {n: DType(n) for n in _BITS}
int1, int32, int64, uint32, uint64 = (DTYPES[n] for n in ("int1", "int32", "int64", "uint32", "uint64"))
fp16, bf16, fp32, fp64 = (DTYPES[n] for n in ("fp16", "bf16", "fp32", "fp64"))

def signature_type(entry: SigEntry) -> Scalar:
    """The frontend type of a parsed signature entry (`ttbuild.signature`): `*fp16` -> PointerType(fp16)."""
    dtype = DTYPES[entry.language_dtype]
    return PointerType(dtype) if entry.is_pointer else dtype


def dtype_of_python(value) -> DType:
    """The dtype Triton gives a Python number used as an operand (`semantic.to_tensor`)."""
    if isinstance(value, bool):
        return int1
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return int32
        if 2**31 <= value < 2**32:
            return uint32
        if -2**63 <= value < 2**63:
            return int64
        if 2**63 <= value < 2**64:
            return uint64
        raise TypeError(f"integer {value} does not fit in 64 bits")
    if isinstance(value, float):
        a = abs(value)
        if a in (0.0, float("inf")) or value != value or 2**-126 <= a <= (2 - 2**-23) * 2**127:
            return fp32
        return fp64
    raise TypeError(f"{type(value).__name__} is not a number")


def integer_promote(a: DType, b: DType) -> DType:
    """C's usual arithmetic conversions between two integer dtypes (Triton `integer_promote_impl`)."""
    if a.is_unsigned() == b.is_unsigned():
        return a if a.bits > b.bits else b
    if a.is_unsigned():
        return a if a.bits >= b.bits else b
    return b if b.bits >= a.bits else a


def computation_type(a: DType, a_is_scalar: bool, b: DType, b_is_scalar: bool,
                     div_or_mod: bool = False) -> DType:
    """The dtype both operands of a binary arithmetic op convert to (Triton `computation_type_impl`).

    `*_is_scalar`: the operand is a Python number (literal or constexpr), not an IR value.
    Raises TypeError for operand types Triton rejects.
    """
    if a_is_scalar != b_is_scalar:
        scalar, tensor = (a, b) if a_is_scalar else (b, a)
        if scalar.kind() <= tensor.kind():
            if div_or_mod and tensor in (fp16, bf16):
                return fp32
            return tensor
    if fp64 in (a, b):
        return fp64
    if fp32 in (a, b):
        return fp32
    if fp16 in (a, b):
        return fp32 if div_or_mod else fp16
    if a == bf16 and b == bf16:
        return fp32 if div_or_mod else bf16
    if bf16 in (a, b):
        return fp32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else fp16
    if not a.is_int() or not b.is_int():
        raise TypeError(f"unexpected types {a} and {b}")
    if div_or_mod and a.is_unsigned() != b.is_unsigned():
        raise TypeError(f"cannot use / or % with {a} and {b}: they have different signedness; "
                        f"cast one of them")
    return integer_promote(a, b)


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy-style broadcast of two block shapes; raises ValueError when they are incompatible."""
    if len(a) < len(b):
        a = (1,) * (len(b) - len(a)) + a
    elif len(b) < len(a):
        b = (1,) * (len(a) - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"incompatible shapes {a} and {b}")
        out.append(max(x, y))
    return tuple(out)
