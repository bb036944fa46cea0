"""`serve(library)`: unmodified `@triton.jit` call sites (`kernel[grid](...)`, `.run`, `.warmup`, through Autotuner and Heuristics) launch the library's prebuilt cubins; Triton compiles nothing.

With Triton installed, `triton.runtime.jit.JITFunction.run` is replaced once Triton is imported
(ttbuild.postimport: ttbuild never imports Triton itself), and each Autotuner's cache is filled
from the recorded tuning tables before it would benchmark. Without Triton, `facade=True` puts
a minimal `triton` package (ttbuild/runtime/facade) on sys.path, never in front of a real one.

A kernel is found by its source file (the library's `file` is a suffix of the function's
path) and name. The arguments are specialised as Triton 3.6 does (dtypes, address or value a
multiple of 16, an int equal to 1 as a constexpr, None as a constexpr None, a tl.dtype given to
a constexpr by name): variants naming a `== 1` or None parameter among their constexprs are
tried first, then the rest; within them the runtime picks the most
specialised variant the arguments meet (ttbuild.runtime.select). A miss follows the policy:
`error` (default) raises ServeMiss naming the kernel, the arguments' specialization and the
variant row that would cover it; `warn` warns once per kernel and specialization and runs
Triton's JIT (with Triton installed). Both append the miss, as a `compile` record, to the
miss log (`miss_log=`, default $TTBUILD_MISS_LOG), which `ttbuild record --from LOG` turns into rows.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings

from ..cxvalue import to_json
from ..errors import TTBuildError
from .args import dtype_name
from .launcher import Launcher
from .select import NoMatchingVariant, same_constexpr
from .servehooks import hooked_launch, hooks_set, runtime_knobs

POLICIES = ("error", "warn")
LAUNCH_KW = ("num_warps", "num_stages", "num_ctas")
# Triton launch options with no effect on which prebuilt variant runs here (backends/nvidia CUDAOptions).
IGNORED_KW = ("debug", "enable_fp_fusion", "launch_cooperative_grid", "instrumentation_mode", "sanitize_overflow",
              "extern_libs", "maxnreg", "ir_override")
MISS_LOG_ENV = "TTBUILD_MISS_LOG"


class ServeMiss(TTBuildError, LookupError):
    """A launch no prebuilt variant covers (policy `error`): names kernel, specialization and the row to add."""


class DeviceNotCovered(TTBuildError, RuntimeError):
    """The GPU of this process runs none of the library's images."""


def _annotated(fn) -> set:
    out = set()
    for p in inspect.signature(fn).parameters.values():
        ann = p.annotation
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
        if "constexpr" in str(text):
            out.add(p.name)
    return out


def specialization(fn, bound: dict, annotated: set, options: dict, capability=None) -> dict:
    """The `compile` record (ttbuild.record.store) Triton 3.6 would make for these arguments:
    pointers by dtype and 16-byte alignment, ints as i32/i64/u64, % 16 and == 1, floats fp32,
    bools i1, None and annotated parameters constexprs."""
    sig, constants, div16 = {}, {}, []
    for name, v in bound.items():
        if name in annotated or v is None:  # a dtype as {"dtype": name}, the record hook's form
            sig[name], constants[name] = "constexpr", to_json(v)
        elif hasattr(v, "data_ptr"):
            sig[name] = "*" + (dtype_name(getattr(v, "dtype", None)) or "i8")
            if v.data_ptr() % 16 == 0:
                div16.append(name)
        elif isinstance(v, bool):
            sig[name] = "i1"
        elif isinstance(v, int):
            if v == 1:
                sig[name], constants[name] = "constexpr", 1
                continue
            sig[name] = "i32" if -2**31 <= v < 2**31 else "u64" if v >= 2**63 else "i64"
            if v % 16 == 0:
                div16.append(name)
        elif isinstance(v, float):
            sig[name] = "fp32"
        else:
            sig[name] = type(v).__name__
    path = os.path.abspath(fn.__code__.co_filename)
    return {"event": "compile", "module": fn.__module__, "qualname": fn.__qualname__, "kernel": fn.__name__,
            "path": path, "params": list(bound), "annotated": sorted(annotated), "signature": sig,
            "constants": constants, "div16": sorted(div16), "num_warps": options.get("num_warps", 4),
            "num_stages": options.get("num_stages", 3), "num_ctas": options.get("num_ctas", 1), "maxnreg": None,
            "capability": list(capability) if capability else None}


class ServedKernel:
    """The library's variants of one Python kernel function, grouped by which parameters not
    annotated `tl.constexpr` they fix to 1 or to None (Triton's `== 1` and None
    specializations): one Launcher per group, most fixed first. A group's key is a frozenset of
    (name, fixed to None)."""

    def __init__(self, server, fn, variants: list):
        self.server, self.fn = server, fn
        self.signature = inspect.signature(fn)
        self.annotated = _annotated(fn)
        self.root = None
        groups: dict = {}
        for v in variants:
            fixed = frozenset((n, v.constexprs[n] is None) for n in v.constexprs if n not in self.annotated)
            groups.setdefault(fixed, []).append(v)
            path = os.path.abspath(fn.__code__.co_filename)
            self.root = path[: len(path) - len(v.file)].rstrip("/") or "/"
        drv = server.library._driver
        self.groups = [(fixed, Launcher(fn.__name__, vs, drv)) for fixed, vs in
                       sorted(groups.items(), key=lambda kv: (-len(kv[0]), sorted(kv[0])))]
        self.missed: set = set()
        names = list(self.signature.parameters)
        self.n_params = len(names)
        self.plain = [i for i, n in enumerate(names) if n not in self.annotated]
        self.cx_pos = [i for i, n in enumerate(names) if n in self.annotated]
        self.names = names
        self.name_set = frozenset(names)
        self._fast: dict = {}
        params = self.signature.parameters.values()
        self.simple = all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}

    def _positional(self, args, kwargs) -> tuple | None:
        """Every parameter's value in order when the call passes parameters only (positionally,
        by name, or by default), else None (launch options, stream, a missing argument)."""
        n = len(args)
        if n > self.n_params:
            return None
        if not kwargs and n == self.n_params:
            return args
        out, used = list(args), 0
        for name in self.names[n:]:
            if name in kwargs:
                out.append(kwargs[name])
                used += 1
            elif name in self.defaults:
                out.append(self.defaults[name])
            else:
                return None
        return tuple(out) if used == len(kwargs) else None

    def _split(self, kwargs) -> tuple | None:
        """(parameters by name, sorted launch options) of a call's keywords; None when one
        needs the general path (stream, launch_pdl, an unknown name)."""
        params, opts = {}, []
        for k, v in kwargs.items():
            if k in self.name_set:
                params[k] = v
                if k in LAUNCH_KW:  # a parameter named num_warps: Triton binds it and takes the option too
                    opts.append((k, v))
            elif k in LAUNCH_KW:
                opts.append((k, v))
            elif k not in IGNORED_KW:
                return None
        return params, tuple(sorted(opts))

    def _fast_path(self, args, opts=()):
        """(Launcher over the variants that match these constexpr values, `== 1` arguments and
        launch options, positions of its runtime arguments) for a call given as every
        parameter in order, cached per those values; None when it needs the general path."""
        ones = tuple(i for i in self.plain if type(args[i]) is int and args[i] == 1)
        nones = tuple(i for i in self.plain if args[i] is None)
        cx = tuple((type(args[i]), args[i]) for i in self.cx_pos)
        key = (ones, nones, cx, opts)
        try:
            return self._fast[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable constexpr
            return None
        found = None
        one_names = {self.names[i] for i in ones}
        none_names = {self.names[i] for i in nones}
        for fixed, launcher in self.groups:
            if {n for n, none in fixed if none} != none_names or not {n for n, none in fixed if not none} <= one_names:
                continue
            want = {self.names[i]: args[i] for i in self.cx_pos}
            want.update((n, None if none else 1) for n, none in fixed)
            match = [v for v in launcher.variants if all(n in v.constexprs and same_constexpr(v.constexprs[n], x)
                                                         for n, x in want.items())
                     and all(getattr(v, k) == x for k, x in opts)]
            if match:
                sub = Launcher(self.fn.__name__, match, launcher._driver)
                found = (sub, tuple(self.names.index(n) for n in sub.runtime_names))
                break
        if len(self._fast) < 256:
            self._fast[key] = found
        return found

    def bind(self, args, kwargs):
        """(arguments by parameter name with defaults applied, launch options) of a call. A launch
        keyword that is also a parameter (`num_warps: tl.constexpr`) is both, as in Triton 3.6's
        JITFunction.run: its binder takes the parameter, parse_options the option."""
        options = {k: kwargs[k] for k in LAUNCH_KW if k in kwargs}
        for k in LAUNCH_KW + IGNORED_KW:
            if k not in self.name_set:
                kwargs.pop(k, None)
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments), options

    def launcher_options(self, options: dict) -> dict:
        """The launch options a Launcher takes: those not also a parameter (a `num_warps`
        parameter's value already picks the variant, and the Launcher refuses it twice)."""
        return {k: v for k, v in options.items() if k not in self.name_set}

    def launch(self, args, kwargs, grid, warmup, fallback=None, jit_self=None):
        """Launch (or with warmup, only select) the covering variant; a miss follows the policy."""
        split = self._split(kwargs) if not warmup and self.simple and self.server._checked else None
        full = self._positional(args, split[0]) if split is not None else None
        if full is not None:
            fast = self._fast_path(full, split[1])
            if fast is not None:
                sub, pos = fast
                try:
                    return sub.runtime_call(grid)(*[full[i] for i in pos])
                except NoMatchingVariant:
                    pass  # another group may take these dtypes or alignments: the general path decides
        given = kwargs
        kwargs = dict(kwargs)
        stream = kwargs.pop("stream", None)
        pdl = kwargs.pop("launch_pdl", False)
        bound, options = self.bind(args, kwargs)
        chosen = self.launcher_options(options)
        self.server.check_device()
        if self.missed and self.server.policy == "warn" and fallback is not None and not warmup:
            # a specialization that missed before misses again (selection reads nothing else):
            # straight to Triton, without trying every variant of every group again
            spec = specialization(self.fn, bound, self.annotated, options, self.server.capability)
            if miss_key(spec, options) in self.missed:
                return self.miss(bound, options, args, given, grid=grid, warmup=warmup, fallback=fallback,
                                 jit_self=jit_self, spec=spec)
        values = list(bound.values())
        for fixed, launcher in self.groups:
            if any(bound[n] is not None if none else (type(bound[n]) is not int or bound[n] != 1) for n, none in fixed):
                continue
            if any(v is None for n, v in bound.items() if n not in launcher.constexpr_names):
                continue
            try:
                if warmup:
                    return launcher.select(*values, **chosen)
                return launcher.run(*values, grid=grid, stream=stream, launch_pdl=pdl, **chosen)
            except NoMatchingVariant:
                continue
        return self.miss(bound, options, args, given, grid=grid, warmup=warmup, fallback=fallback, jit_self=jit_self)

    def miss(self, bound, options, args, given, grid, warmup, fallback, jit_self, spec=None):
        """Count the miss and log its specialization once per process; raise ServeMiss, or with
        `warn` run `fallback` (Triton's run) on the call as it was given, warning once per key.
        The row text is built only when it is shown: a call site that misses on every call
        under `warn` pays for the selection, not for a log line and a row each time."""
        if spec is None:
            spec = specialization(self.fn, bound, self.annotated, options, self.server.capability)
        key = miss_key(spec, options)
        new = key not in self.missed
        self.missed.add(key)
        self.server.log_miss(spec, append=new)
        if self.server.policy == "warn" and fallback is not None:
            if new:
                warnings.warn(self.miss_text(spec) + "\nfalling back to Triton's JIT for it", stacklevel=4)
            return fallback(jit_self, *args, grid=grid, warmup=warmup, **given)
        raise ServeMiss(self.miss_text(spec))

    def miss_text(self, spec: dict) -> str:
        """What a miss says: the kernel, the call's specialization and the row that would cover it."""
        row = self.server.row_for(spec, self.root)
        shown = ", ".join(f"{n}: {spec['signature'][n]}" + (":16" if n in spec["div16"] else "")
                          + (f"={spec['constants'][n]!r}" if n in spec["constants"] else "") for n in spec["params"])
        where = f"{self.fn.__module__}.{self.fn.__qualname__}"
        return (f"ttbuild serve: no prebuilt variant of {where} ({spec['path']}) covers "
                f"({shown}) num_warps={spec['num_warps']} num_stages={spec['num_stages']} num_ctas={spec['num_ctas']}"
                f"; the row that would cover it:\n{row}")


def miss_key(spec: dict, options: dict) -> tuple:
    """What decides a call's selection, from its specialization (ttbuild.record.events): dtypes,
    `:16` and `== 1` facts, constexpr values and launch options; equal keys select alike."""
    return (tuple(spec["signature"].items()), tuple(spec["div16"]), repr(sorted(spec["constants"].items())),
            tuple(sorted(options.items())))


class Server:
    """What serve() installed: the library, the miss policy and log, the served kernels."""

    def __init__(self, library, policy: str, miss_log: str | None):
        if policy not in POLICIES:
            raise ValueError(f"miss policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.library, self.policy, self.miss_log = library, policy, miss_log
        self.kernels: dict = {}
        self.capability = None
        self._checked = False
        self.original_run = None
        # while True, call sites run Triton's own JIT (benchmarks/bench_served.py times both in one process)
        self.paused = False
        self.launch_knobs = None  # triton.knobs.runtime once Triton (or the façade) is imported
        self.calls = self.misses = self.warmup_misses = 0  # launches asked of serve; misses (of them, of .warmup)

    def served(self, fn) -> ServedKernel:
        key = fn.__code__
        sk = self.kernels.get(key)
        if sk is None:
            path = os.path.abspath(fn.__code__.co_filename).replace(os.sep, "/")
            vs = self.library.variants_of(fn.__name__, lambda file: file and (path == file or path.endswith("/" + file)))
            sk = self.kernels[key] = ServedKernel(self, fn, vs)
        return sk

    def check_device(self) -> None:
        """Once, before the first launch: DeviceNotCovered when no variant runs on this GPU;
        a warning naming the kernels that have none for it."""
        if self._checked:
            return
        self._checked = True
        drv = self.library._driver
        if drv is None:
            from .driver import default_driver

            drv = self.library._driver = default_driver()
        _, self.capability = drv.context(None)
        check_coverage(self.library, self.capability)

    def log_miss(self, spec: dict, append: bool = True) -> None:
        """Count a miss; append its specialization to the miss log when `append` (the first
        time this process sees it: `ttbuild record` dedups the log into rows anyway)."""
        self.misses += 1
        if self.miss_log and append:
            from ..record.store import append

            append(self.miss_log, spec)

    def row_for(self, spec: dict, root: str | None) -> str:
        from ..record.rows import event_rows, rows_text

        rows, problems = event_rows(spec, root or os.path.dirname(spec["path"]))
        if not rows:
            return "  (none can: " + "; ".join(problems) + ")"
        return "\n".join("  " + line for line in rows_text(rows[:1]).splitlines()[2:])

    def run_jit(self, jit_self, *args, grid, warmup, **kwargs):
        """Stands in for triton's JITFunction.run (and the façade's); calls Triton's launch hooks
        when one is set (ttbuild.runtime.servehooks)."""
        sk = self.served(jit_self.fn)
        if warmup:
            before = self.misses
            try:
                return sk.launch(args, kwargs, grid, warmup, self.original_run, jit_self)
            finally:
                self.warmup_misses += self.misses - before
        self.calls += 1
        if self.launch_knobs is not None:
            hooks = hooks_set(self.launch_knobs)
            if hooks is not None:
                return hooked_launch(self, sk, jit_self, args, kwargs, grid, hooks)
        return sk.launch(args, kwargs, grid, warmup, self.original_run, jit_self)


def check_coverage(library, capability) -> None:
    """DeviceNotCovered when no variant of `library` runs on `capability` (and, for variants built for a GPU
    model, its SM count: a driver's Capability); a warning listing the kernels without one when only some lack it. Reads the library's index, not its metadata files."""
    groups = library.kernel_groups()
    if not groups:
        return
    missing = sorted((g.file, g.kernel) for g in groups if not g.runs_on(capability))
    sms = getattr(capability, "sm_count", None)
    cc = f"{capability[0]}.{capability[1]}" + (f" with {sms} SMs" if sms else "")
    if len(missing) == len(groups):
        targets = sorted({t for g in groups for t in g.targets()})
        models = sorted({m for g in groups for m in g.models()})
        held = ", ".join(targets) + (f" (GPU models {', '.join(models)})" if models else "")
        raise DeviceNotCovered(f"ttbuild serve: {library.lib_dir} holds kernels for {held}; "
                               f"this GPU is compute capability {cc}: build the rows for it (target = \"cuda:{capability[0]}{capability[1]}\")")
    if missing:
        names = ", ".join(f"{f}:{k}" for f, k in missing)
        warnings.warn(f"ttbuild serve: no variant of {names} runs on compute capability {cc}", stacklevel=3)


_active: list = []


def serve(library, *, miss: str = "error", miss_log: str | None = None, facade: bool = False,
          summary: bool | None = None) -> Server:
    """Serve `library` (a Library or an artifacts path) to this process's Triton call sites.

    miss: "error" or "warn" (module docstring). miss_log: a .jsonl file or a directory
    (default $TTBUILD_MISS_LOG). facade: without an installed Triton, make `import triton` load
    ttbuild's minimal façade. summary: print a line of launches, misses and Triton's compiles at
    exit (default: $TTBUILD_SERVE_SUMMARY=1; ttbuild.runtime.servestats). Returns the Server;
    serving again replaces it.
    """
    if isinstance(library, (str, os.PathLike)):
        from . import load

        library = load(os.fspath(library))
    server = Server(library, miss, miss_log or os.environ.get(MISS_LOG_ENV))
    _active[:] = [server]
    if summary or (summary is None and os.environ.get("TTBUILD_SERVE_SUMMARY") == "1"):
        from . import servestats

        servestats.enable(server)
    from ..postimport import when_imported

    if facade:
        from . import facade as facade_pkg

        facade_pkg.enable()
    when_imported("triton", _patch)
    return server


def active() -> Server:
    if not _active:
        raise RuntimeError("ttbuild serve: no library is served (call ttbuild.runtime.serve(library) first)")
    return _active[0]


def _patch(triton) -> None:
    """Replace JITFunction.run and fill Autotuners from the tuning tables (real Triton only)."""
    active().launch_knobs = runtime_knobs(triton)
    if getattr(triton, "__ttbuild_facade__", False):
        return
    jit = sys.modules["triton.runtime.jit"]
    cls = jit.JITFunction
    if getattr(cls.run, "_ttbuild_served", False):
        return
    original = cls.run

    def run(self, *args, grid, warmup, **kwargs):
        server = active()
        server.original_run = original
        if server.paused:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        for hook in self.pre_run_hooks:  # add_pre_run_hook: run before every launch, as Triton's run does
            hook(*args, **kwargs)
        return server.run_jit(self, *args, grid=grid, warmup=warmup, **kwargs)

    run._ttbuild_served = True
    cls.run = run
    from .servetune import patch_autotuner

    patch_autotuner(sys.modules["triton.runtime.autotuner"].Autotuner, active)
