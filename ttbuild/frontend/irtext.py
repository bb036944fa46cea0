"""A small SSA builder that writes MLIR generic-form text, parsed and re-printed by the MLIR bindings.

Why text: the Python bindings' `Operation.create` stores attributes of unregistered ops (all of
`tt.*`) as a discardable dictionary (`{axis = 0 : i32}`), while Triton and docs/CONTRACTS.md
spell them as properties (`<{axis = 0 : i32}>`), which only the parser produces. The MLIR parser
then checks every op (registered `arith`/`scf` ops are verified) and the printer gives the
canonical generic form.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from fractions import Fraction

from .types import BlockType, DType, Type


@dataclass(frozen=True)
class Value:
    """An SSA value: its text name (`%v3`) and its frontend type."""

    name: str
    type: Type


def float_bits(value: float, dtype: DType) -> str:
    """A float as MLIR's hex bit-pattern literal for `dtype` (exact, and fine for inf/nan);
    magnitudes beyond the format round to infinity, as a C cast would."""
    limit = {"fp16": 65504.0, "bf16": 3.3895313892515355e38, "fp32": 3.4028234663852886e38}.get(dtype.name)
    if limit is not None and value == value and abs(value) > limit:
        value = value * float("inf")
    if dtype.name == "fp64":
        return "0x%016X" % struct.unpack(">Q", struct.pack(">d", value))[0]
    if dtype.name == "fp16":
        return "0x%04X" % struct.unpack(">H", struct.pack(">e", value))[0]
    if dtype.name == "fp32":
        return "0x%08X" % struct.unpack(">I", struct.pack(">f", value))[0]
    if dtype.name == "bf16":  # from the double itself: through fp32 a tie could round twice
        return "0x%04X" % (_ieee_bits(value, 8, 7) if value == value else 0x7FC0)
    if dtype.name == "fp8e5":  # (through fp16, 72.03125 rounded to 72.0, then the tie to 64.0)
        return "0x%02X" % (_ieee_bits(value, 5, 2) if value == value else 0x7E)
    if dtype.name == "fp8e4nv":
        return "0x%02X" % _e4m3fn_bits(value)
    raise NotImplementedError(f"constant of type {dtype}")


def _ieee_bits(value: float, ebits: int, mbits: int) -> int:
    """The bits of the IEEE-style binary format nearest `value` (not NaN), ties to even,
    magnitudes past the largest finite one (from half an ulp above it) to infinity: MLIR's
    APFloat conversion (rmNearestTiesToEven). Exact: the double's value as a Fraction."""
    sign = (1 << (ebits + mbits)) if math.copysign(1.0, value) < 0 else 0
    a = abs(value)
    inf = ((1 << ebits) - 1) << mbits
    if a == math.inf:
        return sign | inf
    if a == 0:
        return sign
    bias = (1 << (ebits - 1)) - 1
    exp = max(math.frexp(a)[1] - 1, 1 - bias)  # a = 1.f x 2**exp, or a subnormal
    q = round(Fraction(a) / Fraction(2) ** (exp - mbits))  # Fraction rounds ties to even
    if q >= 1 << (mbits + 1):  # rounded up into the next binade (q is then exactly 2**(mbits+1))
        q, exp = q >> 1, exp + 1
    if exp > bias:
        return sign | inf
    if q < 1 << mbits:  # subnormal (or zero)
        return sign | q
    return sign | ((exp + bias) << mbits) | (q - (1 << mbits))


def _e4m3fn_value(code: int) -> float:
    s, e, m = code >> 7, (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return float("nan")
    mag = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if s else mag


def _e4m3fn_bits(value: float) -> int:
    """Nearest e4m3fn code (ties to even mantissa); no infinity in this format: NaN past 464."""
    negative = math.copysign(1.0, value) < 0  # -0.0 keeps its sign bit
    if value != value or abs(value) >= 464.0:
        return 0x7F | (0x80 if negative else 0)
    codes = [c for c in range(256) if _e4m3fn_value(c) == _e4m3fn_value(c)]
    return min(codes, key=lambda c: (abs(_e4m3fn_value(c) - value), c & 1, (c >> 7) != negative))


def scalar_attr(value, dtype: DType) -> str:
    """`value` as a typed MLIR attribute: `1024 : i32`, `0x3F800000 : f32`, `true`."""
    if dtype.is_float():
        return f"{float_bits(float(value), dtype)} : {dtype.mlir}"
    if dtype.is_bool():
        return "true" if value else "false"
    lo, hi = dtype.int_range()
    v = int(value)
    if not -(1 << (dtype.bits - 1)) <= v <= hi:
        raise ValueError(f"constant {v} does not fit in {dtype}")
    if dtype.is_unsigned() and v > (1 << (dtype.bits - 1)) - 1:
        v -= 1 << dtype.bits  # MLIR integer attributes are signless, printed signed
    return f"{v} : {dtype.mlir}"


class Positions:
    """Source positions for debug builds, from the parse stage's `loc` table
    (docs/CONTRACTS.md): node id -> (file, line, 0-based col)."""

    def __init__(self, table: dict):
        self.file = table["file"]
        self._nodes = table.get("nodes", {})

    def get(self, node_id: int):
        """(file, line, 0-based column) of AST node `node_id`, or None when the table has no position for it."""
        pos = self._nodes.get(str(node_id))
        return None if pos is None else (pos[2] if len(pos) > 2 else self.file, pos[0], pos[1])


def mlir_string(text: str) -> str:
    """`text` as an MLIR string literal: quotes, backslashes and non-printables as \\XX hex."""
    out = []
    for ch in text:
        if ch in '"\\' or not (" " <= ch <= "~"):
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@dataclass
class _OpLine:
    """One op's text, split before its type signature so discardable attributes (tt.divisibility
    hints from tl.multiple_of) can be added after the op is built."""

    head: str
    tail: str
    attrs: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        extra = (" {" + ", ".join(f"{k} = {v}" for k, v in sorted(self.attrs.items())) + "}") if self.attrs else ""
        return self.head + extra + self.tail


@dataclass
class _Block:
    lines: list = field(default_factory=list)


class IRBuilder:
    """Appends ops to the innermost open block; `region()` opens a nested one."""

    def __init__(self, positions: "Positions | None" = None):
        self._blocks: list[_Block] = []
        self._n = 0
        self._defs: dict[str, _OpLine] = {}
        self.loc = "unknown"
        self.positions = positions

    def loc_of(self, node_id) -> str:
        """The location of AST node `node_id`: `loc("n17")`, or with debug positions the name
        around a file position, `loc("n17"("vector_add.py":12:5))` (col 1-based, as MLIR's)."""
        if not isinstance(node_id, int):
            return "loc(unknown)"
        pos = self.positions.get(node_id) if self.positions is not None else None
        if pos is None:
            return f'loc("n{node_id}")'
        file, line, col = pos
        return f'loc("n{node_id}"({mlir_string(file)}:{line}:{col + 1}))'

    def fresh(self, type: Type) -> Value:
        """A new SSA value `%vN` of `type` (N counts up per module, so the text is deterministic)."""
        self._n += 1
        return Value(f"%v{self._n}", type)

    def _loc(self) -> str:
        return self.loc_of(self.loc)

    def op(self, name: str, operands: list[Value], results: list[Type], props: dict[str, str] | None = None,
           regions: list[str] | None = None, attrs: dict[str, str] | None = None) -> list[Value]:
        """Emit operation `name` in generic MLIR form into the innermost block: `operands`, one fresh result per type
        of `results`, properties `props` (sorted, in `<{...}>`), `regions` (region text from close_block) and
        discardable `attrs`, at the current location. Returns the results."""
        outs = [self.fresh(t) for t in results]
        lhs = (", ".join(v.name for v in outs) + " = ") if outs else ""
        p = ""
        if props:
            p = " <{" + ", ".join(f"{k} = {v}" for k, v in sorted(props.items())) + "}>"
        r = (" (" + ", ".join(regions) + ")") if regions else ""
        ins = ", ".join(v.type.mlir for v in operands)
        res = ", ".join(t.mlir for t in results)
        res = res if len(results) == 1 else f"({res})"
        line = _OpLine(f'{lhs}"{name}"({", ".join(v.name for v in operands)}){p}{r}', f" : ({ins}) -> {res} {self._loc()}",
                       dict(attrs or {}))
        self._blocks[-1].lines.append(line)
        if len(outs) == 1:
            self._defs[outs[0].name] = line
        return outs

    def set_attr(self, value: Value, name: str, attr: str) -> bool:
        """Attach a discardable attribute to the op defining `value`; False for block arguments
        and multi-result ops, which have no single defining op line."""
        line = self._defs.get(value.name)
        if line is None:
            return False
        line.attrs[name] = attr
        return True

    def op1(self, name: str, operands: list[Value], result: Type, props: dict[str, str] | None = None) -> Value:
        """op() for an operation with exactly one result; returns it."""
        return self.op(name, operands, [result], props)[0]

    def emit(self, line: str) -> None:
        """Append a line of IR text to the innermost open block."""
        self._blocks[-1].lines.append(line)

    @property
    def depth(self) -> int:
        """Blocks open: 1 in the kernel's body, more inside runtime control flow."""
        return len(self._blocks)

    def open_block(self) -> _Block:
        """Open a new innermost block (a region body); ops go into it until close_block or suspend."""
        self._blocks.append(_Block())
        return self._blocks[-1]

    def suspend(self) -> _Block:
        """Pop the innermost block without closing it, to `resume` it later (if/else merges)."""
        return self._blocks.pop()

    def resume(self, block: _Block) -> None:
        """Make `block` (from suspend) the innermost block again."""
        self._blocks.append(block)

    def close_block(self, args: list[Value] | None = None, arg_locs: list[str] | None = None) -> str:
        """Close the innermost block and return it as region text `{ ^bb0(...): ... }`."""
        block = self._blocks.pop()
        head = ""
        if args is not None:
            locs = arg_locs or [self._loc()] * len(args)
            head = "^bb0(" + ", ".join(f"{a.name}: {a.type.mlir} {l}" for a, l in zip(args, locs)) + "):\n"
        return "{\n" + head + "\n".join(map(str, block.lines)) + "\n}"

    def discard_block(self) -> None:
        """Drop the innermost block and its ops (a scratch pass whose IR is not kept)."""
        self._blocks.pop()

    def constant(self, value, type: Type) -> Value:
        """`arith.constant` of a Python number as `type` (a scalar dtype or a splat block).
        Raises CompilationError at the current node when the number does not fit."""
        try:
            return self._constant(value, type)
        except (ValueError, OverflowError) as e:
            from ttbuild.errors import CompilationError
            raise CompilationError(f"cannot make a {type} constant from {value!r}: {e}", stage="ttir",
                                   node_id=self.loc if isinstance(self.loc, int) else None) from None

    def _constant(self, value, type: Type) -> Value:
        if isinstance(type, BlockType):
            attr = scalar_attr(value, type.element)
            lit, _, _ = attr.partition(" : ")
            return self.op1("arith.constant", [], type, {"value": f"dense<{lit}> : {type.mlir}"})
        return self.op1("arith.constant", [], type, {"value": scalar_attr(value, type)})
