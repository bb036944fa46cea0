"""IR locations → source positions: `loc("n17")` and `CompilationError.node_id` resolved through the parse stage's loc table."""

from __future__ import annotations

import copy
import json
import re

from ttbuild.errors import CompilationError, Loc

_NAME = re.compile(r'^(?:loc\()?"?n(\d+)"?\)?$')


def node_id_of(loc_name: str) -> int | None:
    """`'n17'`, `'"n17"'` or `'loc("n17")'` → 17; anything else (e.g. `loc(unknown)`) → None."""
    m = _NAME.match(loc_name.strip())
    return int(m.group(1)) if m else None


def node_loc(node_id: int, loc_table: bytes | str | dict) -> Loc | None:
    """The source position of AST node `node_id` from the parse stage's `loc` output
    (docs/CONTRACTS.md: `{"file", "nodes": {id: [line, col]}, "lines": {line: text}}`)."""
    table = loc_table if isinstance(loc_table, dict) else json.loads(loc_table)
    pos = table["nodes"].get(str(node_id))
    if pos is None:
        return None
    line, col = pos
    return Loc(table["file"], line, col, table.get("lines", {}).get(str(line), ""))


def locate(error: CompilationError, loc_table: bytes | str | dict) -> CompilationError:
    """Return a copy of `error` whose `loc` (file:line:col + source line) comes from its
    `node_id`; an error without a node id, or with one the table lacks, comes back unchanged.
    The build layer calls this with the parse stage's `loc` output when a later stage fails."""
    if error.node_id is None or error.loc is not None:
        return error
    loc = node_loc(error.node_id, loc_table)
    if loc is None:
        return error
    located = copy.copy(error)
    located.loc = loc
    located.args = (located.render(),)
    return located
