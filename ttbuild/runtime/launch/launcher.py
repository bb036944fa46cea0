"""The Launcher: all variants of one kernel behind `launcher[grid](*args, **constexprs)`; it chooses which path a grid and a call form take."""

from __future__ import annotations

import functools

from .. import fastpath
from ..driver import default_driver
from ..metadata import MetadataError, Variant
from ..select import same_constexpr
from .common import MAX_CACHED
from .compiled import Compiled
from .fast import FastPaths
from .generic import GenericPath


class Launcher(FastPaths, GenericPath):
    """All variants of one kernel. `launcher[grid]` returns a callable that launches.

    Call arguments: the kernel's parameters positionally or by name (pointers: tensors with
    data_ptr(), __cuda_array_interface__ or __dlpack__; scalars: int, float, bool); constexprs
    by name (must equal the variant's; omitted means any); num_warps/num_stages/num_ctas select
    among variants; stream= a CUstream handle or a stream object (default: torch's current
    stream on the tensors' device when a torch tensor is passed, else the legacy default
    stream 0). The launch runs on the device that holds the tensors (InteropError when they are
    on different devices or in host memory); a CAI array's producer stream is waited on.
    Raises MetadataError when `variants` is empty or their parameters differ.
    """

    def __init__(self, kernel: str, variants: list[Variant], driver=None):
        if not variants:
            raise MetadataError(f"kernel {kernel}: no variants")
        self.kernel = kernel
        self.variants = list(variants)
        first = self.variants[0]
        for v in self.variants[1:]:
            if [(p.name, p.kind == "constexpr", p.origin, p.part) for p in v.params] != \
                    [(p.name, p.kind == "constexpr", p.origin, p.part) for p in first.params]:
                raise MetadataError(f"{v.json_path}: parameters differ from {first.json_path} "
                                    f"for the same kernel {kernel}")
        self.param_names = tuple(p.name for p in first.params)
        self.runtime_names = tuple(p.name for p in first.launch_params)
        self.constexpr_names = frozenset(p.name for p in first.params if p.kind == "constexpr")
        self._name_set = frozenset(self.param_names)
        # Fast positional path: runtime params come first, constexprs after them.
        self._runtime_first = self.param_names[:len(self.runtime_names)] == self.runtime_names
        self._n_runtime = len(self.runtime_names)
        self._driver = driver
        self._compiled = {v.variant: Compiled(v) for v in self.variants}
        self._dispatch: dict = {}
        self._bound: dict = {}
        self._maker = None
        self._maker_dyn = None
        self._kinds = fastpath.position_kinds(self.variants)  # runtime_call's form for any order
        self._ns = None  # the generated launch functions' globals (_namespace)
        self._c_launch = None  # claunch.FastLaunch once _make_maker found the C path usable
        self._c_address = None
        self._choice = None        # Triton's call form, when constexprs sit among the parameters
        self._triton_bound: dict = {}
        # what kernel[grid] returns for a tuple or int grid bound before (__getitem__)
        self._grids = self._bound if self._runtime_first else self._triton_bound
        self._narrowed: dict = {}  # constexpr values -> Launcher over the variants that have them
        # some variant takes global scratch: the fast paths' hits carry a tenth item (its
        # scratch.ScratchUse or None) and the generated source handles it
        self._has_scratch = any(v.global_scratch is not None for v in self.variants)
        self._scratch = None  # scratch.GlobalScratch of the driver, on first use

    @property
    def runtime_first(self) -> bool:
        """Whether the runtime parameters come before every constexpr (then a call may pass
        the runtime arguments alone, positionally: the fast path)."""
        return self._runtime_first

    @property
    def driver(self):
        """The driver this launcher launches through: the one given, else default_driver() on
        first use (CudaError when no CUDA driver loads)."""
        if self._driver is None:
            self._driver = default_driver()
        return self._driver

    def __getitem__(self, grid):
        # A grid bound before answers from _grids in this one frame: `kernel[grid](...)` pays it
        # on every launch, and a second frame was 35-50 ns of a 550 ns C launch
        # (benchmarks/profile_launch.py).
        tp = type(grid)
        if tp is tuple or tp is int:
            fn = self._grids.get(grid)
            if fn is not None:
                return fn
        return self._getitem(grid)

    def _getitem(self, grid):
        if not self._runtime_first:  # arguments bind to every parameter in order (Triton's call)
            return self._triton_call(grid)
        return self.runtime_call(grid)

    def _triton_call(self, grid):
        """Triton's call for a kernel with constexprs among its parameters (a specialised
        `stride = 1`): every parameter in order. The constexpr values pick the variants once per
        distinct values (same_constexpr), whose runtime_call launches: generated code
        (fastpath.choice_source), so the call costs one tuple and one lookup more than the
        runtime arguments alone. Keywords and anything unusual take the generic path."""
        hashable = type(grid) in (tuple, int)
        fn = self._triton_bound.get(grid) if hashable else None
        if fn is not None:
            return fn
        if self._choice is None:
            params = self.param_names
            rt_pos = [params.index(n) for n in self.runtime_names]
            cx_pos = [i for i, n in enumerate(params) if n in self.constexpr_names]
            self._choice = fastpath.compile_choice([(len(params), rt_pos, cx_pos, ())])
        calls: dict = {}
        cx_names = [n for n in self.param_names if n in self.constexpr_names]

        def miss(grid, args, key):
            """The launch for constexpr values `key` not seen before: the runtime_call of a Launcher over the
            variants built with them (cached), or the generic path, which names every variant and why it does not
            fit."""
            given = key
            sub = self._narrowed.get(given)
            if sub is None:
                match = [v for v in self.variants if all(
                    n in v.constexprs and same_constexpr(v.constexprs[n], x) for n, x in zip(cx_names, given))]
                if not match:  # the generic path names every variant and why it does not fit
                    return lambda *values: self._launch(grid, *args)
                sub = Launcher(self.kernel, match, self._driver)
                if len(self._narrowed) >= MAX_CACHED:
                    self._narrowed.clear()
                self._narrowed[given] = sub
            if len(calls) >= MAX_CACHED:
                calls.clear()
            fn = calls[key] = sub.runtime_call(grid)
            return fn

        fn = self._choice(grid, calls, miss, lambda grid, args, kw: self._launch(grid, *args, **kw))
        if hashable:
            if len(self._triton_bound) >= MAX_CACHED:
                self._triton_bound.clear()
            self._triton_bound[grid] = fn
        return fn

    def runtime_call(self, grid):
        """The launch callable for `grid` that takes the runtime arguments alone, positionally
        (`stream=`, `launch_pdl=` by name), whatever the order of the kernel's parameters: the
        generated fast paths serve it. `launcher[grid]` is this when the runtime parameters come
        first; for a kernel with constexprs among them it is how ttbuild.runtime.tuned launches
        a variant it has already matched to the call's constexprs."""
        tp = type(grid)
        if tp is tuple or tp is int:
            fn = self._bound.get(grid)
            if fn is None:
                fn = self._bind_grid(grid)
            return fn
        if callable(grid):
            if self._maker_dyn is None:
                self._maker_dyn = self._make_maker(dynamic=True) or False
            if self._maker_dyn:
                return self._maker_dyn(grid)
        return self._fallback(grid)

    def _fallback(self, grid):
        """The generic path for runtime_call's argument form."""
        if self._runtime_first:
            return functools.partial(self._launch, grid)
        return lambda *values, stream=None, **kw: self._launch_values(grid, values, kw, stream)

    def __repr__(self):
        return f"<ttbuild kernel {self.kernel}: {', '.join(v.variant for v in self.variants)}>"
