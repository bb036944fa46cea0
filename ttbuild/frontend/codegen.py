"""The AST visitor behind the ttir stage: lowers the canonical kernel description to TTIR text, one `visit_<Node>` per construct.

Names resolve in order: local scope, parameters, constexpr globals, import aliases. `tl.*` calls go
through `builtins.BUILTINS`; calls to other `@jit` functions are inlined. Constructs Triton does
not support in kernels (with, try, lambda, nested def, ...) raise CompilationError at the node.
"""

from __future__ import annotations

import ast
from typing import Any

from ttbuild.errors import CompilationError

from . import builtins as B
from . import semantic as S
from . import types as T
from .astjson import decode
from .irtext import IRBuilder, Value
from .semantic import Constexpr, Ctx, fail

LANG = ("triton.language", "ttbuild.language")
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}
_UNSUPPORTED = {
    ast.With: "`with` statements", ast.AsyncWith: "`async with`", ast.Try: "`try` statements",
    ast.Lambda: "lambda expressions", ast.Break: "`break`", ast.Continue: "`continue`",
    ast.FunctionDef: "nested function definitions", ast.AsyncFunctionDef: "nested function definitions",
    ast.ClassDef: "class definitions", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`", ast.Import: "imports inside a kernel", ast.ImportFrom: "imports inside a kernel",
    ast.Raise: "`raise`", ast.While: "`while` loops", ast.ListComp: "list comprehensions",
    ast.DictComp: "dict comprehensions", ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions", ast.Yield: "`yield`", ast.Await: "`await`",
    ast.NamedExpr: "`:=`", ast.Starred: "`*` unpacking", ast.Dict: "dict literals", ast.Set: "set literals",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "`try` statements"


class ModuleRef:
    """A module seen through an import alias, e.g. `tl` → `triton.language`."""

    def __init__(self, name: str):
        self.name = name


class FuncRef:
    """A callable: a builtin (`qual` under triton.language), another @jit function, or a Python builtin."""

    def __init__(self, kind: str, name: str):
        self.kind, self.name = kind, name


class _Return(Exception):
    """Unwinds a `return` to the inlined call (or the kernel) it leaves."""

    def __init__(self, value, node_id=None):
        self.value = value
        self.node_id = node_id


_PY_BUILTINS = {"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance"}


class CodeGen(ast.NodeVisitor):
    """Lower one kernel (and everything it calls) into a TTIR module (generic MLIR text)."""

    def __init__(self, desc: dict, signature: list[str], constexprs: dict[str, Any]):
        self.desc = desc
        self.functions = {name: (f["params"], decode(f["body"])) for name, f in desc["functions"].items()}
        self.globals = desc.get("globals", {})
        self.imports = desc.get("imports", {})
        self.signature = signature
        self.constexprs = dict(constexprs)
        self.b = IRBuilder()
        self.cx = Ctx(self.b)
        self.scope: dict[str, Any] = {}
        self.depth = 0

    # -- driver ---------------------------------------------------------------------------

    def generate(self) -> str:
        kernel = self.desc["kernel"]
        params, fn = self.functions[kernel]
        self.b.loc = fn._id
        runtime, types, attrs, locs = [], [], [], []
        args_nodes = fn.args.posonlyargs + fn.args.args
        if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
            fail(self.cx, "kernels take positional parameters only (no *args, **kwargs or keyword-only)")
        defaults = _default_nodes(fn)
        for p, node in zip(params, args_nodes):
            if self._param_is_constexpr(p):
                if p["name"] in self.constexprs:
                    self.scope[p["name"]] = Constexpr(self._constexpr_value(self.constexprs[p["name"]]))
                elif p["name"] in defaults:
                    self.b.loc = defaults[p["name"]]._id
                    self.scope[p["name"]] = self.visit(defaults[p["name"]])
                else:
                    self.b.loc = node._id
                    fail(self.cx, f"constexpr parameter {p['name']!r} has no value: give it in the variant's constexprs")
            else:
                runtime.append((p, node))
        unknown = set(self.constexprs) - {p["name"] for p in params}
        if unknown:
            fail(self.cx, f"constexprs name no parameter of {kernel}: {', '.join(sorted(unknown))}")
        if len(runtime) != len(self.signature):
            names = ", ".join(p["name"] for p, _ in runtime)
            fail(self.cx, f"signature has {len(self.signature)} entries but {kernel} has {len(runtime)} "
                          f"non-constexpr parameters ({names})")
        args = []
        for (p, node), entry in zip(runtime, self.signature):
            try:
                sig = T.parse_signature_entry(entry)
            except ValueError as e:
                self.b.loc = node._id
                fail(self.cx, str(e))
            v = self.b.fresh(sig.type)
            args.append(v)
            types.append(sig.type.mlir)
            attrs.append(f"{{tt.divisibility = {sig.divisibility} : i32}}" if sig.divisibility > 1 else "{}")
            locs.append(f'loc("n{node._id}")')
            self.scope[p["name"]] = v
        self.b.open_block()
        try:
            self.visit_body(fn.body)
        except _Return:
            pass  # a `return` at kernel level ends it (one inside runtime control flow is rejected)
        self.b.loc = fn._id
        self.b.op("tt.return", [], [])
        region = self.b.close_block(args, locs)
        props = (f'arg_attrs = [{", ".join(attrs)}], function_type = ({", ".join(types)}) -> (), '
                 f'sym_name = "{kernel}", sym_visibility = "public"')
        return ('"builtin.module"() ({\n"tt.func"() <{' + props + '}> (' + region + f') : () -> () loc("n{fn._id}")\n'
                "}) : () -> () loc(unknown)\n")

    def _constexpr_value(self, v):
        if isinstance(v, str) and v in T.DTYPES:
            return T.DTYPES[v]
        return v

    def _param_is_constexpr(self, p, kernel: bool = True) -> bool:
        """Kernel parameters are constexpr when annotated or named in the variant's constexprs;
        helper parameters only when annotated."""
        if kernel and p["name"] in self.constexprs:
            return True
        ann = p["annotation"]
        if not ann:
            return False
        head, _, rest = ann.partition(".")
        full = (self.imports.get(head, head) + ("." + rest if rest else ""))
        return full in {f"{m}.constexpr" for m in LANG}

    # -- statements -----------------------------------------------------------------------

    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.visit(s)

    def visit(self, node):
        if type(node) in _UNSUPPORTED:
            self.b.loc = getattr(node, "_id", self.b.loc)
            fail(self.cx, f"{_UNSUPPORTED[type(node)]} are not supported in Triton kernels"
                 if _UNSUPPORTED[type(node)].endswith("s") else
                 f"{_UNSUPPORTED[type(node)]} is not supported in Triton kernels")
        saved = self.b.loc
        if getattr(node, "_id", None) is not None:
            self.b.loc = node._id
        try:
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method is None:
                fail(self.cx, f"unsupported Python construct in a kernel: {type(node).__name__}")
            return method(node)
        finally:
            self.b.loc = saved

    def visit_Pass(self, node):
        pass

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a string statement is a comment
        self.visit(node.value)

    def _assign(self, target, value):
        if isinstance(target, ast.Name):
            if isinstance(value, (ModuleRef, FuncRef)) or value is None:
                fail(self.cx, f"cannot assign {type(value).__name__} to {target.id!r}")
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value.value if isinstance(value, Constexpr) and isinstance(value.value, tuple) else value
            if not isinstance(items, tuple) or len(items) != len(target.elts):
                fail(self.cx, f"cannot unpack into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self._assign(t, v if isinstance(v, (Value, Constexpr)) else Constexpr(v))
        else:
            fail(self.cx, f"unsupported assignment target: {type(target).__name__}")

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for t in node.targets:
            self._assign(t, value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.visit(node.value)
        self._assign(node.target, value)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            fail(self.cx, "augmented assignment needs a plain name")
        cur = self.load_name(node.target.id, node.target)
        self.scope[node.target.id] = S.binary(self.cx, _BINOPS[type(node.op)], cur, self.visit(node.value))

    def visit_Return(self, node):
        if self.depth == 0:
            if node.value is not None:
                fail(self.cx, "a kernel cannot return a value")
            raise _Return(None, node._id)
        raise _Return(self.visit(node.value) if node.value is not None else Constexpr(None), node._id)

    def visit_Assert(self, node):
        test = self.visit(node.test)
        if isinstance(test, Constexpr):
            if not test.value:
                msg = self.visit(node.msg).value if node.msg is not None else ""
                fail(self.cx, f"assertion failed: {msg}")
            return
        fail(self.cx, "assert on a runtime value is not supported yet (use tl.device_assert)")

    # control flow lives in controlflow.py (mixin below)

    # -- expressions ----------------------------------------------------------------------

    def visit_Constant(self, node):
        return Constexpr(node.value)

    def visit_Tuple(self, node):
        items = tuple(self.visit(e) for e in node.elts)
        if all(isinstance(i, Constexpr) for i in items):
            return Constexpr(tuple(i.value for i in items))
        return items

    visit_List = visit_Tuple

    def load_name(self, name: str, node):
        if name in self.scope:
            return self.scope[name]
        if name in self.globals:
            return Constexpr(self.globals[name]["value"] if not isinstance(self.globals[name]["value"], list)
                             else tuple(self.globals[name]["value"]))
        if name in self.functions:
            return FuncRef("jit", name)
        if name in self.imports:
            full = self.imports[name]
            return self._resolve_qualified(full, node)
        if name in _PY_BUILTINS:
            return FuncRef("py", name)
        if name in ("True", "False", "None"):
            return Constexpr({"True": True, "False": False, "None": None}[name])
        fail(self.cx, f"undefined name {name!r}")

    def _resolve_qualified(self, full: str, node):
        for lang in LANG:
            if full == lang:
                return ModuleRef(full)
            if full.startswith(lang + "."):
                return self._lang_attr(full[len(lang) + 1:], node)
        if full in B.ALIASES:
            return FuncRef("builtin", B.ALIASES[full])
        return ModuleRef(full)

    def _lang_attr(self, attr: str, node):
        """`tl.<attr>`: a dtype, a builtin, a submodule (`tl.math`), or an error naming the attr."""
        dt = _DTYPE_ATTRS.get(attr)
        if dt is not None:
            return Constexpr(T.DTYPES[dt])
        if attr in B.BUILTINS:
            return FuncRef("builtin", attr)
        if attr in ("math", "extra", "extra.cuda", "extra.libdevice"):
            return ModuleRef("triton.language." + attr)
        if attr.startswith(("math.", "extra.cuda.libdevice.", "extra.libdevice.")):
            short = "math." + attr.rsplit(".", 1)[1]
            if short in B.BUILTINS:
                return FuncRef("builtin", short)
        if attr in ("constexpr", "range", "static_range"):
            return FuncRef("py", "tl." + attr)
        from ttbuild import language
        known = set(language.BUILTIN_NAMES) | {f"math.{n}" for n in language.math.MATH_NAMES}
        if attr in known:
            fail(self.cx, f"tl.{attr} is not supported yet by the ttbuild frontend", cls=_not_supported(attr))
        fail(self.cx, f"unknown function or attribute tl.{attr}")

    def visit_Name(self, node):
        return self.load_name(node.id, node)

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        if isinstance(base, ModuleRef):
            return self._resolve_qualified(base.name + "." + node.attr, node)
        if isinstance(base, Value):
            if node.attr == "dtype":
                st = base.type.scalar
                return Constexpr(st)
            if node.attr == "shape":
                return Constexpr(tuple(base.type.shape))
            if node.attr == "T" and len(base.type.shape) == 2:
                fail(self.cx, "transpose (.T) is not supported yet")
            if node.attr in B.METHODS or node.attr in B.BUILTINS:
                return ("method", base, node.attr)
            fail(self.cx, f"tensor has no attribute {node.attr!r}")
        if isinstance(base, Constexpr):
            if isinstance(base.value, T.DType):
                return self._dtype_attr(base.value, node.attr)
            if node.attr == "value":
                return base
        fail(self.cx, f"unsupported attribute access .{node.attr} on {S._describe(base)}")

    def _dtype_attr(self, dt: T.DType, attr: str):
        probes = {"is_floating": dt.is_float(), "is_int": dt.is_int(), "is_int_signed": dt.is_signed(),
                  "is_int_unsigned": dt.is_unsigned(), "is_fp16": dt == T.fp16, "is_bf16": dt == T.bf16,
                  "is_fp32": dt == T.fp32, "is_fp64": dt == T.fp64}
        if attr == "primitive_bitwidth":
            return Constexpr(dt.bits)
        if attr in probes:
            return ("const_method", probes[attr])
        fail(self.cx, f"dtype has no attribute {attr!r}")

    def visit_BinOp(self, node):
        return S.binary(self.cx, _BINOPS[type(node.op)], self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node):
        return S.unary(self.cx, _UNARY[type(node.op)], self.visit(node.operand))

    def visit_Compare(self, node):
        if len(node.ops) != 1:
            fail(self.cx, "chained comparisons (a < b < c) are not supported; split them with `&`")
        op = node.ops[0]
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        if type(op) in (ast.Is, ast.IsNot):
            if not (isinstance(lhs, Constexpr) and isinstance(rhs, Constexpr)):
                fail(self.cx, "`is` compares constexprs only")
            same = lhs.value is rhs.value or lhs.value == rhs.value and rhs.value is None
            return Constexpr(same if type(op) is ast.Is else not same)
        if type(op) not in _CMPOPS:
            fail(self.cx, f"unsupported comparison {type(op).__name__}")
        return S.binary(self.cx, _CMPOPS[type(op)], lhs, rhs)

    def visit_BoolOp(self, node):
        values = [self.visit(v) for v in node.values]
        if all(isinstance(v, Constexpr) for v in values):
            out = values[0].value
            for v in values[1:]:
                out = (out and v.value) if isinstance(node.op, ast.And) else (out or v.value)
            return Constexpr(out)
        # Triton lowers `and`/`or` on runtime values as logical & / | of booleans.
        acc = values[0]
        for v in values[1:]:
            a = S.cast(self.cx, B.tensor(self.cx, acc, "operand"), T.int1)
            c = S.cast(self.cx, B.tensor(self.cx, v, "operand"), T.int1)
            acc = S.binary(self.cx, "&" if isinstance(node.op, ast.And) else "|", a, c)
        return acc

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Constexpr):
            return self.visit(node.body if cond.value else node.orelse)
        return B.where(self.cx, cond, self.visit(node.body), self.visit(node.orelse))

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            x = self.visit(v.value) if isinstance(v, ast.FormattedValue) else self.visit(v)
            if not isinstance(x, Constexpr):
                fail(self.cx, "f-strings may only format constexprs")
            parts.append(str(x.value))
        return Constexpr("".join(parts))

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        idx = node.slice
        items = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        if isinstance(base, Constexpr):
            key = self.visit(idx)
            if not isinstance(key, Constexpr):
                fail(self.cx, "indexing a constexpr needs a constexpr index")
            try:
                return Constexpr(base.value[key.value])
            except Exception as e:  # noqa: BLE001
                fail(self.cx, f"cannot index {base.value!r} with {key.value!r}: {e}")
        if isinstance(base, tuple):
            key = self.visit(idx)
            return base[key.value]
        if not isinstance(base, Value):
            fail(self.cx, f"cannot index {S._describe(base)}")
        # x[:, None]: full slices keep a dim, None inserts a size-1 dim (Triton `tensor.__getitem__`).
        dim, v = 0, base
        for it in items:
            if isinstance(it, ast.Slice) and it.lower is None and it.upper is None and it.step is None:
                dim += 1
            elif isinstance(it, ast.Constant) and it.value is None:
                v = S.expand_dims(self.cx, v, dim)
                dim += 1
            else:
                fail(self.cx, "only `:` and `None` are supported when indexing a tensor")
        return v

    def visit_Call(self, node):
        fn = self.visit(node.func)
        args = [self.visit(a) for a in node.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        if None in kwargs:
            fail(self.cx, "`**kwargs` in a call is not supported")
        if isinstance(fn, tuple) and fn[0] == "method":
            _, obj, name = fn
            rule = B.METHODS.get(name) or B.BUILTINS[name]
            return B.call(self.cx, rule, name, [obj] + args, kwargs)
        if isinstance(fn, tuple) and fn[0] == "const_method":
            return Constexpr(fn[1])
        if isinstance(fn, FuncRef):
            if fn.kind == "builtin":
                return B.call(self.cx, B.BUILTINS[fn.name], fn.name, args, kwargs)
            if fn.kind == "jit":
                return self.inline(fn.name, args, kwargs)
            return self.py_builtin(fn.name, args, kwargs)
        if isinstance(fn, ModuleRef):
            fail(self.cx, f"{fn.name} is a module, not a function")
        fail(self.cx, f"cannot call {S._describe(fn)}")

    def py_builtin(self, name, args, kwargs):
        if name in ("tl.constexpr",):
            return args[0] if isinstance(args[0], Constexpr) else fail(self.cx, "tl.constexpr() needs a constant")
        if name in ("range", "tl.range", "tl.static_range"):
            fail(self.cx, f"{name}() is only supported as the iterable of a for loop")
        if not all(isinstance(a, Constexpr) for a in args):
            if name in ("min", "max") and len(args) == 2:
                return B._minmax(self.cx, args[0], args[1], name == "max")
            fail(self.cx, f"Python builtin {name}() needs constexpr arguments in a kernel")
        vals = [a.value for a in args]
        try:
            if name == "print":
                return Constexpr(None)
            if name == "isinstance":
                fail(self.cx, "isinstance() is not supported in kernels")
            return Constexpr({"min": min, "max": max, "len": len, "int": int, "float": float,
                              "bool": bool, "abs": abs}[name](*vals))
        except CompilationError:
            raise
        except Exception as e:  # noqa: BLE001
            fail(self.cx, f"{name}{tuple(vals)} failed: {e}")

    def inline(self, name, args, kwargs):
        """Inline a call to another @jit function: bind arguments, lower its body in a new scope."""
        params, fn = self.functions[name]
        if self.depth > 32:
            fail(self.cx, f"@jit call depth exceeds 32 (recursion through {name}?)")
        names = [p["name"] for p in params]
        if len(args) > len(names):
            fail(self.cx, f"{name}() takes {len(names)} arguments but {len(args)} were given")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                fail(self.cx, f"{name}() got an unexpected or repeated argument {k!r}")
            bound[k] = v
        defaults = _default_nodes(fn)
        for p in params:
            if p["name"] not in bound:
                if p["name"] not in defaults:
                    fail(self.cx, f"{name}() missing argument {p['name']!r}")
                # Defaults evaluate in the callee's module scope, not the caller's locals.
                saved, self.scope = self.scope, {}
                try:
                    bound[p["name"]] = self.visit(defaults[p["name"]])
                finally:
                    self.scope = saved
            if self._param_is_constexpr(p, kernel=False) and not isinstance(bound[p["name"]], Constexpr):
                fail(self.cx, f"argument {p['name']!r} of {name}() is constexpr but got a runtime value")
        saved_scope, self.scope = self.scope, bound
        self.depth += 1
        try:
            self.visit_body(fn.body)
            result = Constexpr(None)
        except _Return as r:
            result = r.value
        finally:
            self.scope = saved_scope
            self.depth -= 1
        return result


def _not_supported(attr: str):
    """A CompilationError subclass for a real `tl` function the frontend cannot lower yet
    (NotSupportedYet's own constructor wants a Loc, which the ttir stage does not have)."""
    from ttbuild.errors import NotSupportedYet

    class FrontendNotSupported(NotSupportedYet):
        def __init__(self, message, loc=None, *, stage=None, node_id=None):
            CompilationError.__init__(self, message, loc, stage=stage, node_id=node_id)
            self.op = f"tl.{attr}"
    return FrontendNotSupported


def _default_nodes(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """Parameter name → its default's AST node (defaults align with the last parameters)."""
    args = fn.args.posonlyargs + fn.args.args
    return {a.arg: d for a, d in zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults)}


_DTYPE_ATTRS = {"int1": "int1", "bool": "int1", "int8": "int8", "int16": "int16", "int32": "int32",
                "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
                "uint64": "uint64", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
                "float64": "fp64", "float8e4nv": "fp8e4nv", "float8e5": "fp8e5"}


def generate(desc: dict, signature: list[str], constexprs: dict[str, Any]) -> str:
    """TTIR text (generic MLIR, not yet verified) for `desc["kernel"]`."""
    from .controlflow import ControlFlow

    class Gen(ControlFlow, CodeGen):
        pass

    gen = Gen(desc, signature, constexprs)
    try:
        return gen.generate()
    except _Return:
        raise
