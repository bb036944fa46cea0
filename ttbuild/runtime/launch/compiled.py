"""One variant's launch state: its packer and parameter buffers, its function handle per CUDA context, and what the fast paths unpack."""

from __future__ import annotations

import threading

from ...cxvalue import to_live
from ..metadata import Variant
from . import pack
from .image import check_driver, image_for, read_image


class Compiled:
    """One variant's launch state: packing format, parameter buffer, function per CUDA context."""

    def __init__(self, variant: Variant):
        self.variant = variant
        params = variant.launch_params
        # global scratch: (bytes per program, alignment); its address is the last parameter
        self.scratch = variant.global_scratch
        self.packer = pack.packer(variant, self.scratch is not None)
        self.n_slots = max(len(params) + (self.scratch is not None), 1)
        # Parameter buffers, taken and given back per launch: list.pop/append are atomic, so
        # threads never share one (cuLaunchKernel reads it with the GIL released), at a third
        # of a lock's cost. A launch that finds the pool empty (another thread holds the only
        # buffer, or a launch raised) makes a new one.
        self.pool = [self.new_slot()]
        self.block_x = 32 * (variant.total_num_warps or variant.num_warps)
        self.shared = variant.shared
        self.convert = pack.conversions(params)
        self.conv = pack.converter(self.convert)
        self.needs_convert = self.conv is not None
        # The generated fast path lets only Python ints and floats reach a float parameter
        # (fastpath.position_kinds), which struct packs as fp16/fp32/fp64 itself: it converts
        # bf16 parameters only (a float scalar cost 0.9 us per launch through `conv`).
        self.fast_conv = pack.converter(tuple(c if p.kind == "scalar" and p.dtype == "bf16" else None
                                              for c, p in zip(self.convert, params)))
        self.functions: dict = {}
        self.lock = threading.Lock()
        # What a grid callable sees besides the arguments (Triton passes constexprs and options),
        # a dtype constexpr as the tl.dtype a call passes, not its metadata form {"dtype": name}
        self.meta = {name: to_live(value) for name, value in variant.constexprs.items()}
        self.meta.update(num_warps=variant.num_warps, num_stages=variant.num_stages, num_ctas=variant.num_ctas)
        self._images: dict = {}
        self.shared_of: dict = {}

    def function(self, driver, ctx_key, capability=None):
        """The kernel's function handle in context `ctx_key` (compute `capability`), loading the
        best image there on first use: exact SASS, else PTX that the driver JIT-compiles. Checks
        the driver version against the variant's minimum first (when the driver can say it).
        Raises LaunchError (no image runs there), CudaError (driver too old, load failed) or
        MetadataError (the image is not the file the metadata describes)."""
        fn = self.functions.get(ctx_key)
        if fn is None:
            with self.lock:
                fn = self.functions.get(ctx_key)
                if fn is None:
                    image = image_for(self.variant, capability)
                    check_driver(driver, self.variant, image)
                    data = self._read(image)
                    fn = driver.load_function(data, self.variant.entry, image.shared)
                    self.shared_of[ctx_key] = image.shared
                    self.functions[ctx_key] = fn
        return fn

    def _read(self, image) -> bytes:
        """read_image, once per image path."""
        data = self._images.get(image.path)
        if data is None:
            data = self._images[image.path] = read_image(self.variant, image)
        return data

    def new_slot(self) -> tuple:
        """A new parameter buffer for this variant (pack.new_slot)."""
        return pack.new_slot(self.n_slots)

    def take_slot(self) -> tuple:
        """A parameter buffer from the pool, or a new one when the pool is empty."""
        try:
            return self.pool.pop()
        except IndexError:
            return self.new_slot()

    def fast_state(self, fn, shared, fn_address=None, scratch_use=None) -> tuple:
        """What the generated launch unpacks: (pool, new_slot, pack_into, conv, fn, block_x,
        shared, meta for a callable grid, C launch data or None). The C launch data
        (pack.c_launch_data) is made when `fn_address`, the raw function handle, is given; for
        a variant with global scratch, `scratch_use` is its scratch.ScratchUse in the hit's
        context (Launcher._fill appends it to the tuple)."""
        c_data = None
        if fn_address is not None:
            c_data = pack.c_launch_data(self.variant.launch_params, fn_address, self.block_x, shared,
                                        self.scratch, scratch_use)
        return (self.pool, self.new_slot, self.packer.pack_into, self.fast_conv, fn, self.block_x,
                shared, self.meta, c_data)
