"""IR locations → source positions (`loc("n17")`, `CompilationError.node_id` through the parse stage's loc table), and the build log's rendering of a stage's error.

Stdlib only and outside the frontend: the driver (ttbuild.compiler) and the build graph place and
render errors here without importing the compiler's frontend.
"""

from __future__ import annotations

import json
import re

from ttbuild.errors import CompilationError, Loc, NotSupportedYet, ToolError

_NAME = re.compile(r'^(?:loc\()?"?n(\d+)"?\)?$')
# A debug build's name location around a file position: loc("n17"("file.py":12:5)).
_NAMED_POS = re.compile(r'^loc\("n(\d+)"\(.*\)\)$')


def node_id_of(loc_name: str) -> int | None:
    """`'n17'`, `'"n17"'`, `'loc("n17")'` or `'loc("n17"("k.py":12:5))'` → 17; anything else
    (e.g. `loc(unknown)`) → None."""
    text = loc_name.strip()
    m = _NAME.match(text) or _NAMED_POS.match(text)
    return int(m.group(1)) if m else None


def node_loc(node_id: int, loc_table: bytes | str | dict) -> Loc | None:
    """The source position of AST node `node_id` from the parse stage's `loc` output
    (docs/CONTRACTS.md: `{"file", "nodes": {id: [line, col] or [line, col, file]}, "lines": {line: text},
    "files": {file: {line: text}}}`)."""
    table = loc_table if isinstance(loc_table, dict) else json.loads(loc_table)
    pos = table["nodes"].get(str(node_id))
    if pos is None:
        return None
    line, col, *other = pos  # a third element: the file of a helper from another project module
    if other:
        return Loc(other[0], line, col, table.get("files", {}).get(other[0], {}).get(str(line), ""))
    return Loc(table["file"], line, col, table.get("lines", {}).get(str(line), ""))


def error_node_id(error: CompilationError) -> int | None:
    """The AST node id an error points at (`node_id`: set by the frontend, and by the backend's
    choke points, ttbuild.backend.diagnostics), or None."""
    return error.node_id


def locate(error: CompilationError, loc_table: bytes | str | dict) -> CompilationError:
    """Return a copy of `error` whose `loc` (file:line:col + source line) comes from its
    node id (`error_node_id`); an error without one, or with one the table lacks, comes back
    unchanged. A NotSupportedYet gets its message rebuilt as "not supported yet: <op> at
    file:line in stage <stage>". The build layer calls this with the parse stage's `loc` output
    when a later stage fails."""
    node_id = error_node_id(error)
    if node_id is None or error.loc is not None:
        return error
    loc = node_loc(node_id, loc_table)
    if loc is None:
        return error
    # Not copy.copy: it re-calls __init__ with `args`, which NotSupportedYet's signature refuses.
    located = type(error).__new__(type(error))
    located.__dict__.update(error.__dict__)
    located.__traceback__ = error.__traceback__
    located.loc = loc
    if isinstance(error, NotSupportedYet) and error.message == NotSupportedYet(error.op, None, error.stage).message:
        located.message = NotSupportedYet(error.op, loc, error.stage).message
    located.args = (located.render(),)
    return located


def locate_warning(warning, loc_table: bytes | str | dict | None):
    """A CompilerWarning with its `loc` filled from its node id through the parse `loc` table
    (unchanged when it has none, or the table lacks it)."""
    from ttbuild.errors import CompilerWarning

    if warning.loc is not None or warning.node_id is None or loc_table is None:
        return warning
    loc = node_loc(warning.node_id, loc_table)
    return warning if loc is None else CompilerWarning(warning.message, warning.node_id, loc)


def render_error(exc: Exception, loc_path: str | None) -> str:
    """Text of `exc` for the build log.

    A CompilationError that carries only an AST node id (`node_id`, or a backend's `node`
    name from `loc("n17")`) is first located through the parse `loc` table at `loc_path` with
    `locate` (docs/CONTRACTS.md, "IR locations"). The table is read
    only here, on failure: it is not a dependency of later stages, so a blank-line edit
    does not rerun them. ToolError keeps its stderr and repro command.
    """
    if isinstance(exc, ToolError):
        return str(exc)
    if isinstance(exc, CompilationError):
        if exc.loc is None and loc_path:
            try:
                with open(loc_path, "rb") as fh:
                    exc = locate_error(exc, fh.read())
            except OSError:
                pass  # an unreadable table must not hide the real error
        return exc.render()
    return str(exc)


def locate_error(exc: CompilationError, loc_table: bytes | None) -> CompilationError:
    """`exc` at its source position when it carries only an AST node id and the parse `loc`
    table (`loc_table`, bytes) places it (`locate`); otherwise `exc`
    itself. Never raises: a table that cannot be read leaves the error as it is."""
    if exc.loc is not None or not loc_table:
        return exc
    try:
        return locate(exc, loc_table)  # leaves an error without a node id as it is
    except (ValueError, KeyError):
        return exc
