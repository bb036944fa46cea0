"""Load and validate kernels/variants.toml into Variant records; bad input raises VariantError at file:line:col."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from ttbuild import cxvalue
from ttbuild.canonical import canonical_json
from ttbuild.errors import CompilationError, Loc
from ttbuild.options import DEFAULTS, OptionError, Options
from ttbuild.signature import SigEntry, parse_signature
from ttbuild.stages import STAGES
from ttbuild.target import Target, compilable

try:
    # tomllib's upstream, whose wheels are compiled (mypyc): a 3000-row list parses in 0.03 s
    # against the standard library's 0.10 s, with the same values and errors.
    import tomli as tomllib
except ImportError:  # pragma: no cover - a compiler install without it
    import tomllib

VARIANTS_FILE = "variants.toml"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Variant names become file names under artifacts/lib/: keep them portable.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
# ... and short enough for one: `<name>.cubin`, `<name>.<arch>.ptx` and the temporary names of
# atomic writes stay well under the 255 bytes a file name may have (NAME_MAX on Linux).
MAX_NAME = 200

# Field -> (required, default). The compile options are `ttbuild.options.Options`' fields, with
# its defaults (validated by Options itself). Order is the order errors are reported in.
FIELDS: dict[str, tuple[bool, Any]] = {
    "name": (False, None),
    "file": (False, None),  # a file under the kernels directory, or
    "module": (False, None),  # a dotted module under [project] source_roots (one of the two is required)
    "kernel": (True, None),
    "signature": (True, None),
    "constexprs": (False, {}),
    **{f.name: (False, getattr(DEFAULTS, f.name)) for f in dataclasses.fields(Options)},
    "targets": (False, None),
    "until": (False, "cubin"),
    # @triton.autotune / @triton.heuristics rows (ttbuild.graph.tunevariants)
    "autotune": (False, False),
    "configs": (False, None),
    "tune": (False, None),
}


class VariantError(CompilationError):
    """A variant list the build cannot use: names the file, the variant (1-based index and
    name when known) and the field, at the field's line when it can be found."""


@dataclass(frozen=True)
class Variant:
    """One compiled kernel configuration: a row of kernels/variants.toml with defaults applied.

    `file` is relative to the kernels directory (POSIX separators); `signature` is the AOT
    string and `params` its parsed entries; `options` its validated compile options (each of
    their fields also reads as an attribute: `v.num_warps`); `until` is the last stage to
    build. `targets`: the GPUs of a multi-target variant in ascending capability (empty for a
    single target); then `options.target` is the newest of them, the one whose PTX ships for
    newer GPUs.
    """

    index: int
    name: str
    file: str
    kernel: str
    signature: str
    params: tuple[SigEntry, ...]
    constexprs: dict = field(hash=False)
    options: Options = DEFAULTS
    until: str = "cubin"
    targets: tuple[str, ...] = ()
    # a kernel of a project ([project] source_roots): its module, and the parse stage's extra facts
    # (ttbuild.graph.project.parse_facts: modules it may import, environment values, device reads)
    module: str = ""
    parse: dict = field(default_factory=dict, hash=False, compare=False)
    # an autotune expansion's record (ttbuild.graph.tunevariants): group, key, config, tune plan
    tuning: dict | None = field(default=None, hash=False, compare=False)
    # constexpr name -> expression over `args` that @triton.heuristics computes at launch
    heuristics: dict = field(default_factory=dict, hash=False, compare=False)

    def with_options(self, **changes) -> "Variant":
        """This variant with `changes` to its options (and `targets` / `until` among them)."""
        own = {k: changes.pop(k) for k in ("targets", "until") if k in changes}
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes), **own)

    @property
    def capability(self) -> int:
        """The compute capability of the variant's target as an int (90 for cuda:90)."""
        return Target.parse(self.target).capability

    @property
    def arch(self) -> str:
        """ptxas/LLVM arch for the target (`Target.arch`: `sm_90a` for 9.0 and newer)."""
        return Target.parse(self.target).arch

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages this variant runs, parse up to its `until` stage."""
        return STAGES[: STAGES.index(self.until) + 1]


def _option_property(name: str) -> property:
    return property(lambda self: getattr(self.options, name), doc=f"`options.{name}`")


for _f in dataclasses.fields(Options):  # v.num_warps reads v.options.num_warps (never written)
    setattr(Variant, _f.name, _option_property(_f.name))
del _f


def load_variants(kernels_dir: str | Path, row_errors: list | None = None) -> list[Variant]:
    """Read `<kernels_dir>/variants.toml` and return its variants in file order.

    Raises VariantError (a CompilationError, rendered with file:line:col, the line and a
    caret) for TOML syntax errors, unknown or missing fields, wrong types, bad signatures,
    constexprs that name a signature parameter, missing kernel files and duplicate names.
    With `row_errors` (a list), an error confined to one [[variant]] row is appended there as
    (index, VariantError) and the row skipped instead (a build with --continue builds the rest);
    errors of the file as a whole still raise.
    """
    kernels_dir = Path(kernels_dir)
    path = kernels_dir / VARIANTS_FILE
    shown = f"{kernels_dir.name}/{VARIANTS_FILE}"
    _is_file.cache_clear()  # asked afresh for every list: files come and go between loads
    _head.cache_clear()
    _defs.cache_clear()
    from .project import forget_files

    forget_files()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VariantError(f"cannot read the variant list: {exc.strerror}", Loc(shown, 1, 0)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(exc, text, shown) from None
    except RecursionError as exc:  # tomli refuses arrays/tables nested past its depth this way
        lines = text.splitlines() or [""]
        deepest = max(range(len(lines)), key=lambda i: lines[i].count("[") + lines[i].count("{"))
        raise VariantError(f"invalid TOML: {exc}", Loc(shown, deepest + 1, 0, lines[deepest][:200])) from None
    locator = _Locator(text, shown)
    # [package]: name/version of the wheel `ttbuild package` makes (ttbuild.wheel); not a build input.
    # [project]: source_roots, the folders imports of a project's kernels resolve from.
    extra = sorted(set(data) - {"variant", "package", "project"})
    if extra:
        raise VariantError(f"unknown top-level key {extra[0]!r}: only [[variant]] tables, a [package] "
                           "and a [project] table belong here", locator.top(extra[0]))
    roots = _source_roots(data.get("project", {}), kernels_dir, locator)
    rows = data.get("variant", [])
    if not isinstance(rows, list):
        raise VariantError("`variant` must be an array of tables: write [[variant]]", locator.top("variant"))
    variants, seen = [], {}
    for index, row in enumerate(rows, start=1):
        try:
            expanded = _expand(_validate(index, row, kernels_dir, locator, roots), row, kernels_dir, locator)
            for variant in expanded:
                if len(variant.name) > MAX_NAME:
                    raise VariantError(f"variant #{index}: name {variant.name[:40]!r}... has {len(variant.name)} "
                                       f"characters; at most {MAX_NAME} (it names files under lib/)",
                                       locator.field(index, "name") or locator.header(index))
                if variant.name in seen:
                    raise VariantError(
                        f"variant #{index}: name {variant.name!r} is already used by variant #{seen[variant.name]}",
                        locator.field(index, "name"))
        except CompilationError as err:  # VariantError, or a decorator the reader refuses
            if row_errors is None:
                raise
            row_errors.append((index, err))
            continue
        for variant in expanded:
            seen[variant.name] = index
        variants.extend(expanded)
    return variants


def _expand(variant: Variant, row: dict, kernels_dir: Path, locator: "_Locator") -> list[Variant]:
    """The variants one row stands for: itself, or one per autotune config / heuristic value."""
    if not any(k in row for k in ("autotune", "configs", "tune")) and "heuristics" not in _head(kernels_dir, variant.file):
        return [variant]
    from .tunevariants import expand

    label = f"variant #{variant.index} ({variant.name})"

    def fail(fld: str, why: str) -> VariantError:
        """A VariantError for field `fld` of this row, located at that field in variants.toml."""
        return VariantError(f"{label}: field {fld!r}: {why}", locator.field(variant.index, fld))

    return expand(variant, row, kernels_dir, fail)


@functools.lru_cache(maxsize=4096)
def _head(kernels_dir: Path, rel: str) -> str:
    """A kernel file's text, once per file of a list (only its mention of heuristics is asked)."""
    try:
        return (kernels_dir / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@functools.lru_cache(maxsize=4096)
def _is_file(kernels_dir: Path, rel: str) -> bool:
    """Whether kernels_dir/rel is a file, asked once per file of a list (3000 rows, 75 files);
    load_variants clears it first."""
    return (kernels_dir / rel).is_file()


@functools.lru_cache(maxsize=4096)
def _inside(rel: str) -> bool:
    """Whether `rel` is a relative path that stays inside the kernels directory (once per file
    of a list: two Path parses per row were a tenth of loading 3000 rows)."""
    path = Path(rel)
    return not (path.is_absolute() or ".." in path.parts or "\\" in rel)


@functools.lru_cache(maxsize=4096)
def _signature(text: str) -> tuple[SigEntry, ...]:
    """parse_signature, once per distinct signature of a list (raises its ValueError each time)."""
    return tuple(parse_signature(text))


def _source_roots(table, kernels_dir: Path, locator: "_Locator") -> tuple[str, ...]:
    """`[project] source_roots = ["src", ...]`: folders under the kernels directory that imports
    resolve from, in order (as sys.path entries); () without a [project] table."""
    if not isinstance(table, dict):
        raise VariantError("`project` must be a table: write [project]", locator.top("project"))
    for key in table:
        if key != "source_roots":
            raise VariantError(f"[project]: unknown key {key!r}; known: source_roots", locator.top(key))
    roots = table.get("source_roots", [])
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
        raise VariantError("[project] source_roots must be a list of folder names like [\"src\"]",
                           locator.top("source_roots"))
    out = []
    for r in roots:
        r = r.rstrip("/") or "."
        if not _inside(r):
            raise VariantError(f"[project] source_roots: {r!r} must be a relative path inside the kernels directory",
                               locator.top("source_roots"))
        if not (kernels_dir / r).is_dir():
            raise VariantError(f"[project] source_roots: {r!r} is not a folder of {kernels_dir.name}/",
                               locator.top("source_roots"))
        out.append(Path(r).as_posix())
    return tuple(out)


def _project_file(values: dict, row: dict, roots: tuple[str, ...], kernels_dir: Path, fail) -> tuple[str, str | None]:
    """The row's kernel file (relative to the kernels directory) and the source root it lies
    under (None: not a project kernel), from `file` or `module`."""
    from .project import module_file

    if values["module"] is None:
        if values["file"] is None:
            raise fail("file", "give the kernel's `file`, or its `module` under [project] source_roots")
        if not isinstance(values["file"], str):
            raise fail("file", f"must be a string, got {_tname(values['file'])}")
        rel = values["file"]
        root = next((r for r in roots if r == "." or rel.startswith(r + "/")), None)
        return rel, root
    if "file" in row:
        raise fail("module", "give either 'file' or 'module', not both")
    mod = values["module"]
    if not isinstance(mod, str) or not all(p.isidentifier() for p in mod.split(".")):
        raise fail("module", f"must be a dotted module name like 'pkg.ops.norm', got {mod!r}")
    if not roots:
        raise fail("module", "names a module, but no [project] source_roots say where modules live")
    rel = module_file(roots, kernels_dir, mod)
    if rel is None:
        raise fail("module", f"no {mod.replace('.', '/')}.py or package under the source roots {', '.join(roots)}")
    root = next(r for r in roots if r == "." or rel.startswith(r + "/"))
    return rel, root


def _parse_facts(kernels_dir: Path, roots: tuple[str, ...], rel: str, root: str | None) -> dict:
    """A project kernel's parse facts (ttbuild.graph.project); {} for a kernel outside a project."""
    if root is None:
        return {}
    from .project import parse_facts

    return parse_facts(kernels_dir, roots, rel, root)


def _check_names(values: dict, fail) -> None:
    """The string fields are strings, the name a variant name (_NAME), the kernel an ASCII
    identifier. Raises VariantError (through `fail`)."""
    for key in ("file", "kernel", "signature", "target", "until"):
        if not isinstance(values[key], str):
            raise fail(key, f"must be a string, got {_tname(values[key])}")
    if values["name"] is not None and (not isinstance(values["name"], str) or not _NAME.match(values["name"])):
        raise fail("name", "must be a string of letters, digits, '_', '.', '-' starting with a letter or '_'")
    if not _IDENT.match(values["kernel"]):
        k = values["kernel"]
        if k.isidentifier():  # a Python name, but the cubin's entry point needs an ASCII one
            raise fail("kernel", f"{k!r} is not an ASCII identifier: the kernel's name becomes its PTX entry "
                                 "name, and PTX identifiers are ASCII letters, digits and '_' (PTX ISA, "
                                 "\"Identifiers\"); rename the kernel function")
        raise fail("kernel", f"{k!r} is not a Python identifier")


def _check_constexprs(constexprs, fail) -> dict:
    """A row's constexprs, with `{ none = true }` / `{ dtype = "bf16" }` read (ttbuild.cxvalue): a
    table of parameter names to an int, float (finite), bool or string, one of those tables, or a
    list of plain values (the values of a constexpr @triton.heuristics computes). Raises
    VariantError (through `fail`)."""
    if not isinstance(constexprs, dict):
        raise fail("constexprs", f"must be a table like {{ BLOCK_SIZE = 1024 }}, got {_tname(constexprs)}")
    constexprs = dict(constexprs)
    for cname, cval in constexprs.items():
        if not _IDENT.match(cname):
            raise fail("constexprs", f"{cname!r} is not a parameter name")
        if isinstance(cval, list) and cval and all(isinstance(x, (bool, int, float, str)) for x in cval):
            continue  # values of a constexpr @triton.heuristics computes (checked by _expand)
        if isinstance(cval, dict):  # { none = true } / { dtype = "bf16" } (ttbuild.cxvalue)
            try:
                constexprs[cname] = cxvalue.from_toml(cval)
            except ValueError as exc:
                raise fail("constexprs", f"{cname} = {exc}") from None
        elif not isinstance(cval, (bool, int, float, str)):
            raise fail("constexprs", f"{cname} = {cval!r}: a constexpr is an int, float, bool, string, "
                                     "{ none = true } or { dtype = \"fp32\" }")
    for cname, cval in constexprs.items():
        if any(isinstance(x, float) and not math.isfinite(x) for x in (cval if isinstance(cval, list) else [cval])):
            raise fail("constexprs", f"{cname} = {cval!r}: a constexpr float must be finite (nan and inf have no "
                                     "JSON spelling for the build's keys and metadata)")
    return constexprs


def _check_targets(targets, row: dict, fail) -> tuple[str, ...]:
    """A row's `targets` (a non-empty list of distinct compilable targets like "cuda:90", not
    beside `target`) in ascending compute capability. Raises VariantError (through `fail`)."""
    if "target" in row:
        raise fail("targets", "give either 'target' or 'targets', not both")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise fail("targets", 'must be a non-empty list of targets like ["cuda:80", "cuda:90"]')
    parsed = []
    for t in targets:
        try:
            parsed.append(compilable(Target.parse(t)))
        except ValueError as exc:
            raise fail("targets", str(exc)) from None
    if len({p.capability for p in parsed}) != len(parsed):
        raise fail("targets", f"lists a target twice: {targets}")
    return tuple(str(p) for p in sorted(parsed, key=lambda p: p.capability))


def _validate(index: int, row: dict, kernels_dir: Path, locator: "_Locator", roots: tuple[str, ...] = ()) -> Variant:
    label = f"variant #{index}" + (f" ({row['name']})" if isinstance(row.get("name"), str) else "")

    def fail(fld: str, why: str) -> VariantError:
        """A VariantError for field `fld` of row `index`, located at that field in variants.toml."""
        return VariantError(f"{label}: field {fld!r}: {why}", locator.field(index, fld))

    for key in row:
        if key not in FIELDS:
            near = difflib.get_close_matches(key, FIELDS, n=1)
            raise fail(key, "unknown field" + (f"; did you mean {near[0]!r}?" if near else
                                                f"; known fields: {', '.join(FIELDS)}"))
    values = {}
    for key, (required, default) in FIELDS.items():
        if key not in row:
            if required:
                raise VariantError(f"{label}: missing required field {key!r}", locator.header(index))
            values[key] = default
        else:
            values[key] = row[key]

    values["file"], root = _project_file(values, row, roots, kernels_dir, fail)
    _check_names(values, fail)

    rel = values["file"]
    if not _inside(rel):
        raise fail("file", f"{rel!r} must be a relative path inside the kernels directory")
    if not rel.endswith(".py"):
        raise fail("file", f"{rel!r} is not a Python file")
    if not _is_file(kernels_dir, rel):
        raise fail("file", f"{rel!r} does not exist in {kernels_dir.name}/")

    try:
        params = _signature(values["signature"])
    except ValueError as exc:
        raise fail("signature", str(exc)) from None
    _check_kernel(values, row, params, kernels_dir, fail)

    constexprs = values["constexprs"]
    constexprs = _check_constexprs(constexprs, fail)

    targets = values["targets"]
    if targets is not None:
        targets = _check_targets(targets, row, fail)
        values["target"] = targets[-1]

    if "ptxas_options" in row and not isinstance(row["ptxas_options"], list):  # a TOML array, not a table
        raise fail("ptxas_options", "must be a list of strings")
    try:
        options = Options.from_mapping(values)
    except OptionError as exc:
        raise fail(exc.field, exc.why) from None
    if values["until"] not in STAGES:
        raise fail("until", f"must be one of {', '.join(STAGES)}, got {values['until']!r}")

    parse = _parse_facts(kernels_dir, roots, rel, root)
    name = values["name"] or _default_name(values)
    return Variant(index=index, name=name, file=rel, kernel=values["kernel"],
                   signature=",".join(str(p) for p in params), params=tuple(params),
                   constexprs=dict(constexprs), options=options, until=values["until"], targets=targets or (),
                   module=parse.get("module", ""), parse=parse)


@functools.lru_cache(maxsize=4096)
def _defs(kernels_dir: Path, rel: str) -> dict | None:
    """name -> (parameter names, names annotated `*.constexpr`) of each top-level function of a
    kernel file (codegen's _param_is_constexpr reads the same annotations); None where the file
    does not parse (the parse stage reports that, at its line)."""
    import ast

    try:
        tree = ast.parse(_head(kernels_dir, rel))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args.posonlyargs + node.args.args
            const = {a.arg for a in args
                     if a.annotation is not None and ast.unparse(a.annotation).rsplit(".", 1)[-1] == "constexpr"}
            out[node.name] = ([a.arg for a in args], const)
    return out


def _check_kernel(values: dict, row: dict, params, kernels_dir: Path, fail) -> None:
    """Refuse, at the row, a kernel the file does not define and a signature whose count does
    not match the kernel's non-constexpr parameters (the ttir stage checks both too, at the
    kernel's line). Rows whose constexprs come from @triton.autotune / heuristics, and files
    that define the name other than by a plain `def`, are left to the stages."""
    defs = _defs(kernels_dir, values["file"])
    kernel = values["kernel"]
    if not defs:  # no functions to check against (a file that does not parse, a stand-in)
        return
    if kernel not in defs:
        if not re.search(rf"\b{re.escape(kernel)}\b", _head(kernels_dir, values["file"])):
            near = difflib.get_close_matches(kernel, list(defs), n=1)
            raise fail("kernel", f"{values['file']} defines no function {kernel!r}"
                                 + (f"; did you mean {near[0]!r}?" if near else f"; functions there: {', '.join(defs) or 'none'}"))
        return
    if any(k in row for k in ("autotune", "configs", "tune")) or "heuristics" in _head(kernels_dir, values["file"]):
        return
    names, const = defs[kernel]
    given = values["constexprs"] if isinstance(values["constexprs"], dict) else {}
    runtime = [n for n in names if n not in const and n not in given]
    if len(params) != len(runtime):
        raise fail("signature", f"{len(params)} entries, but {kernel} has {len(runtime)} non-constexpr "
                                f"parameters ({', '.join(runtime)})")


def _default_name(values: dict) -> str:
    # `targets` joins the hash only when given (disable_mma_v3 / disable_tma only when true, gpu only when
    # named), so other names stay as they were.
    opts = {k: v for k, v in values.items() if k not in ("name", "until") and not (k == "targets" and v is None)
            and not (k in ("autotune", "configs", "tune", "disable_mma_v3", "disable_tma", "module", "gpu")
                     and v in (None, False, ""))
            and not (k == "file" and values.get("module") is not None)}
    return f"{values['kernel']}_{xxhash.xxh3_64_hexdigest(canonical_json(opts).encode())[:8]}"


def _tname(value: Any) -> str:
    return {dict: "a table", list: "an array", bool: "a boolean", int: "an integer",
            float: "a float", str: "a string"}.get(type(value), type(value).__name__)


def _toml_error(exc: "tomllib.TOMLDecodeError", text: str, shown: str) -> VariantError:
    # tomllib's message ends with "(at line L, column C)" (1-based both).
    msg = str(exc)
    match = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if not match:
        return VariantError(f"invalid TOML: {msg}", Loc(shown, 1, 0))
    line, col = int(match.group(1)), int(match.group(2))
    lines = text.splitlines()
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    return VariantError(f"invalid TOML: {msg[: match.start()].strip()}", Loc(shown, line, max(col - 1, 0), src))


class _Locator:
    """Finds the line of a variant's field by scanning the text (tomllib keeps no positions):
    the N-th `[[variant]]` header, then `field =` inside that block."""

    def __init__(self, text: str, shown: str):
        self.lines = text.splitlines()
        self.shown = shown
        self.headers = [i for i, ln in enumerate(self.lines) if re.match(r"\s*\[\[\s*variant\s*\]\]", ln)]

    def _loc(self, i: int, col: int = 0) -> Loc:
        return Loc(self.shown, i + 1, col, self.lines[i])

    def header(self, index: int) -> Loc | None:
        """The location of row `index`'s `[[variant]]` header (1-based), or the file's first line when the table has
        fewer rows."""
        if index - 1 < len(self.headers):
            i = self.headers[index - 1]
            return self._loc(i, len(self.lines[i]) - len(self.lines[i].lstrip()))
        return Loc(self.shown, 1, 0)

    def field(self, index: int, name: str) -> Loc | None:
        """The location of field `name` (its `name =` line) in row `index`; the row's header when the field is not
        written there."""
        if index - 1 >= len(self.headers):
            return Loc(self.shown, 1, 0)
        start = self.headers[index - 1]
        end = self.headers[index] if index < len(self.headers) else len(self.lines)
        pat = re.compile(rf"\s*{re.escape(name)}\s*=")
        for i in range(start + 1, end):
            m = pat.match(self.lines[i])
            if m:
                return self._loc(i, len(self.lines[i]) - len(self.lines[i].lstrip()))
        return self.header(index)

    def top(self, name: str) -> Loc:
        """The location of the top-level key or table `name` in variants.toml, or its first line."""
        for i, ln in enumerate(self.lines):
            if re.match(rf"\s*\[*\s*{re.escape(name)}\b", ln):
                return self._loc(i)
        return Loc(self.shown, 1, 0)
