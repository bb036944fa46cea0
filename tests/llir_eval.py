"""Test helper: evaluate the integer values of an unoptimized llvmlite kernel for one thread of one program (addresses and predicates the LLIR computes), and find its inline-asm calls. `Cta` evaluates values across the threads of one program: warp shuffles and shared memory (straight-line kernels, the values a load sees are the last ones stored before it)."""

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


_SIGNED = {"sdiv": lambda a, b: int(a / b), "srem": lambda a, b: a - int(a / b) * b, "ashr": lambda a, b: a >> b}


def _signed(x: int, w: int) -> int:
    return x - (1 << w) if x >> (w - 1) & 1 else x


class _Thread(Eval):
    """One thread of a `Cta`: integer values as `Eval`, plus `llvm.nvvm.shfl.sync.{bfly,idx}.i32`
    (the source lane's value), loads of shared memory (`Cta.load`), signed division and shifts."""

    def __init__(self, cta: "Cta", tid: int):
        super().__init__(dict(cta.sregs, **{"tid.x": tid}), cta.args)
        self.cta, self.tid = cta, tid

    def _eval(self, v) -> int:
        op = getattr(v, "opname", None)
        if op == "call" and getattr(v.callee, "name", "").startswith("llvm.nvvm.shfl.sync."):
            mode = v.callee.name.split(".")[4]
            _, val, b, c = v.args
            assert self(c) == 0x1F, "only whole-warp shuffles"
            lane = self.tid % 32
            src = (lane ^ self(b)) if mode == "bfly" else self(b) & 31
            assert mode in ("bfly", "idx"), mode
            return self.cta.thread(self.tid - lane + src)(val)
        if op == "load" and v.operands[0].type.addrspace == 3:
            return self.cta.load(self(v.operands[0]), v)
        if op in _SIGNED:
            w = v.type.width
            a, b = (_signed(self(x), w) for x in v.operands)
            return _SIGNED[op](a, b) & ((1 << w) - 1)
        return super()._eval(v)


class Cta:
    """`Cta(fn, threads)`: the values of `fn` (an unoptimized llvmlite function) on each thread of
    one program: `cta.thread(tid)(value) -> int`. Shared memory: a load returns what the last store
    to its address before it (in the order of `fn`'s blocks) wrote, from whichever threads reach
    that store (blocks entered through conditional branches on evaluated predicates; no loops);
    threads that write one address at one store must agree (what a barrier-ordered program
    stores)."""

    def __init__(self, fn, threads: int, sregs: dict | None = None, args: dict | None = None):
        self.fn, self.threads = fn, threads
        self.sregs = {"ctaid.x": 0, "ctaid.y": 0, "ctaid.z": 0, "nctaid.x": 1, "nctaid.y": 1, "nctaid.z": 1,
                      **(sregs or {})}
        self.args = args or {}
        self._threads: dict[int, _Thread] = {}
        self._order = {id(i): n for n, i in enumerate(i for blk in fn.blocks for i in blk.instructions)}
        self._preds: dict = {}
        for blk in fn.blocks:
            term = blk.instructions[-1]
            for target in term.operands:
                if isinstance(target, ir.Block):
                    self._preds.setdefault(id(target), []).append((blk, term))
        self._stores = [i for blk in fn.blocks for i in blk.instructions
                        if i.opname == "store" and i.operands[1].type.addrspace == 3]
        self._written: dict = {}

    def thread(self, tid: int) -> _Thread:
        if tid not in self._threads:
            self._threads[tid] = _Thread(self, tid)
        return self._threads[tid]

    def reaches(self, blk, tid: int) -> bool:
        if blk is self.fn.blocks[0]:
            return True
        ok = False
        for pred, term in self._preds.get(id(blk), []):
            if term.opname == "br" and len(term.operands) == 3:  # br i1 %c, %then, %else
                cond = self.thread(tid)(term.operands[0])
                if (term.operands[1] is blk) != bool(cond) and term.operands[2] is not term.operands[1]:
                    continue
            ok = ok or self.reaches(pred, tid)
        return ok

    def _stored(self, store) -> dict:
        """{address: value} a store writes over all threads that reach it."""
        if id(store) not in self._written:
            out: dict = {}
            for tid in range(self.threads):
                if self.reaches(store.parent, tid):
                    t = self.thread(tid)
                    addr, val = t(store.operands[1]), t(store.operands[0])
                    assert out.setdefault(addr, val) == val, f"threads store different values at {addr}"
            self._written[id(store)] = out
        return self._written[id(store)]

    def load(self, addr: int, load) -> int:
        before = [s for s in self._stores if self._order[id(s)] < self._order[id(load)]]
        for s in reversed(before):
            got = self._stored(s)
            if addr in got:
                return got[addr]
        raise AssertionError(f"shared-memory load of {addr} before any store to it")


def asm_calls(fn, needle: str) -> list:
    """The calls of `fn` (an llvmlite function) to inline asm whose text contains `needle`."""
    return [i for blk in fn.blocks for i in blk.instructions
            if isinstance(i, ir.CallInstr) and needle in getattr(i.callee, "asm", "")]
