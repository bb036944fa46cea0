"""Compiler diagnostics: errors that carry (file, line, col) and render with the source line and a caret."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A source position: `file` as given to the compiler (relative to the kernel library),
    1-based `line`, 0-based `col` (Python's ast convention), and the text of that line."""

    file: str
    line: int
    col: int
    source_line: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


class TTBuildError(Exception):
    """Base class of every error ttbuild raises on purpose."""


def with_caret(head: str, loc) -> str:
    """`head`, then the source line of `loc` and a caret under its column (tabs kept so the caret
    lines up in a terminal); `head` alone without a location or source line."""
    if not loc or not loc.source_line:
        return head
    text = loc.source_line.rstrip("\n")
    pad = "".join("\t" if ch == "\t" else " " for ch in text[: loc.col])
    return f"{head}\n    {text}\n    {pad}^"


class CompilationError(TTBuildError):
    """A kernel the compiler rejects, at a source location.

    str() renders like a C compiler: `file:line:col: error: message`, then the source line
    and a caret under the column (col printed 1-based, as editors count).
    """

    # The AST node id (`loc("n17")`) of a later stage's failure, before
    # `ttbuild.locs.locate` turns it into a `loc` through the parse loc table.
    node_id: int | None = None

    def __init__(self, message: str, loc: Loc | None = None, *, stage: str | None = None,
                 node_id: int | None = None):
        self.message = message
        self.loc = loc
        self.stage = stage
        self.node_id = node_id
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.loc}: error: {self.message}" if self.loc else f"error: {self.message}"
        if self.stage:
            head += f" [stage {self.stage}]"
        return with_caret(head, self.loc)


class CompilerWarning(UserWarning):
    """A construct Triton accepts with a warning (a non-boolean `tl.where` condition, ...), raised
    through `warnings.warn` by a stage; `node_id` places it until `located` (Python's warning
    machinery, then `ttbuild.compile` and the build, which print `file:line:col: warning: ...`)."""

    def __init__(self, message: str, node_id: int | None = None, loc: Loc | None = None):
        self.message, self.node_id, self.loc = message, node_id, loc
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.loc}: warning: {self.message}" if self.loc else f"warning: {self.message}"
        return with_caret(head, self.loc)


class NotSupportedYet(CompilationError):
    """An op the current stage cannot lower yet: "not supported yet: <op> at file:line in stage <stage>"."""

    def __init__(self, op: str, loc: Loc | None, stage: str):
        self.op = op
        where = f" at {loc.file}:{loc.line}" if loc else ""
        CompilationError.__init__(self, f"not supported yet: {op}{where} in stage {stage}", loc)
        self.stage = stage


class ToolError(TTBuildError):
    """An external tool (ptxas, nvJitLink) failed: carries its stderr and a command line to reproduce."""

    def __init__(self, tool: str, stderr: str, repro: str):
        self.tool, self.stderr, self.repro = tool, stderr, repro
        super().__init__(f"{tool} failed:\n{stderr.rstrip()}\nreproduce with:\n  {repro}")
