"""Test helper: evaluate the integer values of an unoptimized llvmlite kernel for one thread of one program (addresses and predicates the LLIR computes), and find its inline-asm calls."""

from __future__ import annotations

from llvmlite import ir

_SREG = "llvm.nvvm.read.ptx.sreg."

_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
           "shl": lambda a, b: a << b, "lshr": lambda a, b: a >> b, "udiv": lambda a, b: a // b,
           "urem": lambda a, b: a % b}

# llvmlite's icmp predicates, in both spellings (`ult` and `<` for an unsigned compare)
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "gt": lambda a, b: a > b,
            "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}
_SYMBOLS = {"==": "eq", "!=": "ne", ">": "gt", ">=": "ge", "<": "lt", "<=": "le"}


def type_size(t) -> int:
    """Bytes of an llvmlite type as a GEP steps over it."""
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    if isinstance(t, ir.HalfType):
        return 2
    if isinstance(t, ir.FloatType):
        return 4
    if isinstance(t, ir.DoubleType):
        return 8
    if isinstance(t, (ir.ArrayType, ir.VectorType)):
        return t.count * type_size(t.element)
    if str(t) == "bfloat":
        return 2
    raise TypeError(t)


class Eval:
    """`Eval(sregs, args)(value) -> int`: special registers from `sregs` (`{"tid.x": 5,
    "ctaid.x": 0, ...}`), `global_smem` at 0, the function's parameters from `args` (by number; 0
    when absent, so pointer parameters sit at 0)."""

    def __init__(self, sregs: dict[str, int], args: dict[int, int]):
        self.sregs, self.args, self.memo = sregs, args, {}

    def __call__(self, v) -> int:
        if id(v) not in self.memo:
            self.memo[id(v)] = self._eval(v)
        return self.memo[id(v)]

    def _eval(self, v) -> int:
        if isinstance(v, ir.Constant):
            return int(v.constant)
        if isinstance(v, ir.GlobalVariable):
            assert v.name == "global_smem", v.name
            return 0
        if isinstance(v, ir.Argument):
            return self.args.get(int(v.name[3:]), 0)
        if isinstance(v, ir.GEPInstr):
            addr, t = self(v.pointer), v.source_etype
            for k, i in enumerate(v.indices):
                if k:
                    t = t.element
                addr += self(i) * type_size(t)
            return addr
        op = v.opname
        if op == "call":
            name = getattr(v.callee, "name", "")
            assert name.startswith(_SREG), name
            return self.sregs[name[len(_SREG):]]
        if op in ("ptrtoint", "bitcast", "zext", "inttoptr", "addrspacecast"):
            return self(v.operands[0])
        if op == "trunc":
            return self(v.operands[0]) & ((1 << v.type.width) - 1)
        if op == "sext":
            w, x = v.operands[0].type.width, self(v.operands[0])
            return (x - (1 << w) if x >> (w - 1) else x) & ((1 << v.type.width) - 1)
        if op == "icmp":
            a, b = self(v.operands[0]), self(v.operands[1])
            pred = _SYMBOLS.get(v.op, v.op)
            if pred.startswith("s") and pred not in ("eq", "ne"):
                w = v.operands[0].type.width
                a, b = (x - (1 << w) if x >> (w - 1) else x for x in (a, b))
            return int(_COMPARE[pred.lstrip("su") if pred not in ("eq", "ne") else pred](a, b))
        if op == "select":
            return self(v.operands[1]) if self(v.operands[0]) else self(v.operands[2])
        a, b = (self(x) for x in v.operands)
        return _BINARY[op](a, b) & ((1 << v.type.width) - 1)


def asm_calls(fn, needle: str) -> list:
    """The calls of `fn` (an llvmlite function) to inline asm whose text contains `needle`."""
    return [i for blk in fn.blocks for i in blk.instructions
            if isinstance(i, ir.CallInstr) and needle in getattr(i.callee, "asm", "")]
