"""A tiny numpy evaluator for straight-line TTIR (our generic-form text): enough elementwise arith/math/tt ops to run a one-program kernel on the CPU in tests.

Values are numpy arrays; integers are held unsigned (MLIR integers are signless) and each op picks
its signedness as the op's definition says. Pointers are `(buffer name, element offsets)`.
Only what the random-number and sorting tests need (one-operand tt.reduce included); anything else
raises NotImplementedError by op name.
"""

from __future__ import annotations

import re

import numpy as np

_LINE = re.compile(r'^\s*(?:(?P<res>%\w+) = )?"(?P<name>[\w.]+)"\((?P<args>[^)]*)\)'
                   r'(?: <\{(?P<props>.*)\}>)?(?: \{[^}]*\})? : \((?P<ins>.*)\) -> (?P<out>.*?) loc\(')
_UNSIGNED = {"i1": np.bool_, "i8": np.uint8, "i16": np.uint16, "i32": np.uint32, "i64": np.uint64}
_SIGNED = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}
_FLOAT = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def _elt(t: str) -> str:
    m = re.match(r"tensor<(?:\d+x)*(.*)>$", t.strip())
    return m[1] if m else t.strip()


def _shape(t: str) -> tuple[int, ...]:
    m = re.match(r"tensor<((?:\d+x)*)", t.strip())
    return tuple(int(d) for d in m[1].split("x") if d) if m else ()


def _np(elt: str):
    return _UNSIGNED.get(elt) or _FLOAT[elt]


def _scalar(lit: str, elt: str):
    if elt in _FLOAT:
        if lit.startswith("0x"):
            bits = int(lit, 16)
            return np.array(bits, np.uint32).view(np.float32).astype(_FLOAT[elt]) if elt == "f32" else \
                np.array(bits, np.uint64).view(np.float64)
        return _FLOAT[elt](float(lit))
    if elt == "i1":
        return lit == "true"
    return np.array(int(lit) & ((1 << int(elt[1:])) - 1)).astype(_UNSIGNED[elt])


def _prop(props: str, key: str) -> str:
    m = re.search(rf"\b{key} = ([^,]+(?:<[^>]*>)?[^,]*)", props or "")
    return m[1].strip() if m else ""


def _signed(a, elt):
    return a.astype(_UNSIGNED[elt]).view(_SIGNED[elt]) if elt in _SIGNED else a


def run(text: str, args: list, buffers: dict[str, np.ndarray], program_id: int | tuple = 0) -> None:
    """Evaluate the kernel in `text` on `args` (numbers, or buffer names for pointer parameters),
    writing stores into `buffers` in place."""
    head = re.search(r"\^bb0\((.*)\):", text)
    env = {}
    for (name, ty), a in zip(re.findall(r"(%\w+): ([^ ]+) loc", head[1]), args):
        env[name] = (a, np.zeros((), np.int64)) if ty.startswith("!tt.ptr") else np.array(a).astype(_np(_elt(ty)))
    lines = iter(text[head.end():].splitlines())
    for line in lines:
        red = _REDUCE.match(line)
        if red:  # a tt.reduce header: its region runs up to the line that closes it
            body = []
            for inner in lines:
                if inner.lstrip().startswith("})"):
                    break
                body.append(inner)
            env[red["res"]] = _reduce(env[red["src"]], int(red["axis"]), body, buffers, program_id)
            continue
        m = _LINE.match(line)
        if not m:
            continue
        name, props, out = m["name"], m["props"] or "", m["out"]
        ops = [env[a.strip()] for a in m["args"].split(",") if a.strip()]
        ins = [t.strip() for t in re.split(r",\s*(?![^<]*>)", m["ins"]) if t.strip()]
        r = _eval(name, props, ops, ins, out, buffers, program_id)
        if m["res"]:
            env[m["res"]] = r


_REDUCE = re.compile(r'^\s*(?P<res>%\w+) = "tt.reduce"\((?P<src>%\w+)\) <\{axis = (?P<axis>\d+) : i32\}> \(\{$')


def _reduce(x, axis: int, body: list[str], buffers, program_id):
    """One-operand tt.reduce: fold the combine region over the slices along `axis`, in order."""
    lhs, rhs = re.findall(r"(%\w+): ", body[0])[:2]

    def combine(a, b):
        env = {lhs: a, rhs: b}
        for line in body[1:]:
            m = _LINE.match(line)
            if m["name"] == "tt.reduce.return":
                return env[m["args"].strip()]
            ins = [t.strip() for t in re.split(r",\s*(?![^<]*>)", m["ins"]) if t.strip()]
            env[m["res"]] = _eval(m["name"], m["props"] or "", [env[a.strip()] for a in m["args"].split(",")],
                                  ins, m["out"], buffers, program_id)
        raise NotImplementedError("tt.reduce region without tt.reduce.return")

    acc = np.take(x, 0, axis)
    for k in range(1, x.shape[axis]):
        acc = combine(acc, np.take(x, k, axis))
    return acc


_MINMAX = {"arith.maxsi": (np.maximum, True), "arith.minsi": (np.minimum, True), "arith.maxui": (np.maximum, False),
           "arith.minui": (np.minimum, False)}
_BIN = {"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply, "arith.xori": np.bitwise_xor,
        "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.addf": np.add, "arith.subf": np.subtract,
        "arith.mulf": np.multiply, "arith.divf": np.divide, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
        "arith.maximumf": np.maximum, "arith.minimumf": np.minimum}
_MATH = {"math.log": np.log, "math.sqrt": np.sqrt, "math.cos": np.cos, "math.sin": np.sin, "math.exp": np.exp}


def _eval(name, props, ops, ins, out, buffers, program_id):
    elt, shape = _elt(out), _shape(out)
    with np.errstate(over="ignore"):
        if name == "arith.constant":
            lit = _prop(props, "value")
            dense = re.match(r"dense<(.*)> : (.*)", lit)
            if dense:
                return np.full(shape, _scalar(dense[1], elt))
            return np.array(_scalar(lit.split(" : ")[0], elt))
        if name == "tt.get_program_id":
            if isinstance(program_id, tuple):  # one id per grid axis
                axis = int(re.search(r"axis = (\d+)", props).group(1))
                return np.array(program_id[axis] if axis < len(program_id) else 0, np.uint32)
            return np.array(program_id, np.uint32)
        if name == "tt.make_range":
            start, end = (int(_prop(props, k).split(" : ")[0]) for k in ("start", "end"))
            return np.arange(start, end, dtype=np.uint32)
        if name in ("tt.splat", "tt.broadcast"):
            v = ops[0]
            return (v[0], np.broadcast_to(v[1], shape)) if isinstance(v, tuple) else np.broadcast_to(v, shape).copy()
        if name == "tt.expand_dims":
            axis = int(_prop(props, "axis").split(" : ")[0])
            v = ops[0]
            return (v[0], np.expand_dims(v[1], axis)) if isinstance(v, tuple) else np.expand_dims(v, axis)
        if name == "tt.reshape":
            return ops[0].reshape(shape)
        if name in _MINMAX:
            f, signed = _MINMAX[name]
            a, b = (_signed(o, elt) if signed else o for o in ops)
            return f(a, b).astype(_np(elt))
        if name in _BIN:
            return _BIN[name](ops[0], ops[1]).astype(ops[0].dtype)
        if name in _MATH:
            return _MATH[name](ops[0]).astype(ops[0].dtype)
        if name in ("arith.shrui", "arith.shrsi", "arith.shli"):
            src = _elt(ins[0])
            a = _signed(ops[0], src) if name == "arith.shrsi" else ops[0]
            f = np.left_shift if name == "arith.shli" else np.right_shift
            return f(a, ops[1].astype(a.dtype)).astype(_UNSIGNED[src])
        if name == "tt.mulhiui":
            bits = int(elt[1:])
            wide = ops[0].astype(object) * ops[1].astype(object)
            return np.vectorize(lambda x: x >> bits, otypes=[object])(wide).astype(_UNSIGNED[elt])
        if name == "arith.extsi":
            return _signed(ops[0], _elt(ins[0])).astype(_SIGNED[elt]).view(_UNSIGNED[elt])
        if name in ("arith.extui", "arith.trunci"):
            return ops[0].astype(_UNSIGNED[elt])
        if name == "arith.sitofp":
            return _signed(ops[0], _elt(ins[0])).astype(_FLOAT[elt])
        if name == "arith.cmpi":
            pred = int(_prop(props, "predicate").split(" : ")[0])
            a, b = ops
            if pred in (2, 3, 4, 5):
                a, b = _signed(a, _elt(ins[0])), _signed(b, _elt(ins[0]))
            f = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
                 np.less, np.less_equal, np.greater, np.greater_equal][pred]
            return f(a, b)
        if name == "arith.cmpf":
            pred = int(_prop(props, "predicate").split(" : ")[0])
            f = {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal, 13: np.not_equal}[pred]
            return f(*ops)
        if name == "arith.select":
            return np.where(*ops)
        if name == "tt.bitcast":
            return ops[0].view(_np(elt)) if elt in _FLOAT or _elt(ins[0]) in _FLOAT else ops[0]
        if name == "tt.addptr":
            buf, off = ops[0]
            return buf, off + _signed(ops[1], _elt(ins[1])).astype(np.int64)
        if name == "tt.load":
            (buf, off), src = ops[0], buffers[ops[0][0]]
            mask = ops[1] if len(ops) > 1 else np.ones(off.shape, bool)
            other = ops[2] if len(ops) > 2 else np.zeros(off.shape, src.dtype)
            return np.where(mask, src[np.where(mask, off, 0)], other)
        if name == "tt.store":
            (buf, off), v = ops[0], ops[1]
            mask = ops[2] if len(ops) > 2 else np.ones(off.shape, bool)
            target = buffers[buf]
            target[off[mask]] = v[mask].view(target.dtype) if v.dtype.itemsize == target.dtype.itemsize \
                else v[mask].astype(target.dtype)
            return None
        if name == "tt.return":
            return None
    raise NotImplementedError(name)


def f32_bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)

