"""Kernel source → canonical description: finds `@jit` functions with pure `ast`, keeps what the kernel reaches, numbers nodes.

The file is never imported or executed, so a kernel file that imports torch or triton at top
level builds without them. Output format: docs/CONTRACTS.md "parse output".
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

from ttbuild.canonical import canonical_bytes
from ttbuild.errors import CompilationError, Loc
from ttbuild.pyeval.values import dotted_name, resolve_name

from .astjson import encode

SCHEMA = "ttbuild.parse/1"
# Modules whose `jit` marks kernels and whose `constexpr` marks compile-time constants.
_JIT_MODULES = ("triton", "ttbuild")
_LANG_MODULES = ("triton.language", "ttbuild.language")


def _dtype_default(node: ast.expr, imports: dict[str, str]) -> str | None:
    """A default that names a dtype of triton.language (`tl.float32`): its row form (`fp32`), the
    spelling variants and the metadata give a dtype constexpr; else None."""
    from .expressions import _DTYPE_ATTRS  # noqa: PLC0415 - expressions imports the code generator

    full = resolve_name(dotted_name(node), imports)
    module, _, attr = (full or "").rpartition(".")
    return _DTYPE_ATTRS.get(attr) if module in _LANG_MODULES else None


def dumps(obj) -> bytes:
    """The canonical JSON spelling every frontend artifact uses (sorted keys, no spaces)."""
    return canonical_bytes(obj)


@dataclass
class ModuleInfo:
    """What the module level of a kernel file declares: imports, @jit functions, literal globals."""

    imports: dict[str, str] = field(default_factory=dict)
    jit_functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    globals: dict[str, dict] = field(default_factory=dict)


def _is_jit(dec: ast.AST, imports: dict[str, str]) -> bool:
    if isinstance(dec, ast.Call):  # @triton.jit(do_not_specialize=...)
        dec = dec.func
    full = resolve_name(dotted_name(dec), imports)
    return full in {f"{m}.jit" for m in _JIT_MODULES} or full in {"triton.runtime.jit.jit"}


def _is_constexpr(node: ast.AST | None, imports: dict[str, str]) -> bool:
    full = resolve_name(dotted_name(node), imports) if node is not None else None
    return full in {f"{m}.constexpr" for m in _LANG_MODULES}


def _json_literal(node: ast.AST):
    """A module-level literal as a JSON value, or raise ValueError if it is not one."""
    value = ast.literal_eval(node)
    ok = (int, float, bool, str, type(None))
    if isinstance(value, tuple) and all(isinstance(v, ok) for v in value):
        value = list(value)
    elif not isinstance(value, ok):
        raise ValueError(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)
    return value


def scan_module(tree: ast.Module) -> ModuleInfo:
    """Collect import aliases, @jit functions and literal globals at module level (no execution)."""
    info = ModuleInfo()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    info.imports[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    info.imports[head] = head
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for a in stmt.names:
                info.imports[a.asname or a.name] = f"{stmt.module}.{a.name}"
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and any(_is_jit(d, info.imports) for d in stmt.decorator_list):
            info.jit_functions[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            value, constexpr = stmt.value, False
            if isinstance(stmt, ast.AnnAssign) and _is_constexpr(stmt.annotation, info.imports):
                constexpr = True
            if (isinstance(value, ast.Call) and _is_constexpr(value.func, info.imports)
                    and len(value.args) == 1 and not value.keywords):
                value, constexpr = value.args[0], True
            try:
                info.globals[targets[0].id] = {"constexpr": constexpr, "value": _json_literal(value)}
            except (ValueError, SyntaxError, TypeError):
                info.globals.pop(targets[0].id, None)  # a later non-literal rebinding hides it
    return info


def _names_used(fn: ast.FunctionDef) -> set[str]:
    # Decorators are not compiled: `@triton.jit` must not pull `triton` into the output.
    roots = [fn.args, *fn.body] + ([fn.returns] if fn.returns else [])
    return {n.id for r in roots for n in ast.walk(r) if isinstance(n, ast.Name)}


def _strip_docstring(fn: ast.FunctionDef) -> None:
    if (fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
            and isinstance(fn.body[0].value.value, str)):
        fn.body = fn.body[1:] or [ast.Pass(lineno=fn.body[0].lineno, col_offset=fn.body[0].col_offset)]


def _too_deep(file: str, lines: list[str]) -> CompilationError:
    """Python's parser (or this encoder) ran out of recursion on a deeply nested expression:
    Python does not say where, so the line with the most operators is named, the likely one."""
    def weight(text: str) -> int:
        return sum(text.count(c) for c in "+-*/%&|^<>(")
    line = max(range(len(lines)), key=lambda i: weight(lines[i]), default=0)
    text = lines[line] if lines else ""
    return CompilationError("expression nested too deeply for Python's parser (RecursionError): "
                            "split it into smaller expressions with intermediate variables",
                            Loc(file, line + 1, len(text) - len(text.lstrip()), text), stage="parse")


def _utf8(source: bytes, file: str) -> str:
    """`source` decoded; CompilationError at the first byte that is not UTF-8 (Python source is
    UTF-8, PEP 3120; a `# coding:` line is not honoured: the kernel file must be UTF-8)."""
    try:
        return source.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = source.rfind(b"\n", 0, exc.start) + 1
        line_end = source.find(b"\n", exc.start)
        shown = source[line_start:line_end if line_end >= 0 else len(source)].decode("utf-8", "replace")
        col = len(source[line_start:exc.start].decode("utf-8", "replace"))
        raise CompilationError(f"the file is not UTF-8: byte 0x{source[exc.start]:02x} ({exc.reason}); "
                               "save it as UTF-8", Loc(file, source.count(b"\n", 0, exc.start) + 1, col, shown),
                               stage="parse") from None


def _parse(text: str, file: str, lines: list[str]) -> ast.Module:
    """The module's AST. Raises CompilationError at the position of a syntax error (Python's
    message), or for source nested past the parser's depth."""
    try:
        return ast.parse(text, filename=file)
    except RecursionError:
        raise _too_deep(file, lines) from None
    except SyntaxError as e:
        line = e.lineno or 1
        src = e.text if e.text is not None else (lines[line - 1] if 0 < line <= len(lines) else "")
        raise CompilationError(f"invalid syntax: {e.msg}",
                               Loc(file, line, max((e.offset or 1) - 1, 0), src.rstrip("\n")),
                               stage="parse") from None


def _reached(kernel: str, info, scope) -> tuple[set, set]:
    """(the @jit functions `kernel` reaches, itself and its callees transitively; every name they
    use), each function's names placed by the module scope when there is one."""
    reached, todo, used = set(), [kernel], set()
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        names = _names_used(info.jit_functions[name])
        if scope is not None:
            names = names | scope.place(name, names)
        used |= names
        todo.extend(n for n in names if n in info.jit_functions and n not in reached)
    return reached, used


def _params(fn: ast.FunctionDef, info) -> list[dict]:
    """The description's parameter rows of `fn`: name, default (a JSON literal, or the value of a
    module global it names; None otherwise), annotation as source text, and has_default where the
    default is known (None included)."""
    args = fn.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = []
    for a, d in zip(positional, defaults):
        try:
            default, literal = (_json_literal(d), True) if d is not None else (None, False)
        except (ValueError, SyntaxError, TypeError):
            default, literal = None, False
            if isinstance(d, ast.Name) and d.id in info.globals:  # `= MODE_X`, a global the module set
                default, literal = info.globals[d.id]["value"], True
            elif (dtype := _dtype_default(d, info.imports)) is not None:  # `acc: tl.constexpr = tl.float32`
                default, literal = dtype, True
        entry = {"name": a.arg, "default": default,
                 "annotation": ast.unparse(a.annotation) if a.annotation else None}
        if literal:  # a literal default, None included (`IMP: tl.constexpr = None`)
            entry["has_default"] = True
        params.append(entry)
    return params


def canonicalize(source: bytes | str, kernel: str, file: str, project=None, module: str | None = None) -> tuple[dict, dict]:
    """Return (description, loc table) for `kernel` in `source`; see docs/CONTRACTS.md.

    project: a ttbuild.pyeval.modules.Project holding this file as `module` and the project
    modules it imports: names the file's own scan cannot place (imports under `if`/`try`,
    aliases, re-exported `triton`/`tl`, other modules' constexprs and @jit helpers, kernels made
    by call) are taken from the module as Python would have executed it (ttbuild.frontend.modscope).

    Raises CompilationError at the offending position for a syntax error, and one listing the
    file's @jit functions when `kernel` is not among them.
    """
    text = _utf8(source, file) if isinstance(source, bytes) else source
    lines = text.splitlines()
    info = scan_module(_parse(text, file, lines))
    scope = None
    if project is not None and module is not None:
        from .modscope import ModuleScope

        scope = ModuleScope(project, module, info, file)
        scope.find_kernel(kernel)
    if kernel not in info.jit_functions:
        found = ", ".join(sorted(info.jit_functions)) or "none"
        raise CompilationError(f"kernel {kernel!r} not found in {file}; @jit functions there: {found}",
                               stage="parse")

    reached, used = _reached(kernel, info, scope)

    nodes: dict[str, list[int]] = {}
    line_text: dict[str, str] = {}
    counter = iter(range(1 << 62))

    other_files: dict[str, dict[str, str]] = {}  # a helper of another project module: its file's lines
    where = [file, lines]  # the file of the function being encoded, and its lines

    def next_id(node: ast.AST) -> int:
        i = next(counter)
        col = node.col_offset
        src_file, src_lines = where
        if 0 < node.lineno <= len(src_lines):  # ast counts UTF-8 bytes; carets need characters
            col = len(src_lines[node.lineno - 1].encode()[:col].decode("utf-8", "replace"))
        nodes[str(i)] = [node.lineno, col] if src_file == file else [node.lineno, col, src_file]
        if 0 < node.lineno <= len(src_lines):
            texts = line_text if src_file == file else other_files.setdefault(src_file, {})
            texts[str(node.lineno)] = src_lines[node.lineno - 1]
        return i

    functions = {}
    for name in sorted(reached):
        fn = info.jit_functions[name]
        home = scope.home.get(name) if scope is not None else None
        where[:] = [home.file, home.source.lines] if home is not None and home.source is not None else [file, lines]
        fn.decorator_list = []
        _strip_docstring(fn)
        params = _params(fn, info)
        try:
            body = encode(fn, next_id)
        except RecursionError:
            raise _too_deep(file, lines) from None
        functions[name] = {"params": params, "body": body}

    desc = {
        "schema": SCHEMA, "kernel": kernel, "file": file, "functions": functions,
        "globals": {k: v for k, v in sorted(info.globals.items()) if k in used and k not in reached},
        "imports": {k: v for k, v in sorted(info.imports.items()) if k in used},
    }
    if scope is not None and scope.constexpr_functions:  # only kernels that call one carry the key
        desc["constexpr_functions"] = dict(sorted(scope.constexpr_functions.items()))
    loc = {"file": file, "nodes": nodes, "lines": line_text}
    if other_files:  # node entries [line, col, file] point into these
        loc["files"] = {f: other_files[f] for f in sorted(other_files)}
    return desc, loc
