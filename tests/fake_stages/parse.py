"""Fake parse: the kernel's AST dumped without positions, plus a node-id -> (line, col) table."""

import ast
import json
import os
import signal
import time

from ttbuild.errors import CompilationError, Loc

from .lowering import trace

VERSION = 1


def run(inputs, options):
    trace("parse")
    src = inputs["source"].decode()
    # runaway and crashing compiles for the per-stage limits (tests/graph/test_stage_limits.py)
    if "# FAKE_RUNAWAY" in src:
        time.sleep(3600)
    if "# FAKE_CRASH" in src:
        os.kill(os.getpid(), signal.SIGSEGV)
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        line = (e.text or "").rstrip("\n")
        raise CompilationError(e.msg, Loc(options["file"], e.lineno, max((e.offset or 1) - 1, 0), line), stage="parse") from None
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == options["kernel"]]
    if not fns:
        raise CompilationError(f"no @jit function {options['kernel']!r}", Loc(options["file"], 1, 0, ""), stage="parse")
    fn = fns[0]
    ids, nodes, lines = {}, {}, src.splitlines()
    for i, node in enumerate(n for n in ast.walk(fn) if hasattr(n, "lineno")):
        ids[node] = i
        nodes[str(i)] = [node.lineno, node.col_offset]
    withs = [ids[n] for n in ast.walk(fn) if isinstance(n, ast.With)]
    params = [{"name": a.arg,
               "annotation": {"_t": "Attribute", "attr": "constexpr"} if a.annotation is not None else None,
               "default": None} for a in fn.args.args]
    doc = {"kernel": fn.name, "with_nodes": withs,
           "functions": {fn.name: {"params": params, "body": ast.dump(ast.Module(fn.body, []))}}}
    loc = {"file": options["file"], "nodes": nodes,
           "lines": {str(ln): lines[ln - 1] for ln, _ in nodes.values()}}
    return {"json": json.dumps(doc, sort_keys=True).encode(), "loc": json.dumps(loc, sort_keys=True).encode()}
