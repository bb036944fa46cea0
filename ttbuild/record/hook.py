"""Inside a recorded process: Triton's `knobs.runtime.jit_cache_hook` writes each specialization Triton compiles, and each key an Autotuner tunes, to the record directory.

The one place ttbuild touches Triton (`# oracle` imports, inside functions): the hook is
installed by `install(directory)`, from the startup hook (ttbuild/record/startup, on
PYTHONPATH under `ttbuild record`), the pytest plugin, or by hand. The hook returns None, so
Triton compiles and runs as it would unrecorded; an existing hook is chained.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys

from .. import cxvalue
from . import store

_installed: list = []


@functools.lru_cache(maxsize=None)
def _file_sha(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def _origin(jit_fn) -> dict:
    fn = jit_fn.fn
    path = os.path.abspath(getattr(fn, "__code__", None) and fn.__code__.co_filename or "")
    return {"module": fn.__module__, "qualname": fn.__qualname__, "kernel": fn.__name__,
            "path": path, "sha256": _file_sha(path)}


def _value(v):
    """A constexpr's JSON form: plain values as they are, a tl.dtype as {"dtype": name} (its
    Triton name, ttbuild.cxvalue), anything else as {"repr": ...} (no row form)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    name = getattr(v, "value", v)
    if name is not v and isinstance(name, (bool, int, float, str)) or name is None:
        return name
    if cxvalue.dtype_of(v) is not None:
        return {"dtype": cxvalue.dtype_of(v)}
    if hasattr(v, "primitive_bitwidth") or type(v).__name__ == "dtype":
        return {"dtype": str(v)}
    return {"repr": repr(v)}


def compile_event(jit_fn, signature: dict, constants: dict, attrs: dict, options, capability) -> dict:
    """The "compile" line (ttbuild.record.store) of one specialization, from what Triton's
    `_call_hook` passes: signature {name: type}, constants {(index,): value}, attrs
    {(index,): [["tt.divisibility", 16], ...]}."""
    names = [p.name for p in jit_fn.params]
    constants_by_name, div16 = {}, []
    for path, v in constants.items():
        if len(path) == 1:
            constants_by_name[names[path[0]]] = _value(v)
    for path, items in attrs.items():
        if len(path) == 1 and any(k == "tt.divisibility" and val == 16 for k, val in items):
            div16.append(names[path[0]])
    return {"event": "compile", **_origin(jit_fn), "params": names,
            "annotated": [p.name for p in jit_fn.params if p.is_constexpr],
            "signature": {k: (v if isinstance(v, str) else "tuple") for k, v in signature.items()},
            "constants": constants_by_name, "div16": sorted(div16),
            "num_warps": options.num_warps, "num_stages": options.num_stages, "num_ctas": options.num_ctas,
            "maxnreg": getattr(options, "maxnreg", None), "capability": capability,
            "enable_fp_fusion": getattr(options, "enable_fp_fusion", True), "debug": bool(getattr(options, "debug", False))}


def _capability():
    from triton.runtime import driver  # oracle: only in a recorded process

    t = driver.active.get_current_target()
    arch = t.arch if isinstance(t.arch, int) else int(str(t.arch).removeprefix("sm_").rstrip("a"))
    return [arch // 10, arch % 10]


def install(directory: str) -> None:
    """Record into `directory` from now on (idempotent). Needs Triton >= 3.5 (knobs)."""
    if _installed:
        return
    import triton  # oracle: the recorder runs under real Triton
    from triton import knobs  # oracle

    previous = knobs.runtime.jit_cache_hook

    def hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
        try:
            c = compile
            ev = compile_event(fn.jit_function, c["signature"], c["constants"], c["configs"][0],
                               _Opts(c), _capability())
            store.append(directory, ev)
        except Exception as exc:  # a recording problem never stops the recorded program
            print(f"ttbuild record: could not record {repr}: {type(exc).__name__}: {exc}", file=sys.stderr)
        if previous is not None:
            return previous(key=key, repr=repr, fn=fn, compile=compile, is_manual_warmup=is_manual_warmup,
                            already_compiled=already_compiled)
        return None

    knobs.runtime.jit_cache_hook = hook
    _wrap_autotuner(triton, directory)
    _installed.append(directory)


class _Opts:
    """The options fields the hook passes in its `compile` dict, as attributes."""

    def __init__(self, c: dict):
        self.num_warps, self.num_stages, self.num_ctas = c["num_warps"], c["num_stages"], c["num_ctas"]
        spec = c.get("specialization_data") or "{}"
        import json

        options = json.loads(spec).get("options", {})
        self.maxnreg = options.get("maxnreg")
        self.enable_fp_fusion = c.get("enable_fp_fusion", options.get("enable_fp_fusion", True))
        self.debug = bool(options.get("debug", False))


def _config_doc(cfg) -> dict:
    return {"kwargs": {k: _value(v) for k, v in cfg.kwargs.items()}, "num_warps": cfg.num_warps,
            "num_stages": cfg.num_stages, "num_ctas": cfg.num_ctas, "maxnreg": getattr(cfg, "maxnreg", None)}


def _wrap_autotuner(triton, directory: str) -> None:
    """Autotuner has no hook for the config it chose: wrap its run to write each new key's
    choice and timings (Autotuner.cache and .configs_timings, python/triton/runtime/autotuner.py)."""
    Autotuner = triton.runtime.autotuner.Autotuner
    original = Autotuner.run
    if getattr(original, "_ttbuild_recording", False):
        return

    def run(self, *args, **kwargs):
        before = set(self.cache)
        out = original(self, *args, **kwargs)
        for key in set(self.cache) - before:
            try:
                fn = self.fn
                while not hasattr(fn, "params"):  # heuristics under autotune: the JITFunction below
                    fn = fn.fn
                timings = getattr(self, "configs_timings", None) or {}
                ms = [[_config_doc(c), (t[0] if isinstance(t, (list, tuple)) else t)] for c, t in timings.items()]
                store.append(directory, {"event": "autotune", **_origin(fn), "key_names": list(self.keys),
                                         "key": [_key_item(k) for k in key], "config": _config_doc(self.cache[key]),
                                         "timings": ms, "capability": _capability(), **_call_doc(self, fn, args, kwargs)})
            except Exception as exc:
                print(f"ttbuild record: could not record an autotune choice: {type(exc).__name__}: {exc}", file=sys.stderr)
        return out

    run._ttbuild_recording = True
    Autotuner.run = run


def _key_item(k):
    """Triton keys a tensor by str(dtype) ("torch.float16"); the table uses Triton's names (fp16)."""
    if isinstance(k, str) and k.startswith("torch."):
        from ..runtime.args import dtype_name

        return dtype_name(k) or k
    return _value(k)


LAUNCH_ONLY = ("grid", "warmup", "num_warps", "num_stages", "num_ctas", "maxnreg", "stream")


def _arg_doc(v):
    """What `ttbuild tune --recorded` needs to make an argument like it: a tensor's shape,
    strides (elements), dtype and address mod 16; a scalar or constexpr value."""
    if hasattr(v, "data_ptr") and hasattr(v, "shape") and hasattr(v, "stride"):
        from ..runtime.args import dtype_name

        return {"tensor": {"shape": list(v.shape), "stride": list(v.stride()), "dtype": dtype_name(v.dtype) or str(v.dtype),
                           "align": v.data_ptr() % 16}}
    return {"value": _value(v)}


def _call_doc(tuner, jit_fn, args, kwargs) -> dict:
    """The tuned call, for retuning it (ttbuild.runtime.retune): "args" (every parameter the call
    gave or defaulted, by name), "per_config" ([[config, {"grid", "constexprs"}], ...]: the grid
    each config launches on and the constexprs a @triton.heuristics under the autotuner sets),
    "reset_to_zero" and "restore_value" (names). Never raises: a part it cannot make is left out."""
    import inspect

    try:
        sig = inspect.signature(jit_fn.fn)
        named = {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
        named.update(zip(tuner.arg_names, args))
        named.update((k, v) for k, v in kwargs.items() if k not in LAUNCH_ONLY)
        grid = kwargs.get("grid")
        heur = getattr(tuner.fn, "values", None) if not hasattr(tuner.fn, "params") else None
        per_config = []
        for cfg in tuner.configs:
            meta = {**named, **cfg.kwargs}
            cx = {}
            for name, rule in (heur or {}).items():
                cx[name] = meta[name] = rule(meta)
            try:
                g = grid(meta) if callable(grid) else grid
                g = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
            except Exception:  # noqa: BLE001 - a grid that needs more than the arguments: not retunable
                g = None
            per_config.append([_config_doc(cfg), {"grid": g, "constexprs": {k: _value(v) for k, v in cx.items()}}])
        return {"args": {k: _arg_doc(v) for k, v in named.items()}, "per_config": per_config,
                "reset_to_zero": list(getattr(tuner, "reset_to_zero", []) or []),
                "restore_value": list(getattr(tuner, "restore_value", []) or [])}
    except Exception as exc:  # noqa: BLE001 - recording never stops the recorded program
        print(f"ttbuild record: could not record the tuned call's arguments: {type(exc).__name__}: {exc}", file=sys.stderr)
        return {}
