"""parse stage: kernel source bytes → canonical JSON description + location table (docs/CONTRACTS.md)."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 3  # a tl dtype default (`= tl.float32`) is a default, in its row form


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """`inputs["source"]`: the kernel file; `options`: `kernel` (name), `file` (path relative to the
    kernel library root). A project kernel (docs/CONTRACTS.md, "Project modules") also has the
    options `module` (its dotted name), `modules` (name -> file of each project module it may
    import, each given as the input `module:<name>`), `env` (environment variable -> value or None,
    the only ones its modules may read) and `target` (and `gpu`, a GPU model's name, when the row
    names one) when they read device facts. Returns `json`
    (no positions: comment/blank-line edits leave it byte-identical) and `loc` (node id → line,
    col). Raises CompilationError on a syntax error, a kernel name the file does not define as
    @jit, and a module-level construct a kernel needs that cannot be read (file:line:col)."""
    from ttbuild.frontend.canon import canonicalize, dumps

    project, module = None, options.get("module")
    if module is not None:
        from ttbuild.pyeval.modules import Project
        from ttbuild.target import device_facts

        files = {name: (file, inputs["source"] if name == module else inputs[f"module:{name}"])
                 for name, file in options["modules"].items()}
        target = options.get("target")
        project = Project(files, env=options.get("env", {}), strict_env=True,
                          **device_facts(target, options.get("gpu") or ""))
    desc, loc = canonicalize(inputs["source"], options["kernel"], options["file"], project, module)
    return {"json": dumps(desc), "loc": dumps(loc)}
