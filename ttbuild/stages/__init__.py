"""The stage table: each compiler stage declared once (module, roles, options, tools, files), and the one `plan()` every driver chains.

A stage is a module `<package>.<name>` with `VERSION` and a pure `run(inputs, options) -> outputs`
(docs/CONTRACTS.md, "Stage modules"). `Stage` records what the rest of ttbuild needs to know of
it: the roles it reads and writes, the option fields its `run` may read (`declared`: reading any
other is a StageContractError), the tools whose versions key it (`ttbuild.cache.keys`), and the
file names its outputs take. `compile()` (ttbuild/compiler.py), the build graph (ttbuild/graph)
and the multi-target chain all take their order and wiring from `plan()`. A `StageSet` is the
table bound to the package whose modules run it (tests pass a package of doubles). This package
stays cheap to import: stage modules import MLIR and llvmlite inside `run`, never at the top.
"""

from __future__ import annotations

import functools
import importlib
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from ttbuild import tma  # stdlib only, like this package

DEFAULT_PACKAGE = "ttbuild.stages"
SOURCE = "source"  # the producer name of what a chain starts from (a kernel file or IR text)
FILE = "file"  # the producer name of an extra input file a driver found: (FILE, its path)


class StageContractError(RuntimeError):
    """A stage or its driver broke the stage table's contract: a `run` read an option its stage
    does not declare, or returned a missing or non-bytes output role. A bug, never a user error."""


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: the table is a constant
class Stage:
    """One stage, declared once.

    name: the stage (and its module's) name. input: the role of its main input; parent: the
    stage whose `input`-role output that is (None for parse, which reads the kernel file).
    outputs: its output roles, the first one the stage's product. files: role -> the suffix
    of the file a build writes it to (`artifacts/<stage>/<key>/<kernel><suffix>`). options:
    the option fields its `run` may read. tools: what keys its action in the cache besides
    inputs and options (`ttbuild.cache.keys.TOOL_VERSIONS`). starts: file suffixes whose
    content is this stage's output (`compile("k.ttgir")` starts after ttgir). derive: the
    stage's options from a `Request` (JSON values). extra: stage options -> role -> (stage,
    role) inputs it reads beyond its parent's output. extra_files: whether the graph may add
    input files of its own finding (a parse stage's imported project files). doc: what it does,
    in a line (the build graph's task group says it).
    """

    name: str
    input: str
    parent: str | None
    outputs: tuple[str, ...]
    files: Mapping[str, str]
    options: tuple[str, ...]
    tools: tuple[str, ...]
    derive: Callable[["Request"], dict]
    starts: tuple[str, ...] = ()
    extra: Callable[[Mapping[str, Any]], dict] | None = None
    extra_files: bool = False
    doc: str = ""

    @property
    def product(self) -> str:
        """The output role that is the stage's product (parse: `json`)."""
        return self.outputs[0]


@dataclass(frozen=True)
class Request:
    """What per-stage options derive from: the kernel's name, its file as locations name it,
    its signature entries (`ttbuild.signature.SigEntry`), constexpr values and `Options`."""

    kernel: str
    file: str
    params: Sequence[Any]
    constexprs: Mapping[str, Any]
    options: Any  # ttbuild.options.Options

    @functools.cached_property
    def target(self):
        """`options.target` parsed once (`ttbuild.target.Target`): three stages derive from it."""
        return self.options.target_info


def _parse_options(r: Request) -> dict:
    return {"kernel": r.kernel, "file": r.file}


def _ttir_options(r: Request) -> dict:
    # `debug` and `tma` key ttir only when on, so other variants keep their keys and outputs.
    tma_on = tma.enabled(r.target.capability, r.options.disable_tma)
    return {"signature": [str(p) for p in r.params], "constexprs": dict(r.constexprs),
            **({"debug": True} if r.options.debug else {}), **({"tma": True} if tma_on else {})}


def _ttgir_options(r: Request) -> dict:
    o = r.options  # `disable_mma_v3` keys ttgir only when on, so other variants keep their keys
    return {"num_warps": o.num_warps, "num_ctas": o.num_ctas, "num_stages": o.num_stages, "target": o.target,
            **({"disable_mma_v3": True} if o.disable_mma_v3 else {})}


def _llir_options(r: Request) -> dict:
    return {"target": r.options.target, "enable_fp_fusion": r.options.enable_fp_fusion, "debug": r.options.debug}


def _ptx_options(r: Request) -> dict:
    return {"arch": r.target.arch, "ptx_version": r.target.ptx_version}


def _cubin_options(r: Request) -> dict:
    return {"arch": r.target.arch, "ptxas_options": list(r.options.ptxas_options)}


def _ttir_extra(options: Mapping[str, Any]) -> dict:
    # A debug ttir also reads the parse `loc` table, to write real file:line positions into its
    # locations (the assert messages name them). Only then: a non-debug ttir must not rerun on a
    # blank-line edit.
    return {"loc": ("parse", "loc")} if options.get("debug") else {}


TABLE: tuple[Stage, ...] = (
    Stage("parse", "source", None, ("json", "loc"), {"json": ".json", "loc": ".loc.json"},
          # module, modules, env, target, gpu: a project kernel's (ttbuild.graph.keys.parse_project_options)
          ("kernel", "file", "module", "modules", "env", "target", "gpu"), ("ttbuild", "python"), _parse_options,
          extra_files=True,
          doc="kernel source -> canonical kernel description (JSON) + location table"),
    Stage("ttir", "json", "parse", ("ttir", "abi"), {"ttir": ".ttir", "abi": ".abi.json"},
          ("signature", "constexprs", "debug", "tma"),
          ("ttbuild", "mlir", "libdevice"), _ttir_options, (".ttir",), _ttir_extra,
          doc="kernel description -> TTIR (MLIR generic form) + the kernel ABI it emitted"),
    Stage("ttgir", "ttir", "ttir", ("ttgir",), {"ttgir": ".ttgir"},
          ("num_warps", "num_ctas", "num_stages", "target", "disable_mma_v3"),
          ("ttbuild", "mlir"), _ttgir_options, (".ttgir",), doc="TTIR -> TTGIR with layout encodings"),
    Stage("llir", "ttgir", "ttgir", ("llir",), {"llir": ".llir"}, ("target", "enable_fp_fusion", "debug"),
          ("ttbuild", "llvm", "libdevice"), _llir_options, (".llir", ".ll"), doc="TTGIR -> LLVM IR"),
    Stage("ptx", "llir", "llir", ("ptx",), {"ptx": ".ptx"}, ("arch", "ptx_version"),
          ("ttbuild", "llvm"), _ptx_options, (".ptx",), doc="LLVM IR -> PTX"),
    Stage("cubin", "ptx", "ptx", ("cubin",), {"cubin": ".cubin"}, ("arch", "ptxas_options"),
          ("ttbuild", "ptxas"), _cubin_options, doc="PTX -> cubin (ptxas)"),
)
STAGES = tuple(s.name for s in TABLE)
BY_NAME = {s.name: s for s in TABLE}


@dataclass(frozen=True)
class Step:
    """One stage of a plan: `inputs` maps each input role to the (producer, role) it reads,
    the producer being an earlier stage or SOURCE (what the chain starts from)."""

    stage: Stage
    inputs: Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class StageSet:
    """The stage table bound to the package whose modules run it (a value: compare, hash and
    pickle it). `StageSet()` is the compiler's own; `StageSet("fake_stages")` a test double's."""

    package: str = DEFAULT_PACKAGE
    table: tuple[Stage, ...] = field(default=TABLE, repr=False)

    def __reduce__(self):
        # Pickled by name (doit's -j workers get the action's arguments pickled): the compiler's
        # table is a module constant, so an unpickled set equals the original; memos stay behind.
        if self.table is TABLE:
            return (StageSet, (self.package,))
        return (StageSet, (self.package, self.table))

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """The stage names in order."""
        return tuple(s.name for s in self.table)

    def __getitem__(self, name: str) -> Stage:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no stage {name!r}; stages: {', '.join(self.names)}") from None

    @functools.cached_property
    def _by_name(self) -> dict[str, Stage]:
        return {s.name: s for s in self.table}

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.table)

    def module_name(self, stage: str) -> str:
        """The dotted name of `stage`'s module."""
        return f"{self.package}.{stage}"

    def module(self, stage: str):
        """`stage`'s module (cheap: heavy imports live inside `run`); ImportError when missing."""
        return importlib.import_module(self.module_name(stage))

    @functools.cached_property
    def versions(self) -> dict[str, int]:
        """`VERSION` of every stage module; ImportError for a missing module or VERSION."""
        out = {}
        for stage in self.names:
            version = getattr(self.module(stage), "VERSION", None)
            if not isinstance(version, int) or isinstance(version, bool):
                raise ImportError(f"{self.module_name(stage)} has no integer VERSION")
            out[stage] = version
        return out

    def options(self, request: Request) -> dict[str, dict[str, Any]]:
        """Stage name -> that stage's options (JSON values) for `request`."""
        return {s.name: s.derive(request) for s in self.table}

    def plan(self, until: str = "cubin", start: str | None = None,
             options: Mapping[str, Mapping[str, Any]] | None = None,
             extra: Mapping[str, Mapping[str, tuple[str, str]]] | None = None) -> tuple[Step, ...]:
        """The steps from `start` to `until`, each with the inputs it reads.

        start: None runs from parse (its input from SOURCE); a stage name means SOURCE holds that
        stage's product, and the steps begin after it. options: per-stage options, for inputs a
        stage reads only under some options (a debug ttir's `loc`). extra: stage -> role ->
        (producer, role) of further inputs the caller found (a stage with `extra_files`), a file
        being (FILE, its path). Steps and their inputs are shared between calls: read-only.
        Raises ValueError for an unknown stage or an empty range.
        """
        wiring = () if options is None else tuple(
            (s.name, tuple(s.extra(options.get(s.name, {})).items())) for s in self._with_extra)
        memo = (until, start, wiring)
        if extra is None and memo in self._plans:
            return self._plans[memo]
        names = self.names
        if until not in names:
            raise ValueError(f"until must be one of {', '.join(names)}, got {until!r}")
        if start is not None and start not in names[:-1]:
            raise ValueError(f"start must be one of {', '.join(names[1:-1])} (the stage whose output "
                             f"the source holds), got {start!r}")
        first = 0 if start is None else names.index(start) + 1
        chosen = self.table[first: names.index(until) + 1]
        if not chosen:
            raise ValueError(f"nothing to run: source is already {start} and until={until!r}")
        steps = []
        for s in chosen:
            if s.parent is None or s.parent == start:
                inputs = {s.input: (SOURCE, s.input)}
            else:
                inputs = {s.input: (s.parent, s.input)}
            if s.extra is not None and options is not None:
                inputs.update({role: src for role, src in s.extra(options.get(s.name, {})).items()
                               if src[0] != start and (start is None or names.index(src[0]) > names.index(start))})
            if extra and s.name in extra:
                if not s.extra_files:
                    raise StageContractError(f"stage {s.name} declares no extra input files")
                inputs.update(extra[s.name])
            steps.append(Step(s, types.MappingProxyType(inputs)))
        if extra is None:
            self._plans[memo] = tuple(steps)
        return tuple(steps)

    @functools.cached_property
    def _with_extra(self) -> tuple[Stage, ...]:
        return tuple(s for s in self.table if s.extra is not None)

    @functools.cached_property
    def _plans(self) -> dict:
        """Plans computed so far: (until, start, the extra inputs options select) -> steps."""
        return {}

    def stage_of_suffix(self, suffix: str) -> str | None:
        """The stage whose product a file with `suffix` holds (".ttgir" -> "ttgir"), or None."""
        return next((s.name for s in self.table if suffix in s.starts), None)


DEFAULT = StageSet()


def stage_set(value: "StageSet | str | None" = None) -> StageSet:
    """`value` as a StageSet: a StageSet as it is, a package name bound to the table, None the default."""
    if value is None:
        return DEFAULT
    if isinstance(value, StageSet):
        return value
    return DEFAULT if value == DEFAULT_PACKAGE else StageSet(value)


class DeclaredOptions(dict):
    """A stage's options as its `run` sees them: reading a field its stage does not declare
    (`[]`, `get`, `in`) is a StageContractError; an absent declared field reads as absent, so
    `get` gives its default. A dict, so the stage may hand its options on whole (JSON)."""

    def __init__(self, stage: str, options: Mapping[str, Any], declared: Sequence[str] | None = None):
        super().__init__(options)
        self._stage = stage
        self._declared = frozenset(BY_NAME[stage].options if declared is None else declared)

    def _check(self, name: str) -> None:
        if name not in self._declared:
            raise StageContractError(f"stage {self._stage} read option {name!r}, which it does not declare "
                                     f"(ttbuild.stages: {', '.join(sorted(self._declared))})")

    def __getitem__(self, name: str):
        self._check(name)
        return super().__getitem__(name)

    def get(self, name: str, default=None):
        """`self[name]` when present, else `default`; StageContractError for an undeclared name."""
        self._check(name)
        return super().get(name, default)

    def __contains__(self, name) -> bool:
        self._check(name)
        return super().__contains__(name)


def run_declared(module: str, stage: str, inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict:
    """`<module>.run(inputs, options)` with `options` as DeclaredOptions of `stage`: what the
    driver runs, here or in the stage runner (whose protocol carries plain data only)."""
    return importlib.import_module(module).run(inputs, DeclaredOptions(stage, options))


class OptionView:
    """A validated `ttbuild.options.Options` seen through one stage's declared fields: other
    fields (and `arch` / `target_info` without `target`) raise StageContractError."""

    _DERIVED = {"arch": "target", "target_info": "target"}

    def __init__(self, stage: str, options, declared: frozenset):
        self._stage, self._opts, self._declared = stage, options, declared

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._declared or self._DERIVED.get(name) in self._declared:
            return getattr(self._opts, name)
        raise StageContractError(f"stage {self._stage} read option {name!r}, which it does not declare "
                                 f"(ttbuild.stages: {', '.join(sorted(self._declared))})")


def declared_options(stage: str, options: Mapping[str, Any]) -> OptionView:
    """The `Options` fields stage `stage` declares, validated (absent ones take the defaults);
    reading an undeclared one raises StageContractError. A bad value raises CompilationError
    naming the stage (a stage reports bad input, never a traceback)."""
    from ttbuild.errors import CompilationError
    from ttbuild.options import FIELD_NAMES, OptionError, Options

    declared = frozenset(BY_NAME[stage].options) & frozenset(FIELD_NAMES)
    try:
        opts = Options(**{k: v for k, v in dict.items(options) if k in declared})
    except OptionError as exc:
        raise CompilationError(f"option {exc}", stage=stage) from None
    return OptionView(stage, opts, declared)
