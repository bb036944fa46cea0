"""Served autotuning: before an Autotuner would benchmark a key, the recorded tuning table names its config, so nothing is tuned at startup.

Tables: `<artifacts>/tuning/<kernel>.json` (ttbuild.record.tuning writes them).
"""

from __future__ import annotations

import os
import warnings

from .args import dtype_name
from .tuned import TuningError, TuningTable


def _table_dtype(dt) -> str:
    return dtype_name(dt) or str(dt)


def autotune_key(arg_names, keys, args: tuple, kwargs: dict, dtype=_table_dtype) -> tuple:
    """Triton 3.6's Autotuner key (autotuner.py `run`): the values of the key arguments, then
    each tensor argument's dtype, by default by Triton's name ("fp16") as the table stores it
    (`dtype=str`: as Triton's cache holds it, "torch.float16")."""
    all_args = {**dict(zip(arg_names, args)), **kwargs}
    named = {k: v for k, v in all_args.items() if k in arg_names}
    key = [named[k] for k in keys if k in named]
    key += [dtype(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    return tuple(key)


def same_config(cfg, doc: dict) -> bool:
    """Whether a triton.Config equals a table's config document."""
    return (dict(cfg.kwargs) == doc.get("kwargs") and cfg.num_warps == doc.get("num_warps")
            and cfg.num_stages == doc.get("num_stages") and cfg.num_ctas == doc.get("num_ctas", 1))


class Tables:
    """The tuning tables beside a library (`<artifacts>/tuning`), read once per kernel."""

    def __init__(self, lib_dir: str):
        self.dir = os.path.join(os.path.dirname(os.path.abspath(lib_dir)), "tuning")
        self._tables: dict = {}

    def find(self, fn) -> TuningTable | None:
        name = fn.__name__
        if name in self._tables:
            return self._tables[name]
        table = None
        stem = os.path.basename(fn.__code__.co_filename).removesuffix(".py")
        for n in (f"{stem}.{name}", name):
            try:
                table = TuningTable.read(os.path.join(self.dir, f"{n}.json"))
            except TuningError as exc:
                warnings.warn(f"ttbuild serve: ignoring the tuning table: {exc}", stacklevel=4)
            if table is not None:
                break
        self._tables[name] = table
        return table


def _base_fn(tuner):
    fn = tuner.fn
    while hasattr(fn, "fn") and not hasattr(fn, "params"):
        fn = fn.fn
    return getattr(fn, "fn", fn)


def fill(tuner, server, args, kwargs) -> None:
    """Put the table's config for this call's key into tuner.cache (when the key is new)."""
    if len(tuner.configs) <= 1:
        return
    raw = _triton_key(tuner, args, kwargs)
    if raw in tuner.cache:  # every call after a key's first: Triton's own key, nothing more
        return
    key = autotune_key(tuner.arg_names, tuner.keys, args, kwargs)
    tables = getattr(server, "tables", None)
    if tables is None:
        tables = server.tables = Tables(server.library.lib_dir)
    table = tables.find(_base_fn(tuner))
    if table is None:
        return
    index, _how = table.lookup(key)
    doc = table.doc.get("configs", {}).get(str(index)) if index is not None else None
    for cfg in tuner.configs:
        if doc is not None and same_config(cfg, doc):
            tuner.cache[raw] = cfg
            return


def _triton_key(tuner, args, kwargs) -> tuple:
    """The key exactly as Triton's Autotuner.run computes it (str(dtype) for tensors)."""
    return autotune_key(tuner.arg_names, tuner.keys, args, kwargs, dtype=str)


def patch_autotuner(cls, active) -> None:
    """Wrap Autotuner.run (real Triton's or the façade's) to fill its cache first."""
    original = cls.run
    if getattr(original, "_ttbuild_served", False):
        return

    def run(self, *args, **kwargs):
        fill(self, active(), args, kwargs)
        return original(self, *args, **kwargs)

    run._ttbuild_served = True
    cls.run = run
