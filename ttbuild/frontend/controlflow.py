"""Control flow for the AST visitor: `if` → scf.if (or compile-time selection), `for ... in range` → scf.for, `tl.static_range` unrolled.

Loop-carried and if-merged variables are found the way Triton's code generator finds them: lower
the body once into a scratch block, see which names defined before it were rebound, then lower
it for real with those names as block arguments / yielded results.
"""

from __future__ import annotations

import ast

from . import args as A
from . import semantic as S
from . import types as T
from .blockptr import BlockPtr, as_value
from .expressions import ReturnValue
from .irtext import Value
from .semantic import Constexpr, fail

MAX_STATIC_UNROLL = 1 << 16


def _same_field(a, b) -> bool:
    """Whether two block pointer fields are the same value (the same object, or equal constants)."""
    return a is b or isinstance(a, Constexpr) and isinstance(b, Constexpr) and a.value == b.value


def _type_of(v) -> str:
    """The type of a name's value as Triton prints it (a block pointer: `pointer<fp32[16]>`)."""
    if isinstance(v, BlockPtr):
        return v.type_str
    return str(v.type) if isinstance(v, Value) else S.describe(v)


def max_static_unroll() -> int:
    """How many `tl.static_range` iterations one kernel may unroll in all (TTBUILD_MAX_STATIC_UNROLL,
    default 65536). Triton sets no limit; a `tl.static_range(10**6)` held a ttbuild stage for
    minutes at gigabytes, so past the limit it is a located diagnostic instead (issue 14)."""
    import os

    try:
        return int(os.environ.get("TTBUILD_MAX_STATIC_UNROLL", MAX_STATIC_UNROLL))
    except ValueError:
        return MAX_STATIC_UNROLL


class ControlFlow:
    """Mixin for CodeGen: `visit_If`, `visit_For`."""

    def _body_no_return(self, stmts, what: str):
        loop = "loop" in what
        self.loops += loop
        try:
            self.visit_body(stmts)
        except ReturnValue as r:
            self.b.loc = r.node_id if r.node_id is not None else self.b.loc
            fail(self.cx, f"`return` inside {'a loop' if self.loops else what} is not supported yet")
        finally:
            self.loops -= loop

    def visit_returning_if(self, node, rest):
        """`if c: ... return ...` at kernel level (or in a @jit helper that returns nothing), not
        inside a loop of that function: the statements after the `if`
        run only on paths that did not return, so they are lowered into each branch and the
        kernel ends after the scf.if. Equivalent to the cf.cond_br blocks of Triton's
        `visit_if_top_level` (a branch that returns simply stops; the rest of the function sits
        in the other), but structured, so the scf.if lowering needs nothing new. The rest is
        lowered once per branch that reaches it (nested early returns duplicate it)."""
        self.b.loc = node._id
        cond = self.visit(node.test)
        if isinstance(cond, Constexpr):
            self.visit_body((node.body if cond.value else node.orelse) + rest)
            raise ReturnValue(Constexpr(None), None)
        if cond.type.shape:
            fail(self.cx, f"an `if` condition must be a scalar, got a block of shape {list(cond.type.shape)}")
        cond = S.cast(self.cx, cond, T.int1)
        before, loc, regions = dict(self.scope), self.b.loc, []
        for stmts in (node.body + rest, node.orelse + rest):
            self.b.open_block()
            try:
                self.visit_body(stmts)
            except ReturnValue:
                pass  # this path of the kernel ends here
            self.scope, self.b.loc = dict(before), loc
            self.b.op("scf.yield", [], [])
            regions.append(self.b.close_block())
        self.b.op("scf.if", [cond], [], regions=regions)
        raise ReturnValue(Constexpr(None), None)

    def visit_If(self, node):
        """`if`: a constexpr condition lowers the chosen branch only; a scalar runtime one builds scf.if whose
        results are the names both branches rebind, by Triton 3.6 code_generator.visit_If's rules. Fails for a
        block condition or branches that bind a name to different types."""
        cond = self.visit(node.test)
        if isinstance(cond, Constexpr):
            self.visit_body(node.body if cond.value else node.orelse)
            return
        if cond.type.shape:
            fail(self.cx, f"an `if` condition must be a scalar, got a block of shape {list(cond.type.shape)}")
        cond = S.cast(self.cx, cond, T.int1)
        before = dict(self.scope)
        loc = self.b.loc
        then_blk = self.b.open_block()
        self._body_no_return(node.body, "a runtime `if`")
        then_scope, self.scope = self.scope, dict(before)
        self.b.suspend()
        else_blk = self.b.open_block()
        self._body_no_return(node.orelse, "a runtime `else`")
        else_scope, self.scope = self.scope, dict(before)
        self.b.suspend()
        self.b.loc = loc

        # Which names leave the `if`, by Triton's rules (code_generator.visit_then_else_blocks):
        # a tensor defined before it and rebound in a branch keeps its exact type in both branches;
        # any other name must be bound in both branches, to the same type; the rest stay local.
        def changed(scope):
            """The names `scope` binds that were not bound before the `if`, or bound to another value."""
            return {n for n in scope if n not in before or scope[n] is not before[n]}

        then_defs, else_defs = changed(then_scope), changed(else_scope)
        block_ptrs = self._if_block_ptrs(before, then_scope, else_scope, then_defs, else_defs)
        merged, tvals, evals = [], [], []
        for n in sorted(n for n in before if isinstance(before[n], Value) and n in then_defs | else_defs):
            for val, which in ((then_scope[n], "then"), (else_scope[n], "else")):
                if not isinstance(val, Value) or val.type != before[n].type:
                    fail(self.cx, f"initial value for `{n}` is of type {before[n].type}, but the {which} "
                                  f"block redefines it as {S.describe(val)}")
            merged.append(n)
            tvals.append(then_scope[n])
            evals.append(else_scope[n])
        for n in sorted((then_defs & else_defs) - set(merged) - {n for n, _ in block_ptrs}):
            t, e = then_scope[n], else_scope[n]
            if isinstance(t, Value) and isinstance(e, Value) and t.type == e.type:
                merged.append(n)
                tvals.append(t)
                evals.append(e)
            elif isinstance(t, Constexpr) and isinstance(e, Constexpr) and t == e:
                self.scope[n] = t
            else:
                fail(self.cx, f"mismatched type for `{n}` between then block ({S.describe(t)}) "
                              f"and else block ({S.describe(e)})")
        regions = []
        for blk, vals, scope in ((then_blk, tvals, then_scope), (else_blk, evals, else_scope)):
            self.b.resume(blk)
            fields = [as_value(self.cx, scope[n].fields()[i]) for n, which in block_ptrs for i in which]
            self.b.op("scf.yield", vals + fields, [])
            regions.append(self.b.close_block())
            types = [v.type for v in vals + fields]
        results = self.b.op("scf.if", [cond], types, regions=regions)
        for n, r in zip(merged, results):
            self.scope[n] = r
        k = len(merged)
        for n, which in block_ptrs:
            fields = then_scope[n].fields()
            for i in which:
                fields[i] = results[k]
                k += 1
            self.scope[n] = then_scope[n].with_fields(fields)

    def _if_block_ptrs(self, before, then_scope, else_scope, then_defs, else_defs):
        """The block pointers that leave a runtime `if`: (name, [index of each yielded field]).

        A block pointer leaves the `if` as the fields its branches disagree on (base, shape,
        strides, offsets: what Triton's rewrite_tensor_pointer yields for a `!tt.ptr<tensor>`
        result of scf.if), one i64 or pointer value each; the fields both branches share stay as
        they are (a unit stride stays a constant for the axis analysis). Rebuilt after the scf.if.
        """
        block_ptrs = []
        for n in sorted(then_defs | else_defs):
            if any(isinstance(sc.get(n), BlockPtr) for sc in (before, then_scope, else_scope)):
                if n not in before and n not in then_defs & else_defs:
                    continue  # bound in one branch only: local to it, as any other name
                t, e = then_scope.get(n), else_scope.get(n)
                if not (isinstance(t, BlockPtr) and isinstance(e, BlockPtr)) or t.base.type != e.base.type or \
                        t.block_shape != e.block_shape or t.order != e.order:
                    fail(self.cx, f"mismatched type for `{n}` between then block ({_type_of(t)}) "
                                  f"and else block ({_type_of(e)})")
                block_ptrs.append((n, [i for i, (a, b) in enumerate(zip(t.fields(), e.fields()))
                                       if not _same_field(a, b)]))
        return block_ptrs

    def _carries(self, before: dict, loc, ignore: str | None = None) -> tuple[list[str], dict[str, list[int]]]:
        """After a scratch pass over a loop: the names it rebinds, checked as Triton's
        `_find_carries` does — only tensors may be carried, and each keeps its type — and, per
        block pointer among them, the indices of the fields (BlockPtr.fields) the loop carries."""
        out, fields = [], {}
        for n in before:
            if n == ignore or n not in self.scope or self.scope[n] is before[n]:
                continue
            v, live = self.scope[n], before[n]
            self.b.loc = loc
            if isinstance(v, BlockPtr) or isinstance(live, BlockPtr):
                fields[n] = self._block_ptr_carry(n, live, v)
                out.append(n)
                continue
            if not isinstance(live, Value) or not isinstance(v, Value):
                fail(self.cx, f"cannot reassign constexpr `{n}` in a loop")
            if v.type != live.type:
                fail(self.cx, f"loop-carried variable {n!r} has initial type {live.type} "
                              f"but is re-assigned to {v.type} in the loop")
            out.append(n)
        return sorted(out), fields

    def _block_ptr_carry(self, n, live, v) -> list[int]:
        """The fields of block pointer `n` that a loop changes (an advance: offsets; a rebinding
        to another block pointer: any field), which the loop carries, one value each, as Triton's
        rewrite_tensor_pointer splits a `!tt.ptr<tensor>` iter_arg; its type must stay."""
        if not (isinstance(v, BlockPtr) and isinstance(live, BlockPtr)) or v.base.type != live.base.type or \
                v.block_shape != live.block_shape or v.order != live.order:
            fail(self.cx, f"loop-carried variable {n!r} has initial type {_type_of(live)} "
                          f"but is re-assigned to {_type_of(v)} in the loop")
        return [i for i, (a, b) in enumerate(zip(live.fields(), v.fields())) if not _same_field(a, b)]

    def _flat(self, v, which=None) -> list:
        """The loop-carried values standing for `v`: a block pointer travels as the fields
        `which` (indices into its fields(); i64 or pointer values)."""
        if isinstance(v, BlockPtr):
            return [as_value(self.cx, v.fields()[i]) for i in which]
        return [v]

    def _unflat(self, template, values: list, i: int, which=None):
        """Rebuild the names' values from carried `values` starting at `i`; returns (value, next i)."""
        if isinstance(template, BlockPtr):
            fields = template.fields()
            for j in which:
                fields[j] = values[i]
                i += 1
            return template.with_fields(fields), i
        return values[i], i + 1

    def _outs(self, changed, inits, loc, fields) -> list:
        """The values a loop body yields for its carried names (flattened like `_flat`)."""
        outs = []
        for n, init in zip(changed, inits):
            v = self.scope[n]
            if isinstance(init, BlockPtr):
                self.b.loc = loc
                if not set(self._block_ptr_carry(n, init, v)) <= set(fields[n]):
                    fail(self.cx, f"block pointer {n!r} changes more fields in the loop than its first pass showed")
                outs += self._flat(v, fields[n])
                continue
            v = self._materialize(v, init.type, n)
            if v.type != init.type:
                self.b.loc = loc
                fail(self.cx, f"loop-carried variable {n!r} has initial type {init.type} "
                              f"but is re-assigned to {v.type} in the loop")
            outs.append(v)
        return outs

    def _bind(self, changed, inits, values, fields):
        i = 0
        for n, init in zip(changed, inits):
            self.scope[n], i = self._unflat(init, values, i, fields.get(n))

    def _materialize(self, v, ty, name) -> Value:
        if isinstance(v, Value):
            return v
        if not S.is_number(v):
            fail(self.cx, f"{name!r} must be a number or a tensor to be merged or carried, got {v.value!r}")
        if ty is None:
            return S.to_value(self.cx, v)
        if isinstance(ty, T.BlockType):
            return self.b.constant(v.value, ty)
        return S.to_value(self.cx, v, ty)

    # tl.range keywords → the discardable scf.for attributes Triton's code generator sets.
    _RANGE_KW = {"num_stages": "tt.num_stages", "loop_unroll_factor": "tt.loop_unroll_factor",
                 "disallow_acc_multi_buffer": "tt.disallow_acc_multi_buffer", "flatten": "tt.flatten",
                 "warp_specialize": "tt.warp_specialize"}

    def _range_attrs(self, kind: str, call: ast.Call) -> dict[str, str]:
        attrs = {}
        for kw in call.keywords:
            value = self.visit(kw.value)
            if kind == "range" or (kind == "tl.range" and kw.arg in ("arg1", "arg2", "step")):
                continue  # a builtin range's keywords: evaluated and ignored (Triton 3.6 visit_For); bounds: above
            if kind != "tl.range" or kw.arg not in self._RANGE_KW:
                fail(self.cx, f"{kind}() got an unexpected keyword argument {kw.arg!r}")
            v = A.cval(self.cx, value, kw.arg)
            if v is None or v is False:
                continue
            name = self._RANGE_KW[kw.arg]
            attrs[name] = "unit" if v is True else f"{int(v)} : i32"
        return attrs

    def _range_args(self, kind: str, it: ast.Call) -> list:
        """[start, stop, step] of a range / tl.range / tl.static_range call, defaults filled in;
        tl.range's arg1 / arg2 / step by keyword too (Triton 3.6, language/core.py). Fails for a
        value given twice or a count other than 1 to 3."""
        args = [self.visit(a) for a in it.args]
        given = {k.arg: k.value for k in it.keywords if kind == "tl.range" and k.arg in ("arg1", "arg2", "step")}
        for i, name in enumerate(("arg1", "arg2")):
            if name in given:
                if len(args) != i:
                    fail(self.cx, f"tl.range() got multiple values for argument {name!r}")
                args.append(self.visit(given[name]))
        if "step" in given:
            if len(args) > 2:
                fail(self.cx, "tl.range() got multiple values for argument 'step'")
            args = ([Constexpr(0)] if len(args) == 1 else []) + args + [self.visit(given["step"])]
        if not 1 <= len(args) <= 3:
            fail(self.cx, f"range expects 1 to 3 arguments, got {len(args)}")
        if len(args) == 1:
            args = [Constexpr(0), args[0]]
        if len(args) == 2:
            args.append(Constexpr(1))
        return args

    def visit_For(self, node):
        """`for` over range, tl.range or tl.static_range: static_range unrolls at compile time; the others build an
        scf.for carrying the names the body rebinds (Triton 3.6 visit_For), tl.range's keywords becoming loop
        attributes (_RANGE_KW). Fails for other iterables or keywords."""
        it = node.iter
        if not (isinstance(it, ast.Call)):
            fail(self.cx, "for loops must iterate over range(...), tl.range(...) or tl.static_range(...)")
        fn = self.visit(it.func)
        kind = getattr(fn, "name", None)
        if kind not in ("range", "tl.range", "tl.static_range"):
            fail(self.cx, "for loops must iterate over range(...), tl.range(...) or tl.static_range(...)")
        args = self._range_args(kind, it)
        loop_attrs = self._range_attrs(kind, it)
        if not isinstance(node.target, ast.Name):
            fail(self.cx, "the loop variable must be a plain name")
        if node.orelse:
            fail(self.cx, "`for ... else` is not supported")
        if kind == "tl.static_range":
            vals = [A.cval(self.cx, a, "tl.static_range bounds") for a in args]
            self._unrolled = getattr(self, "_unrolled", 0) + len(range(*vals))
            if self._unrolled > max_static_unroll():
                fail(self.cx, f"tl.static_range({', '.join(map(str, vals))}) unrolls the loop body "
                              f"{len(range(*vals))} times ({self._unrolled} unrolled iterations in this "
                              f"kernel so far); ttbuild stops at {max_static_unroll()}: use tl.range for a "
                              f"loop at run time, or raise TTBUILD_MAX_STATIC_UNROLL")
            for i in range(*vals):
                self.scope[node.target.id] = Constexpr(i)
                self._body_no_return(node.body, "a loop")
            return
        for a in args:
            if isinstance(a, Value) and (a.type.shape or not a.type.scalar.is_int()):
                fail(self.cx, f"range bounds must be integer scalars, got {a.type}")
            if isinstance(a, Constexpr) and (not isinstance(a.value, int) or isinstance(a.value, bool)):
                fail(self.cx, f"range bounds must be integers, got {a.value!r}")
        ity = T.int64 if any(isinstance(a, Value) and a.type.scalar.bits == 64 for a in args) or \
            any(isinstance(a, Constexpr) and not -2**31 <= a.value < 2**31 for a in args) else T.int32
        loc = self.b.loc
        lb, ub, step = (S.cast(self.cx, a, ity) if isinstance(a, Value) else S.to_value(self.cx, a, ity)
                        for a in args)

        # Pass 1 (scratch): which names defined before the loop does the body rebind?
        before = dict(self.scope)
        self.b.open_block()
        self.scope[node.target.id] = self.b.fresh(ity)
        self._body_no_return(node.body, "a loop")
        changed, fields = self._carries(before, loc, ignore=node.target.id)
        self.b.discard_block()
        self.scope = dict(before)
        self.b.loc = loc

        inits = [before[n] for n in changed]
        flat = [x for n, v in zip(changed, inits) for x in self._flat(v, fields.get(n))]
        # Pass 2: the real body with carried values as block arguments.
        self.b.open_block()
        iv = self.b.fresh(ity)
        carried = [self.b.fresh(v.type) for v in flat]
        self.scope[node.target.id] = iv
        self._bind(changed, inits, carried, fields)
        self._body_no_return(node.body, "a loop")
        outs = self._outs(changed, inits, loc, fields)
        self.b.loc = loc
        self.b.op("scf.yield", outs, [])
        region = self.b.close_block([iv] + carried)
        results = self.b.op("scf.for", [lb, ub, step] + flat, [v.type for v in flat], regions=[region],
                            attrs=loop_attrs)
        self.scope = dict(before)
        self._bind(changed, inits, results, fields)

    def visit_While(self, node):
        """`while cond:` → scf.while: the condition in the `before` region (scf.condition), the
        body in the `after` region, rebound names carried through both (Triton's code generator)."""
        if node.orelse:
            fail(self.cx, "`while ... else` is not supported")
        loc, before = self.b.loc, dict(self.scope)
        self.b.open_block()  # scratch pass: which names does the loop rebind?
        self.visit(node.test)
        self._body_no_return(node.body, "a while loop")
        changed, fields = self._carries(before, loc)
        self.b.discard_block()
        self.scope, self.b.loc = dict(before), loc
        inits = [before[n] for n in changed]
        flat = [x for n, v in zip(changed, inits) for x in self._flat(v, fields.get(n))]

        self.b.open_block()
        args = [self.b.fresh(v.type) for v in flat]
        self._bind(changed, inits, args, fields)
        cond = self.visit(node.test)
        if isinstance(cond, Constexpr):
            cond = S.to_value(self.cx, Constexpr(bool(cond.value)), T.int1)
        if cond.type.shape:
            fail(self.cx, f"a `while` condition must be a scalar, got a block of shape {list(cond.type.shape)}")
        cond = S.cast(self.cx, cond, T.int1)
        self.b.op("scf.condition", [cond] + args, [])
        before_region = self.b.close_block(args)

        self.scope = dict(before)
        self.b.open_block()
        args = [self.b.fresh(v.type) for v in flat]
        self._bind(changed, inits, args, fields)
        self._body_no_return(node.body, "a while loop")
        outs = self._outs(changed, inits, loc, fields)
        self.b.loc = loc
        self.b.op("scf.yield", outs, [])
        after_region = self.b.close_block(args)
        results = self.b.op("scf.while", flat, [v.type for v in flat], regions=[before_region, after_region])
        self.scope = dict(before)
        self._bind(changed, inits, results, fields)
