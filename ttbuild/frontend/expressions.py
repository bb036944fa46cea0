"""Expression lowering for the AST visitor: names, attributes, operators, subscripts, calls (builtins, Python builtins, inlined @jit helpers)."""

from __future__ import annotations

import ast
import math

from ttbuild.errors import CompilationError

from . import args as A
from . import builtin_table as B
from . import libdevice, tensordesc
from . import semantic as S
from . import types as T
from .irtext import Value
from .semantic import Constexpr, fail

LANG = ("triton.language", "ttbuild.language")
# Triton 3.6's own @constexpr_function helpers a kernel may call: triton/__init__.py next_power_of_2,
# language/standard.py _log2 (the floor of log2, 0 below 2).
_TRITON_CONSTEXPR_FUNCTIONS = {"triton.next_power_of_2": lambda n: 1 if n <= 1 else 1 << (n - 1).bit_length(),
                               "triton.language.standard._log2": lambda n: n.bit_length() - 1 if n > 1 else 0}
BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}

class ModuleRef:
    """A module seen through an import alias, e.g. `tl` → `triton.language`."""

    def __init__(self, name: str):
        self.name = name


class FuncRef:
    """A callable: a builtin (`qual` under triton.language), another @jit function, or a Python builtin."""

    def __init__(self, kind: str, name: str):
        self.kind, self.name = kind, name


# tl classes a kernel may name: isinstance()'s second argument, or an annotation (`dt: tl.dtype = ...`)
_LANG_CLASSES = ("tensor", "tensor_descriptor", "tensor_descriptor_base", "dtype", "pointer_type", "block_type")


class LangClass:
    """A `tl` class usable as isinstance()'s second argument or an annotation in a kernel (`tl.tensor`,
    `tl.tensor_descriptor`, `tl.tensor_descriptor_base`, `tl.dtype`, `tl.pointer_type`, `tl.block_type`,
    `tl.constexpr`; Triton's @jit code runs
    isinstance on its frontend objects at compile time, tutorial 06 on a descriptor-or-pointer)."""

    def __init__(self, name: str):
        self.name = name

    def holds(self, obj) -> bool:
        """Whether `obj` (a frontend value) is an instance of this `tl` class, as isinstance() in a @jit function
        answers it at compile time: tensors are Values, dtypes are DType, PointerType or BlockType constexprs,
        descriptors TensorDescriptor."""
        if self.name in ("tensor_descriptor", "tensor_descriptor_base"):
            return isinstance(obj, tensordesc.TensorDescriptor)
        if self.name == "tensor":
            return isinstance(obj, Value)
        value = obj.value if isinstance(obj, Constexpr) else None
        if self.name == "dtype":  # Triton's pointer_type and block_type are dtype subclasses
            return isinstance(value, (T.DType, T.PointerType, T.BlockType))
        if self.name == "pointer_type":
            return isinstance(value, T.PointerType)
        if self.name == "block_type":
            return isinstance(value, T.BlockType)
        return isinstance(obj, Constexpr)  # tl.constexpr

    def __repr__(self):
        return f"tl.{self.name}"


class ReturnValue(Exception):
    """Unwinds a `return` to the inlined call (or the kernel) it leaves."""

    def __init__(self, value, node_id=None):
        self.value = value
        self.node_id = node_id


_PY_BUILTINS = {"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance"}


class Expressions:
    """Mixin for CodeGen: every `visit_<expr>` plus call binding and @jit inlining."""

    def visit_Constant(self, node):
        """A literal is a Constexpr of its Python value."""
        return Constexpr(node.value)

    def visit_Tuple(self, node):
        """A tuple of constexprs is one Constexpr tuple; otherwise a Python tuple of the items (tensors and
        constexprs mixed)."""
        items = tuple(self.visit(e) for e in node.elts)
        if all(isinstance(i, Constexpr) for i in items):
            return Constexpr(tuple(i.value for i in items))
        return items

    visit_List = visit_Tuple

    def load_name(self, name: str, node):
        """The value bound to `name`: the local scope, else a module global (constexpr globals only, as Triton 3.6
        code_generator.global_lookup; any global inside a default value), else a builtin or an imported module.
        Fails at `node` for an unknown name."""
        if name in self.scope:
            return self.scope[name]
        if name in self.globals:
            if not self.globals[name].get("constexpr", True) and not getattr(self, "in_default", False):
                # Triton 3.6, code_generator.py (global_lookup): only constexpr globals, except
                # while evaluating a parameter's default value.
                fail(self.cx, f"Cannot access global variable {name} from within @jit'ed function. Triton kernels "
                              "can only access global variables that are instanstiated as constexpr "
                              "(`x = triton.language.constexpr(42)`). Note that this is different from annotating "
                              "a variable as constexpr (`x: triton.language.constexpr = 42`), which is not supported.")
            return Constexpr(self.globals[name]["value"] if not isinstance(self.globals[name]["value"], list)
                             else tuple(self.globals[name]["value"]))
        if name in self.functions:
            return FuncRef("jit", name)
        if name in self.desc.get("constexpr_functions", {}):
            return FuncRef("constexpr_fn", name)
        if name in self.imports:
            full = self.imports[name]
            return self._resolve_qualified(full, node)
        if name in _PY_BUILTINS:
            return FuncRef("py", name)
        if name in ("True", "False", "None"):
            return Constexpr({"True": True, "False": False, "None": None}[name])
        import difflib
        close = difflib.get_close_matches(name, sorted(set(self.scope) | set(self.globals) | set(self.functions)), n=1)
        fail(self.cx, f"undefined name {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))

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
        if attr == "standard._log2":
            return ModuleRef("triton.language.standard._log2")
        if attr in B.BUILTINS:  # a rule filed under its submodule (core.get_int_dtype), or a plain tl builtin
            return FuncRef("builtin", attr)
        for sub in ("core", "standard"):  # triton.language.core / .standard: where tl's names are defined
            if attr == sub:  # kept apart from tl: tl.core.get_int_dtype is a name tl does not re-export
                return ModuleRef("triton.language." + sub)
            if attr.startswith(sub + "."):
                return self._lang_attr(attr[len(sub) + 1:], node)
        dt = _DTYPE_ATTRS.get(attr)
        if dt is not None:
            return Constexpr(T.DTYPES[dt])
        if attr in B.BUILTINS:
            return FuncRef("builtin", attr)
        if attr == "TRITON_MAX_TENSOR_NUMEL":
            return Constexpr(T.MAX_TENSOR_NUMEL)
        if attr == "PropagateNan":
            return ModuleRef("triton.language.PropagateNan")
        if attr in ("PropagateNan.NONE", "PropagateNan.ALL"):  # triton::PropagateNan values
            return Constexpr(0 if attr.endswith("NONE") else 0xFFFF)
        if attr in ("math", "extra", "extra.cuda", "extra.libdevice", "extra.cuda.libdevice"):
            return ModuleRef("triton.language." + attr)
        if attr.startswith(("math.", "extra.cuda.libdevice.", "extra.libdevice.")):
            short = "math." + attr.rsplit(".", 1)[1]
            # libdevice's functions are extern calls in Triton 3.6 (language/extra/cuda/libdevice.py:
            # core.extern_elementwise), even those tl.math also has as an op (rsqrt, exp, tanh...)
            if not attr.startswith("math.") and libdevice.has(attr.rsplit(".", 1)[1]):
                return FuncRef("libdevice", attr.rsplit(".", 1)[1])
            if short in B.BUILTINS:
                return FuncRef("builtin", short)
        if attr in ("constexpr", "range", "static_range"):
            return FuncRef("py", "tl." + attr)
        # classes: isinstance()'s second argument, or an annotation (`dt: tl.dtype = ...`)
        if attr in _LANG_CLASSES:
            return Constexpr(LangClass(attr))
        from ttbuild import language
        known = set(language.BUILTIN_NAMES) | {f"math.{n}" for n in language.math.MATH_NAMES}
        if attr in known:
            fail(self.cx, f"tl.{attr} is not supported yet by the ttbuild frontend", cls=_not_supported(attr))
        import difflib
        close = difflib.get_close_matches(attr, sorted(known | set(B.BUILTINS) | set(_DTYPE_ATTRS) | set(_LANG_CLASSES)), n=1)
        hint = f"; did you mean tl.{close[0]}?" if close else ""
        if "core." + attr in B.BUILTINS:  # defined in triton.language.core, not re-exported by triton.language
            hint = f"; Triton 3.6 defines it as tl.core.{attr} (triton.language does not re-export it)"
        fail(self.cx, f"unknown function or attribute tl.{attr}{hint}")

    def visit_Name(self, node):
        """A name's value (load_name)."""
        return self.load_name(node.id, node)

    def visit_Attribute(self, node):
        """`x.attr`: a module member (tl.float32, libdevice.exp), a tensor's dtype / shape / T or bound method, a
        constexpr's attribute. Fails for an attribute Triton does not have."""
        base = self.visit(node.value)
        if isinstance(base, ModuleRef):
            return self._resolve_qualified(base.name + "." + node.attr, node)
        if isinstance(base, Value):
            if node.attr == "dtype":
                st = base.type.scalar
                return Constexpr(st)
            if node.attr == "shape":
                return Constexpr(tuple(base.type.shape))
            if node.attr == "numel":  # Triton's tensor.numel: the block's element count (1 for a scalar)
                return Constexpr(math.prod(getattr(base.type, "shape", ())))
            if node.attr == "type":  # Triton's tensor.type: the block type, or the scalar type
                return Constexpr(base.type)
            if node.attr == "T":  # Triton's tensor.T: the 2-D transpose (tl.trans)
                if len(base.type.shape) != 2:
                    fail(self.cx, f".T transposes a 2-D block, got shape {list(base.type.shape)}")
                return B.call(self.cx, B.BUILTINS.lookup("trans"), "trans", [base], {})
            if node.attr in B.METHODS or node.attr in B.BUILTINS:
                return ("method", base, node.attr)
            fail(self.cx, f"tensor has no attribute {node.attr!r}")
        if isinstance(base, tensordesc.TensorDescriptor):
            return tensordesc.attribute(self.cx, base, node.attr)
        if isinstance(base, Constexpr):
            if node.attr == "value":  # a constexpr's value: itself (a dtype passed to a helper, `dtype.value`)
                return base
            if isinstance(base.value, T.DType):
                return self._dtype_attr(base.value, node.attr)
            if isinstance(base.value, (T.PointerType, T.BlockType)):
                return self._type_attr(base.value, node.attr)
        fail(self.cx, f"unsupported attribute access .{node.attr} on {S.describe(base)}")

    def _dtype_attr(self, dt: T.DType, attr: str):
        from .constexprfn import dtype_probes

        probes = dtype_probes(dt)
        if attr == "primitive_bitwidth" or (attr == "int_bitwidth" and dt.is_int()):
            return Constexpr(dt.bits)
        if attr in probes:
            return ("const_method", probes[attr])
        fail(self.cx, f"dtype has no attribute {attr!r}")

    def _type_attr(self, ty, attr: str):
        """`.element_ty` of a pointer type (the pointee) or of a block type (its element), as
        Triton's `pointer_type.element_ty` / `block_type.element_ty`; a block type's `.shape`."""
        if attr == "element_ty":
            return Constexpr(ty.element)
        if attr == "shape" and isinstance(ty, T.BlockType):
            return Constexpr(tuple(ty.shape))
        if attr == "is_ptr":
            return ("const_method", isinstance(ty, T.PointerType))
        fail(self.cx, f"{ty} has no attribute {attr!r}")

    def visit_BinOp(self, node):
        """`a op b` by Triton 3.6 semantic's binary rules (promotion, broadcast; constexprs fold)."""
        return S.binary(self.cx, BINOPS[type(node.op)], self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node):
        """`-x`, `~x`, `not x`, `+x` by Triton 3.6 semantic (constexprs fold)."""
        return S.unary(self.cx, _UNARY[type(node.op)], self.visit(node.operand))

    def visit_Compare(self, node):
        """A single comparison: `is` / `is not` on the unwrapped operands gives a constexpr (Triton 3.6
        code_generator.visit_Compare), others compare elementwise to int1. Fails for chained comparisons."""
        if len(node.ops) != 1:
            fail(self.cx, "chained comparisons (a < b < c) are not supported; split them with `&`")
        op = node.ops[0]
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        if type(op) in (ast.Is, ast.IsNot):
            # Triton 3.6 code_generator.visit_Compare: Python identity of the unwrapped operands,
            # a constexpr result (a tensor `is not None` is True; a None argument is a constexpr None).
            a = lhs.value if isinstance(lhs, Constexpr) else lhs
            b = rhs.value if isinstance(rhs, Constexpr) else rhs
            same = a is b
            return Constexpr(same if type(op) is ast.Is else not same)
        if type(op) not in _CMPOPS:
            fail(self.cx, f"unsupported comparison {type(op).__name__}")
        return S.binary(self.cx, _CMPOPS[type(op)], lhs, rhs)

    def visit_BoolOp(self, node):
        """`and` / `or`: constexprs short-circuit as Python does; tensors combine with `&` / `|`, with Triton 3.6's
        deprecation warning for non-scalar operands."""
        values = []
        for v in node.values:
            values.append(self.visit(v))
            # Triton 3.6 code_generator.visit_BoolOp warns once per block operand, at the `and`/`or`.
            if isinstance(values[-1], Value) and values[-1].type.shape:
                S.warn(self.cx, "Logical operators 'and' and 'or' are deprecated for non-scalar tensors; "
                                "please use '&' or '|' instead")
        if all(isinstance(v, Constexpr) for v in values):
            out = values[0].value
            for v in values[1:]:
                out = (out and v.value) if isinstance(node.op, ast.And) else (out or v.value)
            return Constexpr(out)
        # Triton lowers `and`/`or` on runtime values as logical & / | of booleans.
        acc = values[0]
        for v in values[1:]:
            a = S.cast(self.cx, A.tensor(self.cx, acc, "operand"), T.int1)
            c = S.cast(self.cx, A.tensor(self.cx, v, "operand"), T.int1)
            acc = S.binary(self.cx, "&" if isinstance(node.op, ast.And) else "|", a, c)
        return acc

    def visit_IfExp(self, node):
        """`a if c else b`: a constexpr condition picks the side at compile time; a scalar runtime one builds an
        scf.if yielding the chosen side (both sides of one type). Fails for a block condition (tl.where's job)."""
        cond = self.visit(node.test)
        if isinstance(cond, Constexpr):
            return self.visit(node.body if cond.value else node.orelse)
        # A runtime condition picks a branch with scf.if, as Triton's code generator does (so
        # only the chosen side runs); elementwise choice over a block is tl.where's job.
        if not isinstance(cond, Value) or cond.type.shape:
            fail(self.cx, "a conditional expression needs a scalar condition; use tl.where for blocks")
        cond = S.cast(self.cx, cond, T.int1)
        values, regions = [], []
        for branch in (node.body, node.orelse):
            self.b.open_block()
            values.append(A.tensor(self.cx, self.visit(branch), "conditional expression branch"))
            self.b.op("scf.yield", [values[-1]], [])
            regions.append(self.b.close_block())
        if values[0].type != values[1].type:
            fail(self.cx, f"conditional expression has inconsistent types {values[0].type} and {values[1].type}")
        return self.b.op("scf.if", [cond], [values[0].type], regions=regions)[0]

    def visit_JoinedStr(self, node):
        """An f-string of constexprs is a constexpr string. Fails when it formats a runtime value."""
        parts = []
        for v in node.values:
            x = self.visit(v.value) if isinstance(v, ast.FormattedValue) else self.visit(v)
            if not isinstance(x, Constexpr):
                fail(self.cx, "f-strings may only format constexprs")
            parts.append(str(x.value))
        return Constexpr("".join(parts))

    def visit_Subscript(self, node):
        """`x[i]`: a constexpr indexed by a constexpr, a tuple element, or a tensor indexed by `None` and `:`
        (tl.expand_dims); fails for other tensor indexing, as Triton 3.6 does."""
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
            fail(self.cx, f"cannot index {S.describe(base)}")
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
        """A call: a `tl` builtin or tensor method (by its rule), a @jit function (inlined), a Python builtin the
        frontend knows (py_builtin), a `tl` class constructor. Fails for `**kwargs` and anything else."""
        fn = self.visit(node.func)
        args = [self.visit(a) for a in node.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        if None in kwargs:
            fail(self.cx, "`**kwargs` in a call is not supported")
        if isinstance(fn, tuple) and fn[0] == "method":
            _, obj, name = fn
            tensordesc.check_not_descriptor_call(self.cx, obj, name, args)
            rule = B.METHODS.get(name) or B.BUILTINS.lookup(name)
            return B.call(self.cx, rule, name, [obj] + args, kwargs)
        if isinstance(fn, tuple) and fn[0] == "desc_method":
            return tensordesc.call_method(self.cx, fn[1], fn[2], args, kwargs)
        if isinstance(fn, tuple) and fn[0] == "const_method":
            return Constexpr(fn[1])
        if isinstance(fn, FuncRef):
            if fn.kind == "builtin":
                return B.call(self.cx, B.BUILTINS.lookup(fn.name), fn.name, args, kwargs)
            if fn.kind == "jit":
                return self.inline(fn.name, args, kwargs)
            if fn.kind == "libdevice":
                return libdevice.call(self.cx, fn.name, args, kwargs)
            if fn.kind == "constexpr_fn":
                return self.call_constexpr_function(fn.name, args, kwargs, node)
            return self.py_builtin(fn.name, args, kwargs)
        if isinstance(fn, ModuleRef):
            if fn.name in _TRITON_CONSTEXPR_FUNCTIONS:  # @constexpr_function helpers of Triton 3.6 itself
                if len(args) != 1 or kwargs or not isinstance(args[0], Constexpr) or not isinstance(args[0].value, int):
                    fail(self.cx, f"{fn.name} takes one constexpr int")
                return Constexpr(_TRITON_CONSTEXPR_FUNCTIONS[fn.name](args[0].value))
            if not fn.name.startswith(LANG):
                fail(self.cx, f"cannot call {fn.name}: only tl builtins and @jit functions defined in "
                              f"the kernel's own file can be called (the compiler never imports modules)")
            fail(self.cx, f"{fn.name} is a module, not a function")
        fail(self.cx, f"cannot call {S.describe(fn)}")

    def call_constexpr_function(self, name, args, kwargs, node):
        """A `@triton.constexpr_function` helper called on constexprs: run at compile time by the
        bounded evaluator (ttbuild.pyeval), its result a constexpr (Triton 3.6 runtime/jit.py
        ConstexprFunction.__call__)."""
        import ast as _ast

        from ttbuild.errors import CompilationError
        from ttbuild.pyeval.values import Function

        from .constexprfn import HelperEvaluator

        if kwargs or not all(isinstance(a, Constexpr) for a in args):
            fail(self.cx, f"{name}() is a @triton.constexpr_function: call it with constexpr positional arguments")
        text = self.desc["constexpr_functions"][name]
        constants = {n: g["value"] if not isinstance(g["value"], list) else tuple(g["value"])
                     for n, g in self.globals.items()}
        ev = HelperEvaluator(name, text, self.desc["constexpr_functions"], self.imports, constants)
        try:
            return Constexpr(ev.apply(Function(_ast.parse(text).body[0]), [a.value for a in args], node))
        except CompilationError as e:
            fail(self.cx, f"{name}(...) at compile time: {e.message}")

    def py_builtin(self, name, args, kwargs):
        """The Python builtins a kernel may call: print (as tl.device_print), isinstance, tl.constexpr(x), and
        min, max, len, int, float, bool, abs over constexprs (folded; min / max of two tensors is tl.minimum /
        tl.maximum). Fails for range outside a `for`, for runtime arguments, or when Python's call raises."""
        if name == "print":  # Triton's code_generator maps Python print to tl.device_print
            return B.call(self.cx, B.BUILTINS.lookup("device_print"), "device_print", args, kwargs)
        if name in ("tl.constexpr",):
            return args[0] if isinstance(args[0], Constexpr) else fail(self.cx, "tl.constexpr() needs a constant")
        if name == "isinstance":
            return self.isinstance_(args, kwargs)
        if name in ("range", "tl.range", "tl.static_range"):
            fail(self.cx, f"{name}() is only supported as the iterable of a for loop")
        if not all(isinstance(a, Constexpr) for a in args):
            if name in ("min", "max") and len(args) == 2:
                return S.minmax(self.cx, args[0], args[1], name == "max")
            fail(self.cx, f"Python builtin {name}() needs constexpr arguments in a kernel")
        vals = [a.value for a in args]
        try:
            return Constexpr({"min": min, "max": max, "len": len, "int": int, "float": float,
                              "bool": bool, "abs": abs}[name](*vals))
        except CompilationError:
            raise
        except Exception as e:  # noqa: BLE001
            fail(self.cx, f"{name}{tuple(vals)} failed: {e}")

    def isinstance_(self, args, kwargs):
        """`isinstance(x, C)` with C a tl class (LangClass), `tl.constexpr` or a tuple of them: a
        constexpr bool, decided at compile time as Triton's code generator does."""
        if kwargs or len(args) != 2:
            fail(self.cx, "isinstance() takes exactly 2 arguments")
        obj, cls = args
        if isinstance(cls, Constexpr) and isinstance(cls.value, tuple):
            cls = cls.value
        classes = tuple(cls) if isinstance(cls, (tuple, list)) else (cls,)
        found = False
        for c in classes:
            c = c.value if isinstance(c, Constexpr) else c
            if isinstance(c, FuncRef) and c.kind == "py" and c.name == "tl.constexpr":
                c = LangClass("constexpr")
            if not isinstance(c, LangClass):
                fail(self.cx, f"isinstance() in a kernel takes tl.tensor, tl.tensor_descriptor or tl.constexpr, "
                              f"got {S.describe(c)}")
            found = found or c.holds(obj)
        return Constexpr(found)

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
        defaults = default_nodes(fn)
        for p in params:
            if p["name"] not in bound:
                if p["name"] not in defaults:
                    fail(self.cx, f"{name}() missing argument {p['name']!r}")
                # Defaults evaluate in the callee's module scope, not the caller's locals.
                saved, self.scope = self.scope, {}
                saved_default, self.in_default = getattr(self, "in_default", False), True
                try:
                    bound[p["name"]] = self.visit(defaults[p["name"]])
                finally:
                    self.scope, self.in_default = saved, saved_default
            # A helper's `tl.constexpr` annotation does not force the argument: as in Triton 3.6
            # (code_generator.call_JitFunction), what the caller passes decides, so a runtime
            # value (tutorial 06 passes offs_m and N_CTX this way) stays a runtime value.
        saved_scope, self.scope = self.scope, bound
        # The callee's own loops decide whether its early returns can be lowered, not the caller's.
        saved_loops, self.loops = self.loops, 0
        self.depth += 1
        try:
            self.visit_body(fn.body)
            result = Constexpr(None)
        except ReturnValue as r:
            result = r.value
        finally:
            self.scope = saved_scope
            self.loops = saved_loops
            self.depth -= 1
        return result


def _not_supported(attr: str):
    """The error class for a real `tl` function the frontend cannot lower yet."""
    class FrontendNotSupported(A.NotSupportedFrontend):
        """A `tl` function that exists in Triton and that the frontend cannot lower yet (its `op` is `tl.<attr>`)."""
        def __init__(self, message, loc=None, *, stage=None, node_id=None):
            super().__init__(message, loc, stage=stage, node_id=node_id, op=f"tl.{attr}")
    return FrontendNotSupported


def default_nodes(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    """Parameter name → its default's AST node (defaults align with the last parameters)."""
    args = fn.args.posonlyargs + fn.args.args
    return {a.arg: d for a, d in zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults)}


_DTYPE_ATTRS = {"int1": "int1", "bool": "int1", "int8": "int8", "int16": "int16", "int32": "int32",
                "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
                "uint64": "uint64", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
                "float64": "fp64", "float8e4nv": "fp8e4nv", "float8e5": "fp8e5"}
