"""The generic launch path of a Launcher: arguments by name, constexprs, launch options, DLPack and __cuda_array_interface__ objects with their streams, tensors on another device.

It binds the call to the kernel's parameters, picks the variant (cached per argument signature,
ttbuild.runtime.select), converts and packs the parameters and launches. It also fills the fast
paths' shared dict (through `_select_compiled`).
"""

from __future__ import annotations

import sys

from ..args import classify, read_args, resolve_dlpack
from ..interop import same_stream
from ..metadata import Variant
from ..select import LAUNCH_OPTIONS, select
from .common import MAX_CACHED, LaunchError
from .compiled import Compiled
from .grid import grid3, stream_handle, torch_get_device, torch_raw_stream


class GenericPath:
    """The Launcher's generic path and variant choice (a mixin: the state lives in Launcher.__init__)."""

    def _bind(self, args, kwargs):
        """(runtime values in order, constexpr kwargs, launch-option kwargs). Raises LaunchError
        for too many positional arguments, one given twice, an unknown or a missing one."""
        names = self.param_names
        if len(args) > len(names):
            raise LaunchError(f"{self.kernel} takes {len(names)} arguments "
                              f"({', '.join(names)}), got {len(args)} positional")
        named = dict(zip(names, args))
        options = {}
        for k, v in kwargs.items():
            if k in named:
                raise LaunchError(f"{self.kernel}: argument {k!r} given twice")
            if k in LAUNCH_OPTIONS:
                options[k] = v
            elif k in self._name_set:
                named[k] = v
            else:
                unknown = [k for k in kwargs if k not in self._name_set and k not in LAUNCH_OPTIONS]
                raise LaunchError(f"{self.kernel}: unknown argument(s) {', '.join(unknown)}; "
                                  f"parameters are {', '.join(names)}")
        try:
            values = tuple([named[k] for k in self.runtime_names])
        except KeyError:
            missing = [k for k in self.runtime_names if k not in named]
            raise LaunchError(f"{self.kernel}: missing argument(s) {', '.join(missing)}") from None
        constexprs = None
        if len(named) > len(values):
            constexprs = {k: v for k, v in named.items() if k in self.constexpr_names}
        return values, constexprs, options or None

    def run(self, *args, grid, **kwargs):
        """Launch on `grid`; see the Launcher's docstring for the arguments. Returns None."""
        return self._launch(grid, *args, **kwargs)

    def _launch(self, grid, *args, stream=None, launch_pdl=False, **kwargs):
        if launch_pdl:
            kwargs["_pdl"] = True  # rides through the device switch to _launch_on
        if not kwargs and len(args) == self._n_runtime and self._runtime_first:
            values, constexprs, options = args, None, None
        else:
            pdl = kwargs.pop("_pdl", False)
            values, constexprs, options = self._bind(args, kwargs)
            if pdl:
                options = dict(options or {}, _pdl=True)
        return self._launch_bound(grid, values, constexprs, options, stream)

    def _launch_values(self, grid, values, kw, stream):
        """runtime_call's generic path: `values` are the runtime arguments in order."""
        pdl = kw.pop("launch_pdl", False)
        if kw or len(values) != self._n_runtime:
            raise LaunchError(f"{self.kernel}: this launch takes the {self._n_runtime} runtime arguments "
                              f"({', '.join(self.runtime_names)}) positionally, got {len(values)}"
                              + (f" and {', '.join(kw)} by name" if kw else ""))
        return self._launch_bound(grid, tuple(values), None, {"_pdl": True} if pdl else None, stream)

    def _launch_bound(self, grid, values, constexprs, options, stream):
        """Read the arguments, then launch on the device that holds them."""
        read = read_args(values, self.runtime_names, self.kernel)
        device = read.device
        if read.torch_type is not None:
            self._enable_torch(read.torch_type)
            current = torch_get_device()
            if device is not None and device != current:
                with sys.modules["torch"].cuda.device(device):  # launch where the tensors are
                    return self._launch_on(grid, values, constexprs, options, stream, device, read)
            return self._launch_on(grid, values, constexprs, options, stream, current, read)
        if device is not None:
            on_device = getattr(self.driver, "on_device", None)
            if on_device is not None:
                with on_device(device):
                    return self._launch_on(grid, values, constexprs, options, stream, None, read)
        return self._launch_on(grid, values, constexprs, options, stream, None, read)

    def _launch_on(self, grid, values, constexprs, options, stream, device, read):
        """Pick the variant, resolve the grid, wait on producer streams, pack and launch."""
        if stream is None:
            stream = torch_raw_stream(device) if read.torch_type is not None else 0
        elif type(stream) is not int:
            stream = stream_handle(stream)
        if read.dlpack:
            resolve_dlpack(read, values, self.runtime_names, stream)
        packed = read.packed
        driver = self.driver
        pdl = bool(options and options.pop("_pdl", False))
        ctx, capability = driver.context(device)
        comp = self._select_compiled(tuple(read.keys), constexprs, options or None, capability, packed, ctx)
        if callable(grid):
            meta = dict(zip(self.runtime_names, values))
            meta.update(comp.meta)
            grid = grid(meta)
        if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int and grid[0] > 0:
            g = (grid[0], 1, 1)
        else:
            g = grid3(grid)
            if g[0] == 0 or g[1] == 0 or g[2] == 0:
                return None  # an empty grid launches nothing, as in Triton
        fn = comp.functions.get(ctx)
        if fn is None:
            fn = comp.function(driver, ctx, capability)
        if read.producers:
            self._wait_producers(read, stream)
        if comp.needs_convert:
            packed = comp.conv(packed)
        if comp.scratch is not None:  # the address of the stream's buffer, after the parameters
            packed = [*packed, self._scratch_use(comp, ctx)(stream, g[0] * g[1] * g[2])]
        slot = comp.take_slot()
        comp.packer.pack_into(slot[0], 0, *packed)
        if pdl:
            launch_pdl = getattr(driver, "launch_pdl", None)
            if launch_pdl is None:
                comp.pool.append(slot)
                raise LaunchError(f"{self.kernel}: launch_pdl=True needs a driver that launches with "
                                  f"cuLaunchKernelEx (CudaDriver does)")
            launch_pdl(fn, g, comp.block_x, comp.shared_of[ctx], stream, slot[1], tuple(packed))
        else:
            driver.launch(fn, g, comp.block_x, comp.shared_of[ctx], stream, slot[1], tuple(packed))
        comp.pool.append(slot)  # cuLaunchKernel copied the parameters before returning
        return None

    def _wait_producers(self, read, stream):
        """Make `stream` wait on each __cuda_array_interface__ argument's producer stream."""
        for name, s in read.producers:
            if same_stream(s, stream):
                continue
            wait = getattr(self.driver, "stream_wait", None)
            if wait is None:
                raise LaunchError(f"{self.kernel}: argument {name!r} asks for a wait on stream {s:#x} "
                                  f"(__cuda_array_interface__ v3) and this driver cannot wait on streams")
            wait(stream, s)

    def _select_compiled(self, keys, constexprs, options, capability, packed, ctx) -> Compiled:
        """The launch state of the variant that takes these argument keys, cached per keys,
        context and capability (and constexprs and options when given)."""
        dkey = (keys, ctx, capability)
        if constexprs or options:
            dkey += (tuple((constexprs or {}).items()), tuple((options or {}).items()))
        comp = self._dispatch.get(dkey)
        if comp is None:
            variant = select(self.variants, keys, constexprs or {}, options or {}, capability,
                             kernel=self.kernel, names=self.runtime_names, values=packed)
            comp = self._compiled[variant.variant]
            if len(self._dispatch) >= MAX_CACHED:
                self._dispatch.clear()
            self._dispatch[dkey] = comp
        return comp

    def select(self, *args, **kwargs) -> Variant:
        """The variant a launch with these arguments would use (no driver call but `context`).
        Raises LaunchError (binding) or NoMatchingVariant."""
        values, constexprs, options = self._bind(args, kwargs)
        return self._select_values(values, constexprs, options)

    def select_values(self, values) -> Variant:
        """select() for the runtime arguments alone, in order (runtime_call's form). Raises
        NoMatchingVariant."""
        return self._select_values(tuple(values), None, None)

    def _select_values(self, values, constexprs, options) -> Variant:
        classified = [classify(v, n) for n, v in zip(self.runtime_names, values)]
        _, capability = self.driver.context(None)
        return select(self.variants, tuple(k for k, _ in classified), constexprs or {}, options or {}, capability,
                      kernel=self.kernel, names=self.runtime_names, values=[p for _, p in classified])
