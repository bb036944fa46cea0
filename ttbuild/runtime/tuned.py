"""`lib.<autotuned kernel>[grid](*args)`: maps the launch's key arguments to the recorded winning config, evaluates `@triton.heuristics`, and launches that variant.

The variants of an autotuned kernel are one per `triton.Config` (and per value of a computed
constexpr; ttbuild.graph.tunevariants). Their tuning table, `artifacts/tuning/<kernel>.json`
(written by `ttbuild tune`, ttbuild.runtime.tuner), maps a key to a config. The key is Triton's
(python/triton/runtime/autotuner.py, `Autotuner.run`): the values of the arguments named in
`key=[...]`, then the dtype of every tensor argument. Lookup rule, recorded in the table as
`rule`: the exact key; else the nearest recorded key with the same dtypes and other
non-numeric items, distance the sum over numeric items of |log2 a - log2 b| (first recorded
wins a tie); else the default, the first config of the decorator's list that was built.
With TTBUILD_TUNE_ONLINE=1 (off by default) a key the table lacks is tuned in the process on
the call's own arguments, as Triton would, and written back to the table.
Heuristics (`args` = the call's arguments by name, the config's kwargs and the variant's fixed
constexprs) run after the config is chosen, as in Triton. Results are cached per key, so a
repeated launch costs a tuple, two dict lookups and the chosen variant's own launch.
"""

from __future__ import annotations

import operator
import os

from . import fastpath
from .args import dtype_name
from .heuristics import check_expression, compile_expression
from .launch import MAX_CACHED, Launcher
from .metadata import MetadataError, Variant
from .tuningtable import TuningError, TuningTable

ONLINE_ENV = "TTBUILD_TUNE_ONLINE"


class TunedLauncher:
    """All variants of an autotuned and/or heuristics kernel; `[grid]` returns the launch callable.

    Arguments as for Launcher. Runtime arguments given positionally take the cached path; a
    constexpr that a config sets, passed by name, bypasses tuning (the variants are searched
    for it, as a plain Launcher does). `config_for(*args)` says which config a call would use
    and why. Raises NoMatchingVariant (from the chosen config's variants) like Launcher.
    """

    def __init__(self, kernel: str, variants: list[Variant], driver=None, table: TuningTable | None = None,
                 table_file: str | None = None, online: bool | None = None):
        self.kernel = kernel
        self.table_file = table_file
        # Online tuning of keys the table lacks: off by default (ttbuild tunes ahead of time)
        self.online = os.environ.get(ONLINE_ENV) == "1" if online is None else online
        self.variants = list(variants)
        self.base = Launcher(kernel, self.variants, driver)
        self.table = table
        self._driver = driver
        runtime = self.base.runtime_names
        first = self.variants[0]
        tuned = [v for v in self.variants if v.autotune]
        self.key_names = tuple(tuned[0].autotune["key"]) if tuned else ()
        for name in self.key_names:
            if name not in runtime:
                raise MetadataError(f"{first.json_path}: autotune key {name!r} is not a runtime parameter of "
                                    f"{kernel} ({', '.join(runtime)}); ttbuild keys on runtime arguments")
        self._key_pos = tuple(runtime.index(n) for n in self.key_names)
        self._ptr_pos = tuple(i for i, p in enumerate(first.launch_params) if p.kind == "pointer")
        # config index -> its variants; None stands for "not autotuned" (heuristics only)
        by_config: dict = {}
        for v in self.variants:
            by_config.setdefault(v.autotune["config"] if v.autotune else None, []).append(v)
        self._by_config = by_config
        self.configs = sorted(c for c in by_config if c is not None)
        self.default = self.configs[0] if self.configs else None
        self.config_kwargs = {c: dict(by_config[c][0].autotune.get("kwargs", {})) for c in self.configs}
        # heuristics: name -> (compiled function, the args it reads)
        exprs = {}
        for v in self.variants:
            for name, text in v.heuristics.items():
                exprs.setdefault(name, text)
        self.heuristics = {name: (compile_expression(text), check_expression(text)) for name, text in exprs.items()}
        self._h_pos = tuple(sorted({runtime.index(a) for _, (_, reads) in self.heuristics.items()
                                    for a in reads if a in runtime}))
        self._subs: dict = {}      # variant names -> Launcher over those variants
        self._h_cache: dict = {}   # (config, given constexprs, values the heuristics read) -> Launcher
        self._grids: dict = {}
        self._config_names = frozenset(k for c in self.configs for k in self.config_kwargs[c])
        # A Triton call passes every parameter but those the configs and heuristics set.
        chosen = self._config_names | frozenset(self.heuristics)
        self.call_names = tuple(n for n in self.base.param_names if n not in chosen)
        self._cx_names = tuple(n for n in self.call_names if n not in runtime)
        rt_pos = [self.call_names.index(n) for n in runtime]
        cx_pos = [self.call_names.index(n) for n in self._cx_names]
        self._split = _splitter(rt_pos, cx_pos)
        self._hget = _getter(self._h_pos)
        # The generated call (fastpath.choice_source): a Triton call passes call_names in order;
        # the choice depends on the key arguments, the given constexprs, the heuristics' inputs
        # and the tensors' dtypes.
        at = {n: i for i, n in enumerate(self.call_names)}
        chosen_by = sorted({at[runtime[i]] for i in self._key_pos + self._h_pos} | {at[n] for n in self._cx_names})
        # A tensor whose dtype every variant fixes cannot change the choice of a call that any
        # variant accepts (another dtype fails in the chosen variants' own selection): only the
        # positions where the variants differ join the lookup.
        typed = [i for i in self._ptr_pos if len({v.launch_params[i].dtype for v in self.variants}) > 1]
        forms = [(len(self.call_names), [at[n] for n in runtime], chosen_by, [at[runtime[i]] for i in typed])]
        if self.base.runtime_first and len(runtime) != len(self.call_names):
            forms.append((len(runtime), list(range(len(runtime))), sorted(set(self._key_pos + self._h_pos)), typed))
        self._make = fastpath.compile_choice(forms)

    def variants_of(self, config) -> list[Variant]:
        """The variants built for config index `config` (None: a heuristics-only kernel)."""
        return list(self._by_config[config])

    @property
    def param_names(self):
        """The kernel's parameter names in order (the base Launcher's)."""
        return self.base.param_names

    @property
    def runtime_names(self):
        """The runtime (non-constexpr) parameter names in order."""
        return self.base.runtime_names

    def __repr__(self):
        return f"<ttbuild autotuned kernel {self.kernel}: {len(self.configs)} configs, {len(self.variants)} variants>"

    # ------------------------------------------------------------ choosing

    def key_of(self, args) -> tuple:
        """Triton's autotune key for the runtime arguments `args` (in order): the key arguments,
        then the dtype of every tensor argument."""
        key = tuple(args[i] for i in self._key_pos)
        dts = []
        for i in self._ptr_pos:
            dt = getattr(args[i], "dtype", None)
            if dt is not None:
                dts.append(dtype_name(dt) or str(dt))
        return key + tuple(dts)

    def pick(self, key: tuple) -> tuple[int | None, str]:
        """(config, how) for a key: the table's rule (module docstring), else the default."""
        if self.table is not None:
            config, how = self.table.lookup(key)
            if config is not None and config in self._by_config:
                return config, how
        return self.default, "default"

    def launcher_for(self, config, values, given: tuple = ()) -> Launcher:
        """The Launcher over config `config`'s variants that match the call: its computed
        constexprs (heuristics evaluated on the runtime arguments `values`, in order) and the
        constexprs the caller gave, `given` (one item per constexpr parameter in order,
        ABSENT where not given; () for none). Raises LookupError naming what no variant has."""
        hkey = (config, given, self._hget(values))
        sub = self._h_cache.get(hkey)
        if sub is None:
            sub = self._narrow(config, values, given)
            if len(self._h_cache) >= MAX_CACHED:
                self._h_cache.clear()
            self._h_cache[hkey] = sub
        return sub

    def _narrow(self, config, values, given) -> Launcher:
        candidates = self._by_config[config]
        fixed = {n: x for n, x in zip(self._cx_names, given) if x is not ABSENT}
        if fixed:
            candidates = [v for v in candidates if all(_same(v.constexprs.get(n, ABSENT), x) for n, x in fixed.items())]
            if not candidates:
                raise LookupError(f"{self.kernel}: no variant of config {config} has "
                                  f"{', '.join(f'{n}={x!r}' for n, x in fixed.items())}; built: "
                                  + "; ".join(v.describe() for v in self._by_config[config]))
        computed = {}
        if self.heuristics:
            env = dict(candidates[0].constexprs)
            env.update(fixed)
            env.update(zip(self.base.runtime_names, values))
            for name, (fn, _) in self.heuristics.items():  # in decorator order, each sees the earlier ones
                env[name] = computed[name] = fn(env)
            match = [v for v in candidates if all(_same(v.constexprs.get(n, ABSENT), x) for n, x in computed.items())]
            if not match:
                built = sorted({tuple(v.constexprs.get(n) for n in computed) for v in candidates}, key=repr)
                raise LookupError(f"{self.kernel}: @triton.heuristics gives {computed} for this call and no variant "
                                  f"was built for it (built: {[dict(zip(computed, b)) for b in built]}); add the "
                                  f"value to the row's constexprs")
            candidates = match
        names = tuple(v.variant for v in candidates)
        sub = self._subs.get(names)
        if sub is None:
            sub = self._subs[names] = Launcher(self.kernel, candidates, self._driver)
        return sub

    # ------------------------------------------------------------ launching

    def __getitem__(self, grid):
        hashable = type(grid) in (tuple, int)
        fn = self._grids.get(grid) if hashable else None
        if fn is not None:
            return fn
        calls: dict = {}  # (key values, given constexprs, heuristics' inputs, dtypes) -> launch function

        def miss(grid, args, key):
            """The launch for a key not seen before: the config the tuning table picks for the call's key (tuned
            online first when asked and the key is not in the table), and the runtime_call of the Launcher over
            its matching variants."""
            values, given, _ = self.bind(args)
            config, how = self.pick(self.key_of(values))
            if how != "exact" and self.online and self.configs:
                config = self._tune_online(grid, args)
            sub = self.launcher_for(config, values, given)
            # the key may leave out dtypes every variant fixes: a call no variant takes must not
            # leave its choice behind (select names why, before anything is cached)
            sub.select_values(values)
            if len(calls) >= MAX_CACHED:
                calls.clear()
            fn = calls[key] = sub.runtime_call(grid)
            return fn

        fn = self._make(grid, calls, miss, self._named)
        if hashable:
            if len(self._grids) >= MAX_CACHED:
                self._grids.clear()
            self._grids[grid] = fn
        return fn

    def _tune_online(self, grid, args) -> int:
        """Tune this call's key now, record it in the table file and reread the table."""
        from .tuner import tune_online

        if self.table_file is None:
            raise TuningError(f"{self.kernel}: online tuning needs the table's path (TunedLauncher(table_file=...))")
        config = tune_online(self, args, grid, self.table_file)
        self.table = TuningTable.read(self.table_file)
        return self.default if config is None else config

    def run(self, *args, grid, **kwargs):
        """Launch on `grid` (Launcher.run's form)."""
        return self[grid](*args, **kwargs)

    def bind(self, args, kwargs=None) -> tuple[tuple, tuple, dict] | None:
        """(runtime values in order, given constexprs (one per constexpr of `call_names`, ABSENT
        where not given), the other keywords) from a call's `args` (`call_names` in order:
        every parameter the decorators do not set, as Triton takes them; or the runtime ones
        alone when they come first) and `kwargs`;
        None when a runtime argument is missing (the Launcher then names it)."""
        kwargs = dict(kwargs or {})
        names = self.call_names
        if not kwargs and len(args) == len(names):
            values, given = self._split(args)
            return values, given, {}
        if len(args) == len(self.base.runtime_names) and self.base.runtime_first:
            bound = dict(zip(self.base.runtime_names, args))
        else:
            bound = dict(zip(names, args))
        for k in list(kwargs):
            if k in self.base.param_names:
                bound[k] = kwargs.pop(k)
        if any(name not in bound for name in self.base.runtime_names):
            return None
        values = tuple(bound[name] for name in self.base.runtime_names)
        given = tuple(bound.get(name, ABSENT) for name in self._cx_names)
        return values, (given if any(x is not ABSENT for x in given) else ()), kwargs

    def _named(self, grid, args, kwargs):
        """Any other call form: bound by name to choose the config, then launched through the
        chosen variants' runtime_call. A config kwarg or num_warps / num_stages given by name
        searches every variant, as a plain Launcher does."""
        if self._config_names & set(kwargs) or {"num_warps", "num_stages", "num_ctas"} & set(kwargs):
            return self.base[grid](*args, **kwargs)
        bound = self.bind(args, kwargs)
        if bound is None or set(bound[2]) - {"stream", "launch_pdl"}:
            return self.base[grid](*args, **kwargs)  # the Launcher names what is missing or unknown
        values, given, rest = bound
        config = self.pick(self.key_of(values))[0]
        return self.launcher_for(config, values, given).runtime_call(grid)(*values, **rest)

    def config_for(self, *args, **kwargs) -> dict:
        """Which config a launch with these arguments uses: {"config", "how", "key", "kwargs"}."""
        values = self.bind(args, kwargs)[0]
        key = self.key_of(values)
        config, how = self.pick(key)
        return {"config": config, "how": how, "key": key, "kwargs": self.config_kwargs.get(config, {})}

    def select(self, *args, **kwargs) -> Variant:
        """The variant a launch with these arguments would use."""
        values, given, rest = self.bind(args, kwargs)
        config = self.pick(self.key_of(values))[0]
        return self.launcher_for(config, values, given).select(*args, **kwargs)


def _getter(pos):
    """args -> the tuple of args at positions `pos` (itemgetter, which returns a bare item for one)."""
    if not pos:
        return lambda args: ()
    if len(pos) == 1:
        i = pos[0]
        return lambda args: (args[i],)
    return operator.itemgetter(*pos)


def _splitter(rt_pos, cx_pos):
    """args -> (runtime values, constexpr values) by position (a Triton-style call passes both
    kinds in parameter order)."""
    rt, cx = _getter(rt_pos), _getter(cx_pos)
    return lambda args: (rt(args), cx(args))


class _Absent:
    def __repr__(self):
        return "<not given>"


ABSENT = _Absent()


def _same(have, want) -> bool:
    """A variant's constexpr equals a given one (True is not 1: select.check_variant's rule)."""
    return have == want and (type(have) is bool) == (type(want) is bool)
