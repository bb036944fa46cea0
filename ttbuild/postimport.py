"""Run a callback once a module has been imported (now, if it already is): how the recorder and ttbuild.runtime.serve reach Triton without importing it themselves."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading

_callbacks: dict[str, list] = {}
_lock = threading.Lock()


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a watched name it asks the other finders and wraps the
    loader's exec_module so the callbacks run right after the module body."""

    def find_spec(self, name, path=None, target=None):
        if name not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                _wrap(spec.loader, name)
                return spec
        return None


def _wrap(loader, name: str) -> None:
    original = loader.exec_module

    def exec_module(module):
        original(module)
        _fire(name, module)

    loader.exec_module = exec_module


def _fire(name: str, module) -> None:
    with _lock:
        todo = _callbacks.pop(name, [])
    for cb in todo:
        cb(module)


def when_imported(name: str, callback) -> None:
    """callback(module) after `name` is imported: at once if it is in sys.modules."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
