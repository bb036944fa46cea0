"""The one call a stage task makes: `run_cached(stage, module, inputs, options)` → outputs, via the cache.

The action key covers everything `module.run` may depend on under the stage contract
(docs/CONTRACTS.md): the stage name and `VERSION`, the sha256 of every input by role, the
options, and the versions of the tools the stage drives (`keys.STAGE_TOOLS`). Failures are
never cached: an exception from `run` propagates and nothing is stored.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from ttbuild.cache.base import Cache
from ttbuild.cache.keys import action_key, digest, tool_versions_for

_default: Cache | None = None
_default_lock = threading.Lock()


def default_cache() -> Cache:
    """The process's cache from the environment (`open_cache()`), opened once and reused."""
    global _default
    with _default_lock:
        if _default is None:
            from ttbuild.cache.config import open_cache

            _default = open_cache()
        return _default


def set_default_cache(cache: Cache | None) -> None:
    """Install `cache` as the process default (the CLI's `--cache`); None re-reads the environment."""
    global _default
    with _default_lock:
        _default = cache


def module_action_key(stage: str, module: Any, inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> str:
    """The cache's action key (`keys.action_key`, sha256) of running stage module `module` (with its `VERSION`) on `inputs` with `options`.

    Its `ttbuild` tool version names the code too (ttbuild.codedigest.code_version: the digest of
    the sources the stage module runs), so a compiler edit never reuses an entry."""
    from ttbuild.codedigest import code_version

    tools = dict(tool_versions_for(stage))
    name = getattr(module, "__name__", None)
    if "ttbuild" in tools and name:
        try:
            tools["ttbuild"] = code_version(name)
        except ImportError:  # a stand-in without source (tests' doubles): the release alone
            pass
    return action_key(stage, module.VERSION, {role: digest(bytes(b)) for role, b in inputs.items()},
                      options, tools)


def run_cached_hit(stage: str, module: Any, inputs: Mapping[str, bytes], options: Mapping[str, Any],
                   cache: Cache | None = None) -> tuple[dict[str, bytes], bool]:
    """Like `run_cached`, also saying whether the outputs came from the cache (True) or from
    running `module.run` (False): the build reporter counts stages served from the cache."""
    cache = default_cache() if cache is None else cache
    key = module_action_key(stage, module, inputs, options)
    hit = cache.get(key)
    if hit is not None:
        return hit, True
    outputs = module.run(inputs, options)
    cache.put(key, {role: bytes(data) for role, data in outputs.items()})
    return outputs, False


def run_cached(stage: str, module: Any, inputs: Mapping[str, bytes], options: Mapping[str, Any],
               cache: Cache | None = None) -> dict[str, bytes]:
    """`module.run(inputs, options)`, or its stored outputs when this exact action ran before.

    stage: a name in `keys.STAGE_TOOLS`; module: a stage module (`VERSION`, `run`);
    cache: defaults to `default_cache()`. A hit whose roles differ from a fresh run's cannot
    happen for a pure stage, so the outputs are returned as stored. Raises whatever `run` raises.
    """
    return run_cached_hit(stage, module, inputs, options, cache)[0]
