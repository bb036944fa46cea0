"""Façade launch objects: JITFunction (`kernel[grid](...)`, `.run`, `.warmup`), Autotuner and Heuristics with Triton 3.6's call semantics, launching through ttbuild.runtime.serve."""

import inspect
import warnings


class _Driver:
    """`triton.runtime.driver`: there is no Triton driver here; reading it says so."""

    def __getattr__(self, name):
        raise RuntimeError(f"triton.runtime.driver.{name}: ttbuild's triton façade has no Triton driver "
                           "(launches go through ttbuild.runtime)")


driver = _Driver()


class KernelInterface:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def warmup(self, *args, grid, **kwargs):
        return self.run(*args, grid=grid, warmup=True, **kwargs)


class _Param:
    def __init__(self, p):
        self.name = p.name
        ann = p.annotation
        self.is_constexpr = "constexpr" in (ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann)))


class JITFunction(KernelInterface):
    """A `@triton.jit` function; launching it runs the served prebuilt variant."""

    def __init__(self, fn, **options):
        self.fn = fn
        self.options = options
        self.launch_metadata = options.get("launch_metadata")  # called only when a launch hook is set
        self.params = [_Param(p) for p in inspect.signature(fn).parameters.values()]
        self.arg_names = [p.name for p in self.params]
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__qualname__ = fn.__qualname__

    def run(self, *args, grid, warmup, **kwargs):
        from ttbuild.runtime.serve import active

        return active().run_jit(self, *args, grid=grid, warmup=warmup, **kwargs)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Cannot call @triton.jit'd outside of the scope of a kernel")

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"


def jit(fn=None, **options):
    """@triton.jit and @triton.jit(...)."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)


class Config:
    """triton.Config: constexpr kwargs and launch options of one autotune candidate."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, ir_override=None):
        self.kwargs, self.num_warps, self.num_stages, self.num_ctas = dict(kwargs), num_warps, num_stages, num_ctas
        self.maxnreg, self.pre_hook, self.ir_override = maxnreg, pre_hook, ir_override

    def all_kwargs(self):
        opts = {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas}
        if self.maxnreg is not None:
            opts["maxnreg"] = self.maxnreg
        return {**self.kwargs, **opts}

    def __repr__(self):
        return f"Config({self.kwargs}, num_warps={self.num_warps}, num_stages={self.num_stages})"


class Autotuner(KernelInterface):
    """Chooses a config per key from the served tuning table (filled in by
    ttbuild.runtime.servetune before run); a key the table lacks takes the first config."""

    def __init__(self, fn, arg_names, configs, key, **options):
        self.fn, self.arg_names, self.configs, self.keys = fn, arg_names, list(configs) or [Config({})], list(key)
        self.options = options
        self.cache = {}
        self.best_config = None

    def run(self, *args, **kwargs):
        config = self.configs[0]
        if len(self.configs) > 1:
            all_args = {**dict(zip(self.arg_names, args)), **kwargs}
            named = {k: v for k, v in all_args.items() if k in self.arg_names}
            key = tuple([named[k] for k in self.keys if k in named] + [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
            if key not in self.cache:
                warnings.warn(f"ttbuild façade: no tuning table entry for {self.fn!r} key {key}; using its first config",
                              stacklevel=3)
                self.cache[key] = self.configs[0]
            config = self.cache[key]
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()})
        return self.fn.run(*args, **kwargs, **config.all_kwargs())


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None, post_hook=None,
             warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False):
    def decorator(fn):
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero=reset_to_zero, restore_value=restore_value)

    return decorator


class Heuristics(KernelInterface):
    """Computes constexprs from the arguments before launching, as triton.heuristics."""

    def __init__(self, fn, arg_names, values):
        self.fn, self.arg_names, self.values = fn, arg_names, values

    def run(self, *args, **kwargs):
        for v, heur in self.values.items():
            kwargs[v] = heur({**dict(zip(self.arg_names, args)), **kwargs})
        return self.fn.run(*args, **kwargs)


def heuristics(values):
    def decorator(fn):
        return Heuristics(fn, fn.arg_names, values)

    return decorator
