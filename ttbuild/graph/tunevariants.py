"""Expand a variants.toml row whose kernel carries `@triton.autotune` / `@triton.heuristics` into one ordinary variant per config and heuristic value.

A row with `autotune = true` (or `configs = "all"`, or `configs = [i, ...]` for some of them)
becomes one variant per `triton.Config` of the kernel's decorator, named `<row name>.c<i>`
(i: the config's place in the decorator's list); each takes the config's kwargs as constexprs
and its num_warps / num_stages / num_ctas. A constexpr that `@triton.heuristics` computes is
built for each value the row lists (`constexprs = { EVEN_K = [true, false] }`), for both
booleans when the heuristic is a comparison and the row names none, and named
`.<NAME>-<value>` after the config part. Every expanded variant is an ordinary build task
(cached, incremental, sharded by its name). Its `tuning` record (`key`, config index, the
`tune` plan) and `heuristics` (name -> expression) reach the metadata JSON, where the runtime
reads them (ttbuild.runtime.tuned). Rules from python/triton/runtime/autotuner.py: a config
kwarg passed again is a conflict; heuristics run after the config is chosen.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Callable

from ttbuild.errors import CompilationError

_SHAPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@functools.lru_cache(maxsize=256)
def _decorators(path: str, mtime_ns: int, size: int, kernel: str, shown: str):
    """read_decorators of one kernel file, once per file version (a 3000-row list names a file
    many times)."""
    from ttbuild.frontend.autotune import read_decorators

    return read_decorators(Path(path).read_bytes(), kernel, shown)


def decorators_of(kernels_dir: Path, rel: str, kernel: str, parse: dict | None = None, target: str | None = None,
                  gpu: str = ""):
    """The kernel's Decorators (ttbuild.frontend.autotune), or None when its file mentions
    neither decorator (most files: no parse). `parse`: a project kernel's parse facts
    (ttbuild.graph.project.parse_facts), whose modules answer the names the file imports from the
    project (`**cache_kwargs`, `NUM_WARPS` of another module). Raises CompilationError for a
    decorator that cannot be read statically."""
    path = kernels_dir / rel
    if parse and parse.get("module"):
        # read whatever the file says: a project's own decorator may build an Autotuner under another name
        stamp = tuple((f, (kernels_dir / f).stat().st_mtime_ns) for f in sorted(parse["modules"].values()))
        found = _project_decorators(str(kernels_dir), rel, kernel, parse["module"], tuple(sorted(parse["modules"].items())),
                                    tuple(sorted(parse.get("env", {}).items())), (target, gpu), stamp)
    else:
        data = path.read_bytes()
        if b"autotune" not in data and b"heuristics" not in data:
            return None
        st = path.stat()
        found = _decorators(str(path), st.st_mtime_ns, st.st_size, kernel, rel)
    return None if found.autotune is None and not found.heuristics and found.unread is None else found


@functools.lru_cache(maxsize=256)
def _project_decorators(kernels_dir: str, rel: str, kernel: str, module: str, modules: tuple, env: tuple,
                        target: tuple, stamp: tuple):
    """read_decorators of a project kernel, once per version of the modules it may import; `target` is
    (the row's target or None, its GPU model or "")."""
    from ttbuild.frontend.autotune import read_decorators

    parse = {"module": module, "modules": dict(modules), "env": dict(env)}
    data = (Path(kernels_dir) / rel).read_bytes()
    imported = _imported(Path(kernels_dir), parse, target)
    return read_decorators(data, kernel, rel, imported, lambda: _tuning(imported.module, kernel))


def _tuning(module, kernel: str):
    """The Tuning the kernel's module constructed around `kernel` (a decorator factory of the project's), or
    None; the located error of a kernel binding the module read refused."""
    from ttbuild.pyeval.modules import lookup
    from ttbuild.pyeval.objects import Kernel

    value = lookup(module, kernel)
    return value.tuning if isinstance(value, Kernel) else None


_PROJECTS: dict = {}  # (kernels dir, (target, gpu)) -> (file mtimes, Project): one reading per variant list


def _executed(kernels_dir: str, module: str, modules: tuple, env: tuple, target: tuple, stamp: tuple):
    """The kernel's module as ttbuild.pyeval executed it, and the Project that read it. The project's rows share one reading (a
    module runs once for all the kernels that import it): a row's further modules and environment
    names join it (what ran before could import none of them: each row's closure is complete);
    a file or an environment value that changed starts a new reading."""
    from ttbuild.pyeval.modules import Project, read_module
    from ttbuild.target import device_facts

    mtimes, project = _PROJECTS.get((kernels_dir, target), ({}, None))
    if project is None or any(mtimes.get(f, m) != m for f, m in stamp) or any(
            project.env.get(k, v) != v for k, v in env):  # a changed file or environment value
        mtimes, project = {}, Project({}, env={}, strict_env=True,
                                      **device_facts(*target))
        _PROJECTS[(kernels_dir, target)] = (mtimes, project)
    mtimes.update(stamp)
    project.env.update(env)
    for name, file in modules:
        if name not in project.files:
            project.files[name] = (file, (Path(kernels_dir) / file).read_bytes())
    return read_module(project, module), project


def _imported(kernels_dir: Path, parse: dict, target: tuple):
    """What a name of the kernel's module is bound to once the module ran (ttbuild.pyeval), in the
    autotune reader's terms: ("value", literal data), ("import", dotted path), or None."""
    from ttbuild.pyeval.modules import ProjectFunction, lookup
    from ttbuild.pyeval.objects import Constexpr, External
    from ttbuild.pyeval.values import Function

    modules = tuple(sorted(parse["modules"].items()))
    stamp = tuple((f, (kernels_dir / f).stat().st_mtime_ns) for _, f in modules)
    module, module_project = _executed(str(kernels_dir), parse["module"], modules,
                                       tuple(sorted(parse.get("env", {}).items())), target, stamp)

    def answer(name: str):
        try:
            value = lookup(module, name)
        except CompilationError:  # unreadable: the file's own reading refuses it if a decorator uses it
            return None
        if isinstance(value, Constexpr):
            value = value.value
        if isinstance(value, External):
            return ("import", value.path)
        if isinstance(value, Function) and value.fn in module_project.home:  # `check_shared_mem()` in the configs
            return ("value", ProjectFunction(module_project, value))
        return ("value", value) if _literal(value) else None

    answer.module = module
    return answer


def _literal(value) -> bool:
    if isinstance(value, (int, float, bool, str, type(None))):
        return True
    if isinstance(value, (list, tuple)):
        return all(_literal(v) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) and _literal(v) for k, v in value.items())


def _value_name(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return re.sub(r"[^A-Za-z0-9_.]", "_", str(value))


def check_tune_plan(plan, key: tuple[str, ...], kernels_dir: Path, fail: Callable[[str, str], CompilationError]) -> dict:
    """The row's `tune = { args = "file.py:function", shapes = [{M = 512, ...}, ...] }`,
    validated: `args` names a function in a Python file of the kernels folder (called on the
    GPU machine by `ttbuild tune` with one shape's values as keywords, returning the launch
    arguments and the grid); every shape gives an int for each name of the autotune key."""
    if not isinstance(plan, dict):
        raise fail("tune", 'must be a table like { args = "matmul_tune.py:make_args", shapes = [{ M = 512, ... }] }')
    extra = sorted(set(plan) - {"args", "shapes"})
    if extra:
        raise fail("tune", f"unknown key {extra[0]!r}: a tune plan has 'args' and 'shapes'")
    args = plan.get("args")
    if not isinstance(args, str) or args.count(":") != 1:
        raise fail("tune", "'args' must be \"file.py:function\" (the function that makes one shape's arguments)")
    file, func = args.split(":")
    if not file.endswith(".py") or Path(file).is_absolute() or ".." in Path(file).parts:
        raise fail("tune", f"'args': {file!r} must be a Python file inside the kernels folder")
    if not (kernels_dir / file).is_file():
        raise fail("tune", f"'args': {file!r} does not exist in {kernels_dir.name}/")
    if not func.isidentifier():
        raise fail("tune", f"'args': {func!r} is not a function name")
    shapes = plan.get("shapes")
    if not isinstance(shapes, list) or not shapes or not all(isinstance(s, dict) for s in shapes):
        raise fail("tune", "'shapes' must be a non-empty list of tables like { M = 512, N = 512, K = 512 }")
    for s in shapes:
        missing = [k for k in key if k not in s]
        if missing:
            raise fail("tune", f"shape {s} gives no value for {', '.join(missing)} (the autotune key is "
                               f"{list(key)})")
        for name, value in s.items():
            if not _SHAPE_NAME.match(name) or isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise fail("tune", f"shape {s}: {name} = {value!r} is not a name = number")
    return {"args": args, "shapes": [dict(s) for s in shapes]}


def expand(variant, row: dict, kernels_dir: Path, fail: Callable[[str, str], CompilationError]) -> list:
    """The variants row `row` (already validated into `variant`, a ttbuild.graph.variants.Variant)
    stands for: [variant] for a kernel without the decorators, else its expansion (module
    docstring). Raises CompilationError (from `fail(field, why)` or located in the kernel file)."""
    wants = row.get("autotune", False)
    configs_field = row.get("configs")
    if not isinstance(wants, bool):
        raise fail("autotune", "must be true or false")
    if configs_field is not None and not (configs_field == "all" or (
            isinstance(configs_field, list) and configs_field
            and all(isinstance(i, int) and not isinstance(i, bool) for i in configs_field))):
        raise fail("configs", 'must be "all" or a list of config indices like [0, 2]')
    wants = wants or configs_field is not None
    deco = decorators_of(kernels_dir, variant.file, variant.kernel, variant.parse, variant.options.target,
                         variant.options.gpu)
    listed = sorted(k for k, v in variant.constexprs.items() if isinstance(v, list))
    computed = {h.name for h in deco.heuristics} if deco is not None else set()
    if set(listed) - computed:
        raise fail("constexprs", f"{sorted(set(listed) - computed)[0]}: a list of values is only for a constexpr "
                                 "that @triton.heuristics computes (one variant per value)")
    if "tune" in row and not wants:
        raise fail("tune", "a tune plan needs autotune = true")
    if deco is None:
        if wants:
            raise fail("autotune", f"{variant.kernel} in {variant.file} has no @triton.autotune decorator")
        return [variant]
    tune = deco.autotune
    if wants and tune is None:
        raise fail("autotune", f"{variant.kernel} in {variant.file} has no @triton.autotune decorator")
    if wants and tune.unread is not None:
        raise _needs(tune.unread, "this row takes its configs from that list (autotune / configs): give the config's "
                                  "constexprs, num_warps and num_stages in the row instead, as `ttbuild record` writes them")
    missing = [p for p in deco.required if p not in variant.constexprs]
    if deco.unread is not None and missing:
        raise _needs(deco.unread, f"the row leaves `{missing[0]}` to it")

    # (suffix, constexprs, options, tuning) per config; one plain entry when not autotuned
    if wants:
        points = _config_points(variant, row, tune, configs_field, kernels_dir, fail)
    else:
        points = [("", {}, {}, None)]

    heur = deco.heuristics
    if not heur:
        return [_make(variant, suffix, kw, opts, tuning, {}) for suffix, kw, opts, tuning in points]
    exprs = {h.name: h.expr for h in heur}
    axes = _heuristic_axes(variant, heur, fail)
    out = []
    for suffix, kw, opts, tuning in points:
        combos = [("", {})]
        for name, values in axes:
            combos = [(s + (f".{name}-{_value_name(v)}" if len(values) > 1 else ""), {**c, name: v})
                      for s, c in combos for v in values]
        for s, c in combos:
            out.append(_make(variant, suffix + s, {**kw, **c}, opts, tuning, exprs))
    return out


def _needs(unread: CompilationError, why: str) -> CompilationError:
    """The decorator's located read error (Autotune.unread, Decorators.unread) for a row that needs its value."""
    return CompilationError(f"{unread.message}; {why}", unread.loc)


def _config_points(variant, row: dict, tune, configs_field, kernels_dir: Path, fail) -> list:
    """(suffix ".c<i>", config kwargs, options, tuning record) per autotune config the row builds
    (`configs_field`: None or "all" for every config, else their indices). Raises
    CompilationError (through `fail`) for a row that fixes an option each config sets, an index
    out of range, a constexpr both set, or a config with maxnreg."""
    fixed = [k for k in ("num_warps", "num_stages", "num_ctas") if k in row]
    if fixed:
        raise fail(fixed[0], "each autotune config sets it (triton.Config); remove it from the row")
    indices = list(range(len(tune.configs))) if configs_field in (None, "all") else configs_field
    for i in indices:
        if not 0 <= i < len(tune.configs):
            raise fail("configs", f"config {i} does not exist: the decorator lists {len(tune.configs)}")
    plan = check_tune_plan(row["tune"], tune.key, kernels_dir, fail) if "tune" in row else None
    group = {"group": variant.name, "key": list(tune.key), "reset_to_zero": list(tune.reset_to_zero),
             "restore_value": list(tune.restore_value), "configs": len(tune.configs)}
    if plan is not None:
        group["tune"] = plan
    points = []
    for i in indices:
        cfg = tune.configs[i]
        clash = sorted(set(cfg.kwargs) & set(variant.constexprs))
        if clash:
            raise fail("constexprs", f"{clash[0]} is set by the autotune configs (Triton: 'Conflicting "
                                     f"meta-parameters'); remove it from the row")
        if cfg.maxnreg is not None:
            raise fail("autotune", f"config {i} sets maxnreg={cfg.maxnreg}, which ttbuild does not "
                                   "support yet; list the other configs with configs = [...]")
        opts = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages, "num_ctas": cfg.num_ctas}
        points.append((f".c{i}", dict(cfg.kwargs), opts, dict(group, config=i, kwargs=dict(cfg.kwargs), **opts)))
    return points


def _heuristic_axes(variant, heur, fail) -> list:
    """(name, values to build) per @triton.heuristics constexpr: the row's value or list, else
    [False, True] for a boolean one. Raises CompilationError (through `fail`) when a
    non-boolean one has no values, or one is not an int, float, bool or string."""
    axes = []  # (name, values) for each computed constexpr
    for h in heur:
        given = variant.constexprs.get(h.name)
        if isinstance(given, list):
            values = given
        elif given is not None:
            values = [given]
        elif h.boolean:
            values = [False, True]
        else:
            raise fail("constexprs", f"{h.name} is computed at launch by @triton.heuristics ({h.expr}); "
                                     f"list the values to build, e.g. constexprs = {{ {h.name} = [..] }}")
        if not values or not all(isinstance(v, (bool, int, float, str)) for v in values):
            raise fail("constexprs", f"{h.name}: the values to build must be ints, floats, bools or strings")
        axes.append((h.name, values))
    return axes


def _make(variant, suffix: str, constexprs: dict, options: dict, tuning, heuristics: dict):
    base = {k: v for k, v in variant.constexprs.items() if not isinstance(v, list)}
    return dataclasses.replace(variant, name=variant.name + suffix, constexprs={**base, **constexprs},
                               tuning=tuning, heuristics=dict(heuristics),
                               options=dataclasses.replace(variant.options, **options))
