"""Render a stage's CompilationError / ToolError for the build log: file:line:col, source line, caret."""

from __future__ import annotations

from ttbuild.errors import CompilationError, ToolError


def render_error(exc: Exception, loc_path: str | None) -> str:
    """Text of `exc` for the build log.

    A CompilationError that carries only an AST node id (`node_id`, or a backend's `node`
    name from `loc("n17")`) is first located through the parse `loc` table at `loc_path` with
    `ttbuild.frontend.locs.locate` (docs/CONTRACTS.md, "IR locations"). The table is read
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
    table (`loc_table`, bytes) places it (`ttbuild.frontend.locs.locate`); otherwise `exc`
    itself. Never raises: a table that cannot be read leaves the error as it is."""
    if exc.loc is not None or not loc_table:
        return exc
    try:
        from ttbuild.frontend.locs import locate

        return locate(exc, loc_table)  # leaves an error without a node id as it is
    except (ValueError, KeyError, ImportError):
        return exc
