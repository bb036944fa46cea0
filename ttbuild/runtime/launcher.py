"""The Launcher's import path before the launcher became the ttbuild.runtime.launch package; kept so existing imports (serve, nonearg, user code) keep working."""

from __future__ import annotations

from .launch import MAX_CACHED, Launcher, LaunchError

__all__ = ["Launcher", "LaunchError", "MAX_CACHED"]
