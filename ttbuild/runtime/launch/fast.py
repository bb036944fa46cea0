"""The generated and C launch paths of a Launcher: per fixed grid, a function that turns positional torch tensors and scalars into a launch with one dict lookup.

The generated source is ttbuild.runtime.fastpath's; the C one is claunch.c through
ttbuild.runtime.cext, used for a fixed grid where a C compiler is present and handing whatever
it does not take to the generated one. Both read the launch state `_fill` puts in their shared
dict `D`; a miss there goes through the generic path (ttbuild.runtime.launch.generic).
"""

from __future__ import annotations

import sys

from .. import cext, fastpath, scratch
from ..args import classify
from .common import MAX_CACHED
from .compiled import Compiled
from .grid import grid3, stream_handle


def c_launch_capable(driver) -> bool:
    """Whether `driver` offers what the C launch path needs (see ttbuild.runtime.driver.Driver)."""
    return all(hasattr(driver, name) for name in ("c_launch_address", "function_address", "check_code"))


class FastPaths:
    """The Launcher's generated and C paths (a mixin: the state lives in Launcher.__init__)."""

    def _bind_grid(self, grid):
        """The launch function for a fixed grid: generated (fastpath) when the kernel allows,
        else the generic path; an empty grid launches nothing but still checks arguments."""
        g = grid3(grid)
        if g[0] == 0 or g[1] == 0 or g[2] == 0:
            return self._fallback(grid)
        if self._maker is None:
            self._maker = self._make_maker() or False
        if self._maker:
            fn = self._maker(grid, *g)
            if self._c_launch is not None and max(g) <= 0xFFFFFFFF:
                fn = self._c_launch(fastpath.c_kinds(self._kinds), *g, self._ns, fn, self._c_address)
        else:
            fn = self._fallback(grid)
        if len(self._bound) >= MAX_CACHED:
            self._bound.clear()
        self._bound[grid] = fn
        return fn

    def _make_maker(self, dynamic=False):
        """fastpath's `make(grid, g0, g1, g2)` (or `make(grid)` when `dynamic`, for callable
        grids) over this kernel's namespace, or None when the kernel takes the generic path."""
        if self._kinds is None:
            return None
        if self._ns is None:
            self._ns = self._namespace()
        if not dynamic and self._c_launch is None and c_launch_capable(self.driver):
            module = cext.load()
            address = self.driver.c_launch_address if module is not None else None
            if address:
                self._c_launch, self._c_address = module.FastLaunch, address
                self._ns["D"].clear()  # hits filled so far carry no C launch data
        # the second maker shares the first one's globals (TT, D, ...)
        ns = self._ns
        return fastpath.compile_maker(self._kinds, ns, ns["L"] is not None, self.runtime_names, dynamic,
                                      self._has_scratch)

    def _namespace(self) -> dict:
        """The generated launch functions' globals, shared by every grid of this kernel."""
        driver = self.driver
        raw = getattr(driver, "cu_launch", None)
        runtime_names = self.runtime_names

        def tok(value, i):
            """The generic key item of runtime argument `i` (args.classify): the fast key's slot for a value the
            generated test does not cover."""
            return classify(value, runtime_names[i])[0]

        def fail(result, hit, g0, g1, g2):
            """Raise the CudaError of a failed cuLaunchKernel (a cuda.bindings result) with the grid, block and
            shared bytes."""
            driver.check("cuLaunchKernel", result, f"grid={(g0, g1, g2)}, block=({hit[5]},1,1), "
                                                   f"shared={hit[6]}")

        def fail_code(err, hit, g0, g1, g2):
            """Raise the CudaError of a failed launch from the C path's raw CUresult `err`."""
            driver.check_code("cuLaunchKernel", err, f"grid={(g0, g1, g2)}, block=({hit[5]},1,1), "
                                                     f"shared={hit[6]}")

        if self._runtime_first:
            def slow(grid, args, kw, stream):
                """A call the generated path does not take, launched by the generic path (all parameters, by position
                or name)."""
                return self._launch(grid, *args, stream=stream, **kw)
        else:  # only runtime_call reaches the generated path: its arguments are the runtime ones
            def slow(grid, args, kw, stream):
                """A call the generated path does not take, launched by the generic path (the runtime arguments in
                order)."""
                return self._launch_values(grid, args, kw, stream)

        return {
            "TT": fastpath._NoTensorYet, "TP": fastpath._NoTensorYet, "getdev": None, "rawstream": None, "D": {},
            "fill": self._fill, "slow": slow, "tok": tok, "FT": "float", "fail": fail,
            "norm_stream": stream_handle, "L": raw, "OK": getattr(driver, "cu_success", 0),
            "driver_launch": driver.launch, "grid3": grid3, "fail_code": fail_code,
        }

    def _enable_torch(self, tp):
        """Let the generated path take `tp` (torch.Tensor) now that torch is known to be loaded."""
        ns = self._ns
        if tp.__name__ != "Tensor":  # a subclass (nn.Parameter, read last among the arguments): its torch.Tensor
            tp = next((c for c in tp.__mro__ if c.__name__ == "Tensor" and c.__module__.startswith("torch")), tp)
        if ns is None or ns["TT"] is tp or tp.__name__ != "Tensor" or not hasattr(tp, "get_device"):
            return
        C = getattr(sys.modules.get("torch"), "_C", None)
        getdev = getattr(C, "_cuda_getDevice", None)
        rawstream = getattr(C, "_cuda_getCurrentRawStream", None)
        if getdev is not None and rawstream is not None:
            # nn.Parameter (a layer's weights) is a Tensor subclass that keeps data_ptr, dtype and
            # get_device: the generated path takes it too (the generic path cost ~30 us a launch
            # more, measured served against Triton on norm layers with weights on an H200)
            param = getattr(getattr(sys.modules.get("torch"), "nn", None), "Parameter", None)
            ns.update(TT=tp, TP=param if isinstance(param, type) else fastpath._NoTensorYet,
                      getdev=getdev, rawstream=rawstream)

    def _fill(self, key, args, device):
        """Launch state for a new fast key (all tensors on `device`, torch's current one)."""
        names = self.runtime_names
        keys, packed = [], []
        for v, n in zip(args, names):
            k, p = classify(v, n)
            keys.append(k)
            packed.append(p)
        driver = self.driver
        ctx, capability = driver.context(device)
        comp = self._select_compiled(tuple(keys), None, None, capability, packed, ctx)
        fn = comp.function(driver, ctx, capability)
        use = self._scratch_use(comp, ctx) if comp.scratch is not None else None
        hit = comp.fast_state(fn, comp.shared_of[ctx],
                              driver.function_address(fn) if self._c_launch is not None else None, use)
        if self._has_scratch:
            hit += (use,)
        table = self._ns["D"]
        if len(table) >= MAX_CACHED:
            table.clear()
        table[key] = hit
        return hit

    def _scratch_use(self, comp: Compiled, ctx) -> scratch.ScratchUse:
        """`use(stream, programs) -> address` of `comp`'s global scratch in context `ctx`."""
        if self._scratch is None:
            self._scratch = scratch.global_scratch(self.driver)
        size, align = comp.scratch
        return scratch.ScratchUse(self._scratch, ctx, size, align, f"{self.kernel} ({comp.variant.variant})")
