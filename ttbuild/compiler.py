"""In-memory compile driver: `compile(source, kernel=, signature=, constexprs=, until=, start=) -> {ext: bytes}` over the build's own stages and options.

One path: the doit actions (graph/actions.py) run every stage through `run_stage` below, and
`compile` chains the same calls in memory along `ttbuild.stages.StageSet.plan`, with the options
the stage table derives, so a kernel compiled here gets the bytes a build writes. Like Triton's
`IRSource`, it may start from TTIR or TTGIR text (`start="ttgir"`, or a `.ttgir` path). Importing
this module pulls in neither MLIR nor llvmlite (the stages import them in `run`), and never the
build graph (the graph depends on this driver, not the other way round).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from ttbuild.errors import CompilationError, CompilerWarning
from ttbuild.options import Options
from ttbuild.signature import SigEntry, parse_entry, parse_signature
from ttbuild.stages import DEFAULT_PACKAGE, SOURCE, DeclaredOptions, Request, StageContractError, StageSet, stage_set

__all__ = ["DEFAULT_PACKAGE", "compile", "run_stage", "stage_cache_key"]


def run_stage(stage: str, inputs: Mapping[str, bytes], options: Mapping[str, Any], *,
              package: StageSet | str | None = None, cache=None, limits=None) -> tuple[dict[str, bytes], bool]:
    """Run stage `stage` of the stage set `package` (default the compiler's) on `inputs`
    (role -> bytes) with its `options` (JSON values; `run` may read only its declared ones).

    cache: None runs the stage; a `ttbuild.cache.Cache` answers from it when the same action
    ran before (`run_cached_hit`; a stage package other than ttbuild.stages is part of the key,
    so test doubles never answer for the real compiler). Returns (role -> bytes for every output
    role the stage table declares, whether it came from the cache). Raises what the stage raises
    (CompilationError, ToolError), and StageContractError (a RuntimeError) when it breaks its
    contract (reads an undeclared option, a missing output role, an output that is not bytes).

    limits: a `ttbuild.limits.StageLimits` the stage's computation runs under (in this
    process's stage runner, `ttbuild.limits.run_limited`; a cache hit runs nothing), raising
    `ttbuild.limits.StageLimitError` at a limit or when the runner dies; None runs it here.
    """
    stages = stage_set(package)
    spec = stages[stage]
    module = _Keyed(stages.module(stage), options, stage, limits)
    if cache is None:
        result, cached = module.run(inputs, None), False
    else:
        from ttbuild.cache import run_cached_hit

        result, cached = run_cached_hit(stage, module, inputs, _key_options(options, stages), cache)
    missing = sorted(set(spec.outputs) - set(result or {}))
    if missing:
        raise StageContractError(f"stage {stage} returned no {', '.join(missing)} output "
                                 f"(got {sorted(result or {})}); ttbuild.stages lists its roles")
    out = {}
    for role in spec.outputs:
        if not isinstance(result[role], (bytes, bytearray)):
            raise StageContractError(f"stage {stage} output {role!r} is {type(result[role]).__name__}, not bytes")
        out[role] = bytes(result[role])
    return out, cached


def _key_options(options: Mapping[str, Any], stages: StageSet) -> Mapping[str, Any]:
    """The options a cache key names: the stage's own, plus its package when it is not the
    real compiler's (test doubles never answer for ttbuild.stages)."""
    return options if stages.package == DEFAULT_PACKAGE else {**options, "_stage_package": stages.package}


def stage_cache_key(stage: str, inputs: Mapping[str, bytes], options: Mapping[str, Any], *,
                    package: StageSet | str | None = None) -> str:
    """The cache's action key of `run_stage(stage, inputs, options, package=...)`: where its
    outputs are stored (`ttbuild cache verify --recompute` checks entries against a fresh run)."""
    from ttbuild.cache.stage import module_action_key

    stages = stage_set(package)
    return module_action_key(stage, _Keyed(stages.module(stage), options), inputs, _key_options(options, stages))


class _Keyed:
    """A stage module whose `run` ignores the key-only options: the key may name more than the
    stage reads (its package), while the stage gets its own options, of which it may read only
    the fields the stage table declares (`ttbuild.stages.DeclaredOptions`)."""

    def __init__(self, module, options: Mapping[str, Any], stage: str = "", limits=None):
        self.VERSION = module.VERSION
        self.__name__ = module.__name__  # the cache key names the code this module runs
        self._module, self._options = module, dict(options)
        self._stage, self._limits = stage, limits

    def run(self, inputs, _key_options):
        if self._limits is None:
            return self._module.run(inputs, DeclaredOptions(self._stage, self._options))
        from ttbuild.limits import run_limited

        return run_limited("ttbuild.stages:run_declared", (self._module.__name__, self._stage, inputs, self._options),
                           self._limits, stage=self._stage)


def compile(source: str | bytes | os.PathLike, *, kernel: str | None = None,
            signature: str | Sequence[str] | None = None, constexprs: Mapping[str, Any] | None = None,
            options: Options | None = None, until: str = "cubin", start: str | None = None,
            file: str | None = None, package: StageSet | str | None = None, cache=None, limits=None,
            **opts: Any) -> dict[str, bytes]:
    """Compile one kernel in memory; returns {ext: bytes} for every stage it ran.

    source: a path (`.py` kernel file, or `.ttir` / `.ttgir` / `.llir` / `.ptx` to start from
    that stage's output, as Triton's IRSource), or the text/bytes itself (Python source unless
    `start` says otherwise). kernel: the @jit function's name (default: the file's only @jit
    function). signature: `"*fp32:16,i32"` or its entries, one per non-constexpr parameter
    (needed from source; `ttbuild.signature` grammar). constexprs: name -> value.
    options / **opts: `ttbuild.options.Options` or its fields (num_warps=8, target="cuda:80",
    ...). until: the last stage to run (parse, ttir, ttgir, llir, ptx, cubin). start: the stage
    whose output `source` is ("ttir", "ttgir", ...). file: the name locations and
    diagnostics give the kernel file (default: the path's name, or "<string>"). package: the
    `ttbuild.stages.StageSet` (or its package name: test doubles); cache: a
    `ttbuild.cache.Cache` to read and fill (default none); limits: a `ttbuild.limits.StageLimits`
    each stage runs under, in the stage runner (default none: in this process).

    Keys of the result: parse gives "json" and "loc", ttir "ttir" and "abi" (the kernel ABI,
    ttbuild.frontend.abi), every later stage its own name ("ttgir", "llir", "ptx", "cubin"). Raises CompilationError (a bad kernel, at
    file:line:col when the parse table can place it; a bad signature or option), ToolError
    (ptxas), ValueError for a bad `until` / `start` or a missing kernel/signature,
    FileNotFoundError for a path that does not exist.
    """
    stages = stage_set(package)
    data, suffix = _read(source, stages)
    if start is None:
        start = stages.stage_of_suffix(suffix)
    elif start == SOURCE:
        start = None
    steps = stages.plan(until, start)
    if file is None:
        file = Path(source).name if isinstance(source, os.PathLike) or _is_path(source, stages) else "<string>"
    options = dataclasses.replace(options or Options(), **opts) if opts else (options or Options())
    names = [s.stage.name for s in steps]
    params = _params(signature) if "ttir" in names and start is None else ()
    if names[0] == "parse" and kernel is None:
        kernel = _only_kernel(data, file)
    per_stage = stages.options(Request(kernel or "", file, params, constexprs or {}, options))
    steps = stages.plan(until, start, per_stage)

    produced: dict[tuple[str, str], bytes] = {}
    result: dict[str, bytes] = {}
    for step in steps:
        stage = step.stage.name
        inputs = {role: data if src[0] == SOURCE else produced[src] for role, src in step.inputs.items()}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CompilerWarning)
                outputs, _ = run_stage(stage, inputs, per_stage[stage], package=stages, cache=cache, limits=limits)
        except CompilationError as exc:
            raise _located(exc, produced.get(("parse", "loc"))) from None
        for w in caught:  # Triton's warnings, placed at file:line:col (CompilerWarning)
            if isinstance(w.message, CompilerWarning):
                from ttbuild.locs import locate_warning

                warnings.warn(locate_warning(w.message, produced.get(("parse", "loc"))), stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        for role, blob in outputs.items():
            produced[(stage, role)] = blob
            result[role] = blob
    return result


def _is_path(source, stages: StageSet) -> bool:
    """True for a str naming a kernel or IR file (`k.py`, `k.ttgir`, ...); FileNotFoundError
    when it names one that does not exist (rather than compiling the name as source text)."""
    if not (isinstance(source, str) and "\n" not in source and len(source) < 4096
            and (Path(source).suffix == ".py" or stages.stage_of_suffix(Path(source).suffix))):
        return False
    if not Path(source).is_file():
        raise FileNotFoundError(f"no such kernel or IR file: {source}")
    return True


def _read(source, stages: StageSet) -> tuple[bytes, str]:
    """(bytes, file suffix or "") of a path, text or bytes."""
    if isinstance(source, os.PathLike) or _is_path(source, stages):
        path = Path(source)
        return path.read_bytes(), path.suffix
    if isinstance(source, str):
        return source.encode("utf-8"), ""
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), ""
    raise TypeError(f"source must be a path, str or bytes, got {type(source).__name__}")


def _params(signature) -> list[SigEntry]:
    if signature is None:
        raise ValueError("compiling from source needs signature=, e.g. '*fp32:16,*fp32:16,i32'")
    try:
        if isinstance(signature, str):
            return parse_signature(signature)
        return [parse_entry(entry) for entry in signature]
    except ValueError as exc:
        raise CompilationError(f"bad signature {signature!r}: {exc}") from None


def _only_kernel(data: bytes, file: str) -> str:
    """The name of the one `@jit` / `@triton.jit` function of a source; ValueError unless exactly one."""
    try:
        tree = ast.parse(data)
    except SyntaxError:
        raise ValueError(f"{file}: pass kernel= (the source does not parse, so no @jit function can be found)") from None

    def is_jit(dec) -> bool:
        dec = dec.func if isinstance(dec, ast.Call) else dec
        return (isinstance(dec, ast.Name) and dec.id == "jit") or (isinstance(dec, ast.Attribute) and dec.attr == "jit")

    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(map(is_jit, n.decorator_list))]
    if len(names) != 1:
        raise ValueError(f"{file} has {len(names)} @jit functions ({', '.join(names) or 'none'}): pass kernel=")
    return names[0]


def _located(exc: CompilationError, loc_table: bytes | None) -> CompilationError:
    """`exc` placed at file:line:col through the parse `loc` table when it carries only a node id."""
    from ttbuild.locs import locate_error

    return locate_error(exc, loc_table)
