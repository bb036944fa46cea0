"""`lib.<kernel>[grid](*args, **constexprs)`: binds arguments, picks the variant (cached per argument signature), packs parameters, launches.

Per launch the host path is: classify each argument (one dict lookup per type), one dict lookup
for the selected variant, one lookup for the function handle of the current context, one
`struct.pack_into` into a buffer that a pre-built void*[] points at, and the driver call.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import sys
import threading

from ..errors import TTBuildError
from .args import _dtype_cache, _extractors, classify, torch_types
from .driver import default_driver
from .metadata import MetadataError, Variant
from .select import LAUNCH_OPTIONS, select

# struct codes per dtype; each parameter gets its own 8-byte slot (natural alignment for all of
# them), so the void*[] entries are base + 8*i.
_PACK = {
    "i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
    "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "fp16": "e", "fp32": "f", "fp64": "d", "bf16": "H",
}
_SLOT = 8


def _bf16_bits(x: float) -> int:
    """Round-to-nearest-even fp32 -> bf16 bit pattern (what torch's .to(bfloat16) does)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    if (u & 0x7F800000) == 0x7F800000 and u & 0x7FFFFF:  # NaN: keep it quiet
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


class LaunchError(TTBuildError, TypeError):
    """A launch the runtime refuses before reaching the driver: bad grid, missing argument."""


class _Compiled:
    """One variant's launch state: packing format, parameter buffer, function per CUDA context."""

    def __init__(self, variant: Variant):
        self.variant = variant
        params = variant.launch_params
        fmt = "<"
        for p in params:
            code = "Q" if p.kind == "pointer" else _PACK.get(p.dtype)
            if code is None:
                raise MetadataError(f"{variant.json_path}: cannot pass {p.dtype} parameter {p.name}")
            fmt += code + "x" * (_SLOT - struct.calcsize("<" + code))
        self.packer = struct.Struct(fmt)
        n = max(len(params), 1)
        self.buffer = ctypes.create_string_buffer(_SLOT * n)
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * n)(*[base + _SLOT * i for i in range(n)])
        self.params_address = ctypes.addressof(self.pointers)
        self.block_x = 32 * variant.num_warps
        self.shared = variant.shared
        self.convert = tuple(
            (lambda v: _bf16_bits(float(v))) if p.kind == "scalar" and p.dtype == "bf16"
            else float if p.kind == "scalar" and p.dtype in ("fp16", "fp32", "fp64")
            else None
            for p in params)
        self.needs_convert = any(c is not None for c in self.convert)
        self.functions: dict = {}
        self.lock = threading.Lock()
        # What a grid callable sees besides the arguments (Triton passes constexprs and options).
        self.meta = dict(variant.constexprs, num_warps=variant.num_warps,
                         num_stages=variant.num_stages, num_ctas=variant.num_ctas)
        self._image = None

    def function(self, driver, ctx_key):
        fn = self.functions.get(ctx_key)
        if fn is None:
            with self.lock:
                fn = self.functions.get(ctx_key)
                if fn is None:
                    if self._image is None:
                        with open(self.variant.cubin_path, "rb") as f:
                            self._image = f.read()
                    fn = driver.load_function(self._image, self.variant.entry, self.shared)
                    self.functions[ctx_key] = fn
        return fn

def _torch_get_device() -> int:
    torch = sys.modules["torch"]
    get = getattr(torch._C, "_cuda_getDevice", None)
    return get() if get is not None else torch.cuda.current_device()


def _torch_raw_stream(device: int) -> int:
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def _grid3(grid) -> tuple[int, int, int]:
    if isinstance(grid, int):
        grid = (grid,)
    try:
        n = len(grid)
    except TypeError:
        raise LaunchError(f"grid must be a tuple of 1-3 ints (or a callable returning one), "
                          f"got {grid!r}") from None
    if not 1 <= n <= 3:
        raise LaunchError(f"grid must have 1 to 3 dimensions, got {grid!r}")
    out = []
    for g in grid:
        try:
            g = g.__index__()
        except AttributeError:
            raise LaunchError(f"grid dimensions must be ints, got {grid!r}") from None
        if g < 0:
            raise LaunchError(f"grid dimensions must be >= 0, got {grid!r}")
        out.append(g)
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]


class Launcher:
    """All variants of one kernel. `launcher[grid]` returns a callable that launches.

    Call arguments: the kernel's parameters positionally or by name (pointers: tensors with
    data_ptr() or __cuda_array_interface__; scalars: int, float, bool); constexprs by name
    (must equal the variant's; omitted means any); num_warps/num_stages/num_ctas select among
    variants; stream= a raw CUstream handle (default: torch's current stream when a torch tensor
    is passed, else the legacy default stream 0).
    """

    def __init__(self, kernel: str, variants: list[Variant], driver=None):
        if not variants:
            raise MetadataError(f"kernel {kernel}: no variants")
        self.kernel = kernel
        self.variants = list(variants)
        first = self.variants[0]
        for v in self.variants[1:]:
            if [(p.name, p.kind == "constexpr") for p in v.params] != \
                    [(p.name, p.kind == "constexpr") for p in first.params]:
                raise MetadataError(f"{v.json_path}: parameters differ from {first.json_path} "
                                    f"for the same kernel {kernel}")
        self.param_names = tuple(p.name for p in first.params)
        self.runtime_names = tuple(p.name for p in first.launch_params)
        self.constexpr_names = frozenset(p.name for p in first.params if p.kind == "constexpr")
        # Fast positional path: runtime params come first, constexprs after them.
        self._runtime_first = self.param_names[:len(self.runtime_names)] == self.runtime_names
        self._n_runtime = len(self.runtime_names)
        self._driver = driver
        self._compiled = {v.variant: _Compiled(v) for v in self.variants}
        self._dispatch: dict = {}

    @property
    def driver(self):
        if self._driver is None:
            self._driver = default_driver()
        return self._driver

    def __getitem__(self, grid):
        return functools.partial(self._launch, grid)

    def __repr__(self):
        return f"<ttbuild kernel {self.kernel}: {', '.join(v.variant for v in self.variants)}>"

    def _bind(self, args, kwargs):
        """(runtime values in order, constexpr kwargs, launch-option kwargs)."""
        if len(args) > len(self.param_names):
            raise LaunchError(f"{self.kernel} takes {len(self.param_names)} arguments "
                              f"({', '.join(self.param_names)}), got {len(args)} positional")
        named = dict(zip(self.param_names, args))
        for k, v in kwargs.items():
            if k in named:
                raise LaunchError(f"{self.kernel}: argument {k!r} given twice")
            named[k] = v
        options = {k: named.pop(k) for k in LAUNCH_OPTIONS if k in named}
        unknown = [k for k in named if k not in self.param_names]
        if unknown:
            raise LaunchError(f"{self.kernel}: unknown argument(s) {', '.join(unknown)}; "
                              f"parameters are {', '.join(self.param_names)}")
        missing = [k for k in self.runtime_names if k not in named]
        if missing:
            raise LaunchError(f"{self.kernel}: missing argument(s) {', '.join(missing)}")
        constexprs = {k: v for k, v in named.items() if k in self.constexpr_names}
        return tuple(named[k] for k in self.runtime_names), constexprs, options

    def run(self, *args, grid, **kwargs):
        """Launch on `grid`; see the class docstring for the arguments. Returns None."""
        return self._launch(grid, *args, **kwargs)

    def _launch(self, grid, *args, **kwargs):
        # The hot path: locals only, no helper frames unless something is new or unusual.
        stream = None
        if kwargs:
            stream = kwargs.pop("stream", None)
            if stream is not None and not isinstance(stream, int):
                stream = getattr(stream, "cuda_stream", stream)  # torch.cuda.Stream
        if not kwargs and len(args) == self._n_runtime and self._runtime_first:
            values, constexprs, options = args, None, None
        else:
            values, constexprs, options = self._bind(args, kwargs)
        keys = []
        packed = []
        torch_arg = False
        ext = _extractors
        dtypes = _dtype_cache
        for v in values:
            tp = type(v)
            if tp in torch_types and v.dtype in dtypes:  # inlined args._torch_like
                p = v.data_ptr()
                k = ("ptr", dtypes[v.dtype], p & 15 == 0)
                torch_arg = True
            else:
                f = ext.get(tp)
                if f is None:
                    k, p = classify(v, self.runtime_names[len(keys)])
                else:
                    k, p = f(v)
                if tp in torch_types:
                    torch_arg = True
            keys.append(k)
            packed.append(p)
        driver = self._driver or self.driver
        device = None
        if torch_arg:
            device = _torch_get_device()
            if stream is None:
                stream = _torch_raw_stream(device)
        ctx, capability = driver.context(device)
        keys.append(ctx)
        if constexprs or options:
            keys.append((tuple(constexprs.items()), tuple(options.items())))
        dkey = tuple(keys)
        comp = self._dispatch.get(dkey)
        if comp is None:
            variant = select(self.variants, dkey[:self._n_runtime], constexprs or {},
                             options or {}, capability, kernel=self.kernel,
                             names=self.runtime_names, values=packed)
            comp = self._dispatch[dkey] = self._compiled[variant.variant]
        if callable(grid):
            meta = dict(zip(self.runtime_names, values))
            meta.update(comp.meta)
            grid = grid(meta)
        if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int and grid[0] > 0:
            g = (grid[0], 1, 1)
        else:
            g = _grid3(grid)
            if g[0] == 0 or g[1] == 0 or g[2] == 0:
                return None  # an empty grid launches nothing, as in Triton
        fn = comp.functions.get(ctx)
        if fn is None:
            fn = comp.function(driver, ctx)
        if comp.needs_convert:
            packed = [v if c is None else c(v) for c, v in zip(comp.convert, packed)]
        with comp.lock:  # the buffer is shared; cuLaunchKernel copies it before returning
            comp.packer.pack_into(comp.buffer, 0, *packed)
            driver.launch(fn, g, comp.block_x, comp.shared, stream or 0, comp.params_address,
                          packed)
        return None

    def select(self, *args, **kwargs) -> Variant:
        """The variant a launch with these arguments would use (no driver call but `context`)."""
        values, constexprs, options = self._bind(args, kwargs)
        keys = tuple(classify(v, n)[0] for n, v in zip(self.runtime_names, values))
        _, capability = self.driver.context(None)
        return select(self.variants, keys, constexprs, options, capability, kernel=self.kernel,
                      names=self.runtime_names,
                      values=[classify(v, n)[1] for n, v in zip(self.runtime_names, values)])
