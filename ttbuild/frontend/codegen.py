"""The AST visitor behind the ttir stage: lowers the canonical kernel description to TTIR text, one `visit_<Node>` per construct.

Names resolve in order: local scope, parameters, constexpr globals, import aliases. `tl.*` calls go
through `builtin_table.BUILTINS`; calls to other `@jit` functions are inlined. Constructs Triton does
not support in kernels (with, try, lambda, nested def, ...) raise CompilationError at the node.
"""

from __future__ import annotations

import ast
from typing import Any

from ttbuild import cxvalue, tma
from ttbuild.errors import CompilationError
from ttbuild.signature import DTYPE_BYTES, SignatureError, parse_entry

from . import abi, tensordesc
from . import semantic as S
from . import types as T
from .astjson import decode
from .controlflow import ControlFlow
from .expressions import BINOPS, LANG, Expressions, FuncRef, ModuleRef, ReturnValue, default_nodes
from .irtext import IRBuilder, Positions, Value
from .semantic import Constexpr, Ctx, fail

_UNSUPPORTED = {
    ast.With: "`with` statements", ast.AsyncWith: "`async with`", ast.Try: "`try` statements",
    ast.Lambda: "lambda expressions", ast.Break: "`break`", ast.Continue: "`continue`",
    ast.FunctionDef: "nested function definitions", ast.AsyncFunctionDef: "nested function definitions",
    ast.ClassDef: "class definitions", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
    ast.Delete: "`del`", ast.Import: "imports inside a kernel", ast.ImportFrom: "imports inside a kernel",
    ast.Raise: "`raise`", ast.ListComp: "list comprehensions",
    ast.DictComp: "dict comprehensions", ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions", ast.Yield: "`yield`", ast.Await: "`await`",
    ast.NamedExpr: "`:=`", ast.Starred: "`*` unpacking", ast.Dict: "dict literals", ast.Set: "set literals",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "`try` statements"


def _deepest_node_id(data) -> int | None:
    """The `_id` of the most deeply nested numbered node of encoded ASTs (an iterative walk: the
    recursive one is what failed)."""
    best, best_depth = None, -1
    stack = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if "_id" in item and depth > best_depth:
                best, best_depth = item["_id"], depth
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return best


class CodeGen(ControlFlow, Expressions, ast.NodeVisitor):
    """Lower one kernel (and everything it calls) into a TTIR module (generic MLIR text)."""

    def __init__(self, desc: dict, signature: list[str], constexprs: dict[str, Any], *,
                 debug: bool = False, loc_table: dict | None = None, tma: bool = False):
        self.desc = desc
        self.tma = tma  # descriptor parameters eligible for TMA take a tensormap (ttbuild.tma)
        try:
            self.functions = {name: (f["params"], decode(f["body"])) for name, f in desc["functions"].items()}
        except RecursionError:
            err = CompilationError("expression nested too deeply to compile (Python's recursion limit): "
                                   "split it into smaller expressions with intermediate variables",
                                   stage="ttir")
            err.node_id = _deepest_node_id(desc["functions"])
            raise err from None
        self.globals = desc.get("globals", {})
        self.imports = desc.get("imports", {})
        self.signature = signature
        self.constexprs = dict(constexprs)
        self.b = IRBuilder(Positions(loc_table) if debug and loc_table else None)
        self.cx = Ctx(self.b, self._call_value, debug, tma)
        self.scope: dict[str, Any] = {}
        self.depth = 0
        self.loops = 0  # enclosing runtime loops: an early return there stays an error
        # the kernel ABI as generate() emits it (ttbuild.frontend.abi): parameter name -> its entries
        self._abi: dict[str, list[dict]] = {}
        self.abi = b""  # abi.record() of the kernel, set by generate()

    # -- driver ---------------------------------------------------------------------------

    def generate(self) -> str:
        """The kernel's TTIR module as MLIR generic text: its runtime parameters as block arguments (tt.divisibility
        from the signature), constexprs bound, the body lowered statement by statement, a tt.return, and the TMA
        records of descriptor parameters as a module attribute; `self.abi` is set to the ABI those arguments
        make (ttbuild.frontend.abi.record). Fails (CompileError at the node) for *args / **kwargs, unknown
        constexprs or a signature that does not match the parameters."""
        kernel = self.desc["kernel"]
        params, fn = self.functions[kernel]
        self.b.loc = fn._id
        args_nodes = fn.args.posonlyargs + fn.args.args
        if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
            fail(self.cx, "kernels take positional parameters only (no *args, **kwargs or keyword-only)")
        defaults = default_nodes(fn)
        runtime = self._bind_constexprs(params, args_nodes, defaults)
        unknown = set(self.constexprs) - {p["name"] for p in params}
        if unknown:
            fail(self.cx, f"constexprs name no parameter of {kernel}: {', '.join(sorted(unknown))}")
        if len(runtime) != len(self.signature):
            names = ", ".join(p["name"] for p, _ in runtime)
            fail(self.cx, f"signature has {len(self.signature)} entries but {kernel} has {len(runtime)} "
                          f"non-constexpr parameters ({names})")
        args, types, attrs, locs, descriptors = self._kernel_args(runtime)
        # the kernel ABI: what these block arguments (and the constexprs bound above) are, in parameter order
        self.abi = abi.record([e for p in params for e in self._abi[p["name"]]],
                              [abi.descriptor(name, sig, tmap is not None) for name, sig, _, _, tmap in descriptors])
        self.b.open_block()
        for name, sig, vals, node, tmap in descriptors:  # its shape widened to i64 inside the body
            self.b.loc = node._id
            self.scope[name] = tensordesc.from_parameter(self.cx, sig, vals, tmap)
        try:
            self.visit_body(fn.body)
        except ReturnValue:
            pass  # a `return` at kernel level ends it (one inside runtime control flow is rejected)
        self.b.loc = fn._id
        self.b.op("tt.return", [], [])
        region = self.b.close_block(args, locs)
        props = (f'arg_attrs = [{", ".join(attrs)}], function_type = ({", ".join(types)}) -> (), '
                 f'sym_name = "{kernel}", sym_visibility = "public"')
        # per descriptor parameter: null (pointer form) or its TMA record, filled in by the ttgir stage
        records = [None if tmap is None else {"swizzle": 0, "box": list(sig.block_shape)}
                   for _, sig, _, _, tmap in descriptors]
        mattrs = ""
        if any(records):
            mattrs = " {" + tma.MODULE_ATTR + ' = "' + tma.encode_attr(records) + '"}'
        return ('"builtin.module"() ({\n"tt.func"() <{' + props + '}> (' + region + f') : () -> () {self.b.loc_of(fn._id)}\n'
                "})" + mattrs + " : () -> () loc(unknown)\n")

    def _bind_constexprs(self, params, args_nodes, defaults) -> list:
        """Bind each constexpr parameter in scope (the variant's value, else its default evaluated
        as Triton does); returns the runtime parameters as (param row, ast node). Fails (a
        CompileError at the parameter) for a constexpr with neither."""
        runtime = []
        for p, node in zip(params, args_nodes):
            name = p["name"]
            if not self._param_is_constexpr(p):
                runtime.append((p, node))
                continue
            if name in self.constexprs:
                self.scope[name] = Constexpr(self._constexpr_value(self.constexprs[name]))
                value = self.constexprs[name]  # recorded as the variant gives it
            elif name in defaults:
                self.b.loc = defaults[name]._id
                self.in_default = True  # Triton reads any global in a default (code_generator.py)
                try:
                    self.scope[name] = self.visit(defaults[name])
                finally:
                    self.in_default = False
                value = _abi_value(self.scope[name])
            else:
                self.b.loc = node._id
                fail(self.cx, f"constexpr parameter {name!r} has no value: give it in the variant's constexprs")
            self._abi[name] = [abi.constexpr_param(name, value, self._param_is_constexpr(p, kernel=False))]
        return runtime

    def _kernel_args(self, runtime) -> tuple:
        """The kernel's block arguments for its runtime parameters, by the variant's signature:
        (values, MLIR types, arg_attrs (tt.divisibility), locs, descriptors), one per entry of the
        parameter's ABI (abi.runtime_params: a descriptor's TMA map when it takes one, base,
        shape and strides), which is recorded. Descriptors are (name, SigEntry, values, node, TMA
        value or None). Fails at the parameter for a bad signature entry."""
        args, types, attrs, locs, descriptors = [], [], [], [], []
        for (p, node), text in zip(runtime, self.signature):
            sig = self._signature_entry(text, node)
            tensormap = sig.is_descriptor and self.tma and tma.eligible(sig.block_shape, 8 * DTYPE_BYTES[sig.dtype])
            self._abi[p["name"]] = entries = abi.runtime_params(p["name"], sig, tensormap)
            vals, tmap = [], None
            for e in entries:
                if e.get("part") == "tensormap":  # the IR takes the descriptor; the cubin its map's address
                    v = tmap = self.b.fresh(T.TensorDescType(T.DTYPES[sig.language_dtype], tuple(sig.block_shape)))
                else:
                    v = self.b.fresh(T.signature_type(abi.part_signature(e)))
                    vals.append(v)
                args.append(v)
                types.append(v.type.mlir)
                attrs.append(_divisibility_attr(e, sig))
                locs.append(self.b.loc_of(node._id))
            if sig.is_descriptor:
                descriptors.append((p["name"], sig, vals, node, tmap))
            else:
                self.scope[p["name"]] = vals[0]
        return args, types, attrs, locs, descriptors

    def _signature_entry(self, text: str, node):
        """The parsed signature entry `text` of the parameter at `node`; fails there when it is bad."""
        try:
            return parse_entry(text)
        except SignatureError as e:
            self.b.loc = node._id
            what = "unknown signature type" if e.field == "dtype" else "bad signature entry"
            fail(self.cx, f"{what} {text!r}: {e}")

    def _call_value(self, fn, args: list):
        """Call a function value from a builtin (tl.reduce's combine_fn): only @jit functions."""
        if not isinstance(fn, FuncRef) or fn.kind != "jit":
            fail(self.cx, f"combine_fn must be a @jit function, got {S.describe(fn)}")
        return self.inline(fn.name, list(args), {})

    def _constexpr_value(self, v):
        """A variant's constexpr as the kernel sees it: {"dtype": name} (ttbuild.cxvalue) and a bare
        dtype name are the tl.dtype, as Triton passes a tl.float32 given to a constexpr parameter."""
        if isinstance(v, dict) and cxvalue.dtype_of(v) in T.DTYPES:
            return T.DTYPES[cxvalue.dtype_of(v)]
        if isinstance(v, dict):
            fail(self.cx, f"constexpr value {v!r}: ttbuild builds the dtypes {', '.join(sorted(T.DTYPES))}")
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
        """Lower statements in order; an `if` holding a `return` (outside loops) takes the rest of the body as its
        else branch (visit_returning_if), as Triton's code generator does."""
        for i, s in enumerate(stmts):
            if isinstance(s, ast.If) and not self.loops and _contains_return(s) and \
                    (self.depth == 0 or _returns_nothing([s, *stmts[i + 1:]])):
                self.visit_returning_if(s, stmts[i + 1:])  # consumes the rest of this body
                return
            self.visit(s)

    def visit(self, node):
        """Lower one node with the builder's location set to it (restored after); fails with Triton's wording for
        syntax kernels cannot use (while-else, with, lambda, ...)."""
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
        except CompilationError as err:
            # the choke point: an error raised without a location (a type's own check, deep in
            # a helper) gets the innermost node being lowered
            if err.loc is None and err.node_id is None and isinstance(self.b.loc, int):
                err.node_id = self.b.loc
                err.stage = err.stage or "ttir"
            raise
        except RecursionError:
            # an expression nested past Python's recursion limit (a 2,000-term sum): located at
            # the innermost node reached, instead of a traceback
            err = CompilationError("expression nested too deeply to compile (Python's recursion limit): "
                                   "split it into smaller expressions with intermediate variables")
            err.node_id, err.stage = self.b.loc if isinstance(self.b.loc, int) else None, "ttir"
            raise err from None
        finally:
            self.b.loc = saved

    def visit_Pass(self, node):
        """`pass` emits nothing."""
        pass

    def visit_Expr(self, node):
        """An expression statement is lowered for its effect (a call); a string statement is a comment."""
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

    def _sanitize(self, value):
        """What a plain assignment stores (Triton `visit_Assign._sanitize_value`): a number or
        bool becomes a scalar tensor of its default dtype (so `x = 1.5` then `h * x` computes in
        fp32, unlike `h * 1.5`); dtypes, None, strings and @jit function values stay as they are."""
        if isinstance(value, tuple):
            return tuple(self._sanitize(v) for v in value)
        if isinstance(value, Constexpr):
            if isinstance(value.value, tuple):
                return tuple(self._sanitize(Constexpr(v)) for v in value.value)
            if S.is_number(value):
                return S.to_value(self.cx, value)
        return value

    def visit_Assign(self, node):
        """`a = b` (and `a, b = ...`): numbers are sanitized into scalar tensors of their default dtype first (Triton
        3.6 visit_Assign._sanitize_value)."""
        value = self._sanitize(self.visit(node.value))
        for t in node.targets:
            self._assign(t, value)

    def visit_AnnAssign(self, node):
        """`x: ann = v` as Triton 3.6 visit_AnnAssign: `tl.constexpr` binds a compile-time value (never rebinding a
        name), any other annotation is a plain assignment."""
        # Triton 3.6 visit_AnnAssign: the annotation is evaluated (it must name something: `tl.dtype`,
        # `tl.tensor`, `int`), then only `tl.constexpr` means anything; any other is a plain
        # assignment. Without a value (`x: int`) the name is bound to None.
        ann = self.visit(node.annotation)
        value = Constexpr(None) if node.value is None else self.visit(node.value)
        if isinstance(ann, FuncRef) and ann.name == "tl.constexpr":  # `X: tl.constexpr = 4`
            if isinstance(node.target, ast.Name) and node.target.id in self.scope:
                fail(self.cx, f"{node.target.id} is already defined. constexpr cannot be reassigned.")
            if not isinstance(value, Constexpr):
                fail(self.cx, f"a tl.constexpr must be a compile-time value, got {S.describe(value)}")
            self._assign(node.target, value)
        else:
            self._assign(node.target, self._sanitize(value))

    def visit_AugAssign(self, node):
        """`x op= v` on a plain name: the binary op by Triton's rules, the result sanitized as in visit_Assign."""
        if not isinstance(node.target, ast.Name):
            fail(self.cx, "augmented assignment needs a plain name")
        cur = self.load_name(node.target.id, node.target)
        value = S.binary(self.cx, BINOPS[type(node.op)], cur, self.visit(node.value))
        self.scope[node.target.id] = self._sanitize(value)

    def visit_Return(self, node):
        """`return`: ends the kernel (which may not return a value) or a @jit function (its value; ReturnValue
        carries it to the inliner)."""
        if self.depth == 0:
            if node.value is not None:
                fail(self.cx, "a kernel cannot return a value")
            raise ReturnValue(None, node._id)
        raise ReturnValue(self.visit(node.value) if node.value is not None else Constexpr(None), node._id)

    def visit_Assert(self, node):
        """`assert cond, msg`: a constexpr condition is checked at compile time (CompileError "assertion failed"); a
        runtime one is tl.device_assert (Triton's visit_Assert)."""
        test = self.visit(node.test)
        if isinstance(test, Constexpr):
            if not test.value:
                msg = self.visit(node.msg).value if node.msg is not None else ""
                fail(self.cx, f"assertion failed: {msg}")
            return
        # Triton's visit_Assert: `assert cond, msg` on a runtime value is tl.device_assert.
        msg = self.visit(node.msg) if node.msg is not None else Constexpr("")
        from .debugops import device_assert
        device_assert(self.cx, test, msg)

    # control flow lives in controlflow.py (mixin below)

def _divisibility_attr(entry: dict, sig) -> str:
    """The arg_attrs of one ABI entry: `tt.divisibility` of its recorded divisibility, but for a
    descriptor's row strides, whose elements are 16-byte multiples (the TMA contract; the
    runtime checks it): 16 / element bytes."""
    div = entry.get("divisibility", 1)
    if entry.get("part") == "stride":
        div = max(1, 16 // DTYPE_BYTES[sig.dtype])
    return f"{{tt.divisibility = {div} : i32}}" if div > 1 else "{}"


def _abi_value(v):
    """The recorded value of a constexpr the frontend evaluated (a default): its JSON form
    (abi.value_json), a dtype by its Triton name."""
    value = v.value if isinstance(v, Constexpr) else None
    return abi.value_json(value, value.name if isinstance(value, T.DType) else None)


def _contains_return(node) -> bool:
    """Whether an `if` holds a `return` outside any loop (Triton's ContainsReturnChecker; a
    return inside a loop is rejected where the loop is lowered)."""
    if isinstance(node, ast.Return):
        return True
    if isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)) or not isinstance(node, ast.stmt):
        return False
    return any(_contains_return(c) for c in ast.iter_child_nodes(node))


def _returns_nothing(stmts) -> bool:
    """Whether every `return` in `stmts` is bare: a @jit helper that returns no value can end
    early the way a kernel does (one returning values would need them merged out of the scf.if)."""
    return all(r.value is None for s in stmts for r in ast.walk(s) if isinstance(r, ast.Return))


def generate(desc: dict, signature: list[str], constexprs: dict[str, Any], *, debug: bool = False,
             loc_table: dict | None = None, tma: bool = False) -> tuple[str, bytes]:
    """(TTIR text (generic MLIR, not yet verified) for `desc["kernel"]`, the kernel ABI its
    parameters make: ttbuild.frontend.abi.record); raises CompilationError carrying the failing
    AST node's id. `debug` keeps `tl.device_assert` (Triton drops it
    otherwise); with it, `loc_table` (the parse `loc` output) adds file:line:col to every location.
    `tma`: descriptor parameters eligible for TMA (ttbuild.tma.eligible) take a tensormap and
    their `desc.load`s become `tt.descriptor_load` (the target has TMA)."""
    gen = CodeGen(desc, signature, constexprs, debug=debug, loc_table=loc_table, tma=tma)
    return gen.generate(), gen.abi
