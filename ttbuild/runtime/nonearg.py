"""A kernel whose variants differ in which parameters were built a constexpr `None` (Triton's specialization of None): the call's `None` arguments pick the Launcher."""

from __future__ import annotations

from .launcher import Launcher
from .metadata import Variant
from .select import NoMatchingVariant

_MISSING = object()


def none_params(v: Variant) -> frozenset[str]:
    """The parameters variant `v` was built with a constexpr None."""
    return frozenset(p.name for p in v.params if p.kind == "constexpr" and p.value is None)


class NoneDispatch:
    """`dispatch[grid](*args, **kwargs)`: the Launcher of the variants built with exactly the
    parameters passed `None` (by position or by name) as constexpr None launches with the same
    arguments. Raises NoMatchingVariant naming the combinations that exist when none fits."""

    def __init__(self, kernel: str, variants: list[Variant], driver=None):
        self.kernel = kernel
        self.variants = list(variants)
        groups: dict = {}
        for v in self.variants:
            groups.setdefault(none_params(v), []).append(v)
        self._launchers = {k: Launcher(kernel, vs, driver) for k, vs in groups.items()}
        self._names = sorted(set().union(*groups))  # parameters some variant has None
        # a parameter's position: the same in every variant (they differ only in which are None)
        self._pos = {n: [p.name for p in variants[0].params].index(n) for n in self._names}

    def launcher_for(self, args: tuple, kwargs: dict) -> Launcher:
        passed = frozenset(n for n in self._names
                           if (args[self._pos[n]] if self._pos[n] < len(args) else kwargs.get(n, _MISSING)) is None)
        got = self._launchers.get(passed)
        if got is None:
            have = "; ".join(", ".join(sorted(k)) or "(none)" for k in self._launchers)
            raise NoMatchingVariant(f"no compiled variant of {self.kernel} takes None for exactly "
                                    f"{', '.join(sorted(passed)) or 'no parameter'}; variants have None for: {have}")
        return got

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launcher_for(args, kwargs)[grid](*args, **kwargs)
