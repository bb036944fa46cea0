"""Test helper: run a TTIR kernel (generic form, no layouts) on the CPU with numpy, one program at a time, over host buffers; for comparing a module before and after a rewrite of its loops.

Covers the ops of tile kernels such as attention backward: arith / math elementwise ops,
`tt.make_range`, `tt.splat`, `tt.expand_dims`, `tt.broadcast`, `tt.trans`, `tt.addptr`, masked
`tt.load` / `tt.store`, `tt.dot` (fp64 products and sums rounded to fp32 once: the same for any
blocking of the rows), `scf.for`, `tt.ptr_to_int` / `tt.int_to_ptr`, and the opaque copies of
ttbuild.backend.ttgir.loop_fences (`tt.elementwise_inline_asm` with one of its ASM_STRINGS:
d = a). Pointers are byte addresses: argument i's buffer starts at (i + 1) << 36. Anything else
raises NotImplementedError.
"""

from __future__ import annotations

import numpy as np

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ttgir.loop_fences import ASM_STRINGS

_DT = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_, "i8": np.int8, "i16": np.int16,
       "i32": np.int32, "i64": np.int64}
_SHIFT = 36
_CMP = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal}
_BIN = {"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply, "arith.addf": np.add,
        "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide, "arith.andi": np.logical_and,
        "arith.ori": np.logical_or, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin, "arith.minsi": np.minimum,
        "arith.maxsi": np.maximum}


def _dtype(t):
    e = mu.elem_str(t)
    return np.int64 if mu.pointee(e) else _DT[e]


def _itemsize(t) -> int:
    return np.dtype(_DT[mu.pointee(mu.elem_str(t))]).itemsize


class Program:
    """One program of `module`'s kernel: `run(args, pid)` with args as numpy arrays (pointer
    parameters, written in place by stores) or scalars, pid a 3-tuple."""

    def __init__(self, module):
        self.func = next(op for op in module.body.operations if op.operation.name == "tt.func")

    def run(self, args, pid):
        block = self.func.regions[0].blocks[0]
        self.bufs = {i + 1: a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
        env = {}
        for i, (a, v) in enumerate(zip(block.arguments, args)):
            env[a] = np.int64((i + 1) << _SHIFT) if isinstance(v, np.ndarray) else np.array(v, _dtype(a.type))[()]
        self.pid = pid
        self._block(block, env)

    def _block(self, block, env):
        for op in block.operations:
            op = op.operation
            if op.name in ("tt.return", "scf.yield"):
                return [env[x] for x in op.operands]
            outs = self._op(op, env, [env[x] for x in op.operands])
            for r, o in zip(op.results, outs):
                env[r] = o
        return []

    def _op(self, op, env, ins):  # noqa: C901  (one dispatch over op names)
        name, res = op.name, list(op.results)
        t = res[0].type if res else None
        shape = mu.shape_of(t) if t is not None else ()
        if name == "scf.for":
            lb, ub, step, *carried = ins
            body = op.regions[0].blocks[0]
            for i in range(int(lb), int(ub), int(step)):
                env[body.arguments[0]] = np.int32(i)
                for a, v in zip(list(body.arguments)[1:], carried):
                    env[a] = v
                carried = self._block(body, env)
            return carried
        if name == "arith.constant":
            a = op.attributes["value"]
            if isinstance(a, mu.ir.DenseElementsAttr):
                s = a.get_splat_value()
                v = s.value if isinstance(s, mu.ir.FloatAttr) else mu.ir.IntegerAttr(s).value
                return [np.full(shape, v, _dtype(t))]
            v = a.value if isinstance(a, mu.ir.FloatAttr) else mu.ir.IntegerAttr(a).value
            return [np.array(v, _dtype(t))[()]]
        if name in _BIN:
            return [np.asarray(_BIN[name](ins[0], ins[1])).astype(_dtype(t))]
        p = mu.props(op)
        if name == "tt.get_program_id":
            return [np.int32(self.pid[mu.int_attr(p["axis"])])]
        if name in ("arith.divsi", "arith.remsi"):
            a, b = np.int64(ins[0]), np.int64(ins[1])
            q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
            return [np.asarray(q if name == "arith.divsi" else a - q * b).astype(_dtype(t))]
        if name in ("arith.extsi", "arith.truncf", "arith.extf", "arith.sitofp", "arith.trunci"):
            return [np.asarray(ins[0]).astype(_dtype(t))]
        if name == "arith.cmpi" and mu.int_attr(p["predicate"]) in _CMP:  # signed and equality predicates
            return [_CMP[mu.int_attr(p["predicate"])](ins[0], ins[1])]
        if name == "arith.select":
            return [np.where(ins[0], ins[1], ins[2]).astype(_dtype(t))]
        if name == "math.exp2":
            return [np.exp2(ins[0]).astype(_dtype(t))]
        if name == "tt.splat":
            return [np.full(shape, ins[0], _dtype(t))]
        if name == "tt.make_range":
            return [np.arange(mu.int_attr(p["start"]), mu.int_attr(p["end"]), dtype=np.int32)]
        if name == "tt.expand_dims":
            return [np.expand_dims(ins[0], mu.int_attr(p["axis"]))]
        if name == "tt.broadcast":
            return [np.broadcast_to(ins[0], shape).copy()]
        if name == "tt.trans":
            return [np.transpose(ins[0], list(mu.ir.DenseI32ArrayAttr(p["order"]))).copy()]
        if name == "tt.addptr":
            return [np.asarray(ins[0] + np.int64(ins[1]) * _itemsize(op.operands[0].type)).astype(np.int64)]
        if name in ("tt.ptr_to_int", "tt.int_to_ptr"):
            return [np.int64(ins[0])]
        if name == "tt.elementwise_inline_asm" and mu.ir.StringAttr(p["asm_string"]).value in ASM_STRINGS:
            return [ins[0]]
        if name == "tt.dot":
            acc = np.matmul(ins[0].astype(np.float64), ins[1].astype(np.float64)) + ins[2].astype(np.float64)
            return [acc.astype(_dtype(t))]
        if name == "tt.load":
            return [self._load(ins, t)]
        if name == "tt.store":
            self._store(ins, op.operands[0].type)
            return []
        raise NotImplementedError(name)

    def _where(self, addr, itemsize):
        buf = addr >> _SHIFT
        return buf, (addr & ((1 << _SHIFT) - 1)) // itemsize

    def _load(self, ins, t):
        addr = np.asarray(ins[0])
        mask = np.asarray(ins[1]) if len(ins) > 1 else np.ones(addr.shape, bool)
        out = np.full(addr.shape, ins[2] if len(ins) > 2 else 0, _dtype(t)) if addr.shape else None
        bufs, idx = self._where(addr, np.dtype(_dtype(t)).itemsize)
        if out is None:
            return self.bufs[int(bufs)][int(idx)]
        for b in np.unique(bufs[mask]):
            sel = mask & (bufs == b)
            out[sel] = self.bufs[int(b)][idx[sel]]
        return out

    def _store(self, ins, ptr_type):
        addr, val = np.asarray(ins[0]), np.asarray(ins[1])
        mask = np.asarray(ins[2]) if len(ins) > 2 else np.ones(addr.shape, bool)
        bufs, idx = self._where(addr, _itemsize(ptr_type))
        for b in np.unique(bufs[mask]):
            sel = mask & (bufs == b)
            buf = self.bufs[int(b)]
            buf[idx[sel]] = val[sel].astype(buf.dtype)
