"""`lib.<kernel>[grid](*args, **constexprs)`: binds arguments, picks the variant (cached per argument signature), packs parameters, launches.

Three paths. The fast one takes positional torch tensors and Python scalars on torch's current
device: one lookup from (dtypes, alignment bits, scalar classes, device) to a packed launch. It
is C (claunch.c, through ttbuild.runtime.cext) for a fixed grid where a C compiler is present,
else generated Python (ttbuild.runtime.fastpath); the C one hands whatever it does not take to
the generated one. The generic one here takes everything else: arguments by name, constexprs,
launch options, DLPack and __cuda_array_interface__ objects (with their streams), tensors on
another device; it also fills the fast paths' shared dict.

A variant with global scratch (metadata "global_scratch", ttbuild.runtime.scratch) gets one more
parameter after its own on every path: the address of its launch stream's scratch buffer, grown
to size x programs; kernels without it launch as they did before it existed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys
import threading

from ..errors import TTBuildError
from . import cext, fastpath, scratch
from .args import classify, read_args, resolve_dlpack
from .driver import CudaError, default_driver
from .interop import same_stream
from .metadata import MetadataError, Variant, best_image
from .select import LAUNCH_OPTIONS, same_constexpr, select

# Bounds on the per-launcher caches (grid -> bound launch function, fast key -> launch state):
# a program that launches with ever-new grids or alignments must not grow without limit.
MAX_CACHED = 4096

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


def _converter(convert: tuple):
    """`vals -> [converted vals]` applying `convert[i]` where it is not None, or None when no
    parameter needs one."""
    if all(c is None for c in convert):
        return None
    return lambda vals: [v if c is None else c(v) for c, v in zip(convert, vals)]


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
        # global scratch: (bytes per program, alignment); its address is the last parameter
        self.scratch = variant.global_scratch
        if self.scratch is not None:
            fmt += "Q"
        self.packer = struct.Struct(fmt)
        self.n_slots = max(len(params) + (self.scratch is not None), 1)
        # Parameter buffers, taken and given back per launch: list.pop/append are atomic, so
        # threads never share one (cuLaunchKernel reads it with the GIL released), at a third
        # of a lock's cost. A launch that finds the pool empty (another thread holds the only
        # buffer, or a launch raised) makes a new one.
        self.pool = [self.new_slot()]
        self.block_x = 32 * variant.num_warps
        self.shared = variant.shared
        self.convert = tuple(
            (lambda v: _bf16_bits(float(v))) if p.kind == "scalar" and p.dtype == "bf16"
            else float if p.kind == "scalar" and p.dtype in ("fp16", "fp32", "fp64")
            else None
            for p in params)
        self.conv = _converter(self.convert)
        self.needs_convert = self.conv is not None
        # The generated fast path lets only Python ints and floats reach a float parameter
        # (fastpath.position_kinds), which struct packs as fp16/fp32/fp64 itself: it converts
        # bf16 parameters only (a float scalar cost 0.9 us per launch through `conv`).
        self.fast_conv = _converter(tuple(c if p.kind == "scalar" and p.dtype == "bf16" else None
                                          for c, p in zip(self.convert, params)))
        self.functions: dict = {}
        self.lock = threading.Lock()
        # What a grid callable sees besides the arguments (Triton passes constexprs and options).
        self.meta = dict(variant.constexprs, num_warps=variant.num_warps,
                         num_stages=variant.num_stages, num_ctas=variant.num_ctas)
        self._images: dict = {}
        self.shared_of: dict = {}

    def function(self, driver, ctx_key, capability=None):
        """The kernel's function handle in context `ctx_key` (compute `capability`), loading the
        best image there on first use: exact SASS, else PTX that the driver JIT-compiles. Checks
        the driver version against the variant's minimum first (when the driver can say it)."""
        fn = self.functions.get(ctx_key)
        if fn is None:
            with self.lock:
                fn = self.functions.get(ctx_key)
                if fn is None:
                    image = self._image_for(capability)
                    self._check_driver(driver, image)
                    data = self._read(image)
                    fn = driver.load_function(data, self.variant.entry, image.shared)
                    self.shared_of[ctx_key] = image.shared
                    self.functions[ctx_key] = fn
        return fn

    def _image_for(self, capability):
        v = self.variant
        if capability is None:
            return next((i for i in v.images if i.path == v.cubin_path), v.images[0])
        image = best_image(v.images, capability)
        if image is None:  # selection rejects such variants first; a forced one still says why
            raise LaunchError(f"{v.variant}: holds {v.holds()}; nothing runs on compute capability "
                              f"{capability[0]}.{capability[1]}")
        return image

    def _check_driver(self, driver, image):
        version_of = getattr(driver, "driver_version", None)
        if version_of is None:
            return
        have = version_of()
        if have < self.variant.min_cuda_driver:
            from ..target import cuda_version_text

            raise CudaError("loading " + image.describe(), "CUDA_ERROR_INSUFFICIENT_DRIVER",
                            f"{self.variant.variant} needs a driver for {self.variant.driver_text()} "
                            f"or newer; this driver supports CUDA {cuda_version_text(have)}: update "
                            "the NVIDIA driver")

    def _read(self, image) -> bytes:
        """The image's bytes, checked against the sha256 its metadata recorded: a cubin from
        another build (a kill between the two writes, a copy over a library) is refused with
        the file's name instead of launching a kernel the metadata does not describe.
        Raises MetadataError on a mismatch."""
        data = self._images.get(image.path)
        if data is None:
            import hashlib  # stdlib: the runtime installs without the compiler's xxhash

            from .metadata import MetadataError

            # Always checked (issue 32 item 3): metadata without a digest would hand whatever the
            # file holds to the driver, and a link could name any file of the machine.
            if not (isinstance(image.sha256, str) and len(image.sha256) == 64):
                raise MetadataError(f"{self.variant.json_path} records no sha256 for {os.path.basename(image.path)} "
                                    "(cubin_sha256): refused; rebuild the library")
            lib = os.path.realpath(os.path.dirname(self.variant.json_path))
            real = os.path.realpath(image.path)
            if os.path.dirname(real) != lib:
                raise MetadataError(f"{image.path} is a link to {real}, outside the library {lib}: refused")
            with open(real, "rb") as f:
                data = f.read()
            got = hashlib.sha256(data).hexdigest()
            if got != image.sha256:
                raise MetadataError(f"{image.path} is not the file {self.variant.json_path} describes "
                                    f"(sha256 {got[:16]}..., metadata {image.sha256[:16]}...): rebuild the library")
            if image.kind == "ptx" and not data.endswith(b"\0"):
                data += b"\0"  # cuModuleLoadData reads PTX as a NUL-terminated string
            self._images[image.path] = data
        return data

    def new_slot(self) -> tuple:
        """(buffer of 8-byte parameter slots, address of the void*[] pointing at them, that
        array): what cuLaunchKernel's kernelParams wants."""
        n = self.n_slots
        buffer = ctypes.create_string_buffer(_SLOT * n)
        base = ctypes.addressof(buffer)
        pointers = (ctypes.c_void_p * n)(*[base + _SLOT * i for i in range(n)])
        return buffer, ctypes.addressof(pointers), pointers

    def take_slot(self) -> tuple:
        try:
            return self.pool.pop()
        except IndexError:
            return self.new_slot()

    def fast_state(self, fn, shared, fn_address=None, scratch_use=None) -> tuple:
        """What the generated launch unpacks: (pool, new_slot, pack_into, conv, fn, block_x,
        shared, meta for a callable grid, C launch data or None). The C launch data (read by
        claunch.c) is bytes "<QIII" (raw function handle `fn_address`, block x, shared bytes,
        parameter count) and one code per parameter: 'p' pointer, the struct code of a scalar,
        'z' for bf16; for a variant with global scratch, `scratch_use` (its
        scratch.ScratchUse in the hit's context) follows "<QQQ": bytes per program, alignment
        and the address of the GlobalScratch's epoch (Launcher._fill appends the ScratchUse to the
        tuple)."""
        c_data = None
        if fn_address is not None:
            codes = "".join("p" if p.kind == "pointer" else "z" if p.dtype == "bf16" else _PACK[p.dtype]
                            for p in self.variant.launch_params)
            c_data = struct.pack("<QIII", fn_address, self.block_x, shared, len(codes)) + codes.encode()
            if scratch_use is not None:
                c_data += struct.pack("<QQQ", *self.scratch, scratch_use.scratch.epoch_address)
        return (self.pool, self.new_slot, self.packer.pack_into, self.fast_conv, fn, self.block_x,
                shared, self.meta, c_data)


def _torch_get_device() -> int:
    torch = sys.modules["torch"]
    get = getattr(torch._C, "_cuda_getDevice", None)
    return get() if get is not None else torch.cuda.current_device()


def _stream_handle(stream) -> int:
    """A launch stream as an int handle: an int, a torch.cuda.Stream (.cuda_stream), a
    cuda.core / CUDA-Python stream (__cuda_stream__() -> (version, handle)), a CUstream."""
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return int(handle)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise LaunchError(f"stream= must be a CUstream handle (int), a torch.cuda.Stream or an object "
                          f"with __cuda_stream__, got {stream!r}") from None


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


def _c_launch_capable(driver) -> bool:
    """Whether `driver` offers what the C launch path needs (see ttbuild.runtime.driver.Driver)."""
    return all(hasattr(driver, name) for name in ("c_launch_address", "function_address", "check_code"))


class Launcher:
    """All variants of one kernel. `launcher[grid]` returns a callable that launches.

    Call arguments: the kernel's parameters positionally or by name (pointers: tensors with
    data_ptr(), __cuda_array_interface__ or __dlpack__; scalars: int, float, bool); constexprs
    by name (must equal the variant's; omitted means any); num_warps/num_stages/num_ctas select
    among variants; stream= a CUstream handle or a stream object (default: torch's current
    stream on the tensors' device when a torch tensor is passed, else the legacy default
    stream 0). The launch runs on the device that holds the tensors (InteropError when they are
    on different devices or in host memory); a CAI array's producer stream is waited on.
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
        self._name_set = frozenset(self.param_names)
        # Fast positional path: runtime params come first, constexprs after them.
        self._runtime_first = self.param_names[:len(self.runtime_names)] == self.runtime_names
        self._n_runtime = len(self.runtime_names)
        self._driver = driver
        self._compiled = {v.variant: _Compiled(v) for v in self.variants}
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

    # ------------------------------------------------------------ the generated path

    def _bind_grid(self, grid):
        """The launch function for a fixed grid: generated (fastpath) when the kernel allows,
        else the generic path; an empty grid launches nothing but still checks arguments."""
        g = _grid3(grid)
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
        if self._kinds is None:
            return None
        if self._ns is None:
            self._ns = self._namespace()
        if not dynamic and self._c_launch is None and _c_launch_capable(self.driver):
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
            return classify(value, runtime_names[i])[0]

        def fail(result, hit, g0, g1, g2):
            driver.check("cuLaunchKernel", result, f"grid={(g0, g1, g2)}, block=({hit[5]},1,1), "
                                                   f"shared={hit[6]}")

        def fail_code(err, hit, g0, g1, g2):
            driver.check_code("cuLaunchKernel", err, f"grid={(g0, g1, g2)}, block=({hit[5]},1,1), "
                                                     f"shared={hit[6]}")

        if self._runtime_first:
            def slow(grid, args, kw, stream):
                return self._launch(grid, *args, stream=stream, **kw)
        else:  # only runtime_call reaches the generated path: its arguments are the runtime ones
            def slow(grid, args, kw, stream):
                return self._launch_values(grid, args, kw, stream)

        return {
            "TT": fastpath._NoTensorYet, "getdev": None, "rawstream": None, "D": {},
            "fill": self._fill, "slow": slow, "tok": tok, "FT": "float", "fail": fail,
            "norm_stream": _stream_handle, "L": raw, "OK": getattr(driver, "cu_success", 0),
            "driver_launch": driver.launch, "grid3": _grid3, "fail_code": fail_code,
        }

    def _enable_torch(self, tp):
        """Let the generated path take `tp` (torch.Tensor) now that torch is known to be loaded."""
        ns = self._ns
        if ns is None or ns["TT"] is tp or tp.__name__ != "Tensor" or not hasattr(tp, "get_device"):
            return
        C = getattr(sys.modules.get("torch"), "_C", None)
        getdev = getattr(C, "_cuda_getDevice", None)
        rawstream = getattr(C, "_cuda_getCurrentRawStream", None)
        if getdev is not None and rawstream is not None:
            ns.update(TT=tp, getdev=getdev, rawstream=rawstream)

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

    def _scratch_use(self, comp: _Compiled, ctx) -> scratch.ScratchUse:
        """`use(stream, programs) -> address` of `comp`'s global scratch in context `ctx`."""
        if self._scratch is None:
            self._scratch = scratch.global_scratch(self.driver)
        size, align = comp.scratch
        return scratch.ScratchUse(self._scratch, ctx, size, align, f"{self.kernel} ({comp.variant.variant})")

    # ------------------------------------------------------------ the generic path

    def _bind(self, args, kwargs):
        """(runtime values in order, constexpr kwargs, launch-option kwargs)."""
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
        """Launch on `grid`; see the class docstring for the arguments. Returns None."""
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
        read = read_args(values, self.runtime_names, self.kernel)
        device = read.device
        if read.torch_type is not None:
            self._enable_torch(read.torch_type)
            current = _torch_get_device()
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
        if stream is None:
            stream = _torch_raw_stream(device) if read.torch_type is not None else 0
        elif type(stream) is not int:
            stream = _stream_handle(stream)
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
            g = _grid3(grid)
            if g[0] == 0 or g[1] == 0 or g[2] == 0:
                return None  # an empty grid launches nothing, as in Triton
        fn = comp.functions.get(ctx)
        if fn is None:
            fn = comp.function(driver, ctx, capability)
        for name, s in read.producers:
            if same_stream(s, stream):
                continue
            wait = getattr(driver, "stream_wait", None)
            if wait is None:
                raise LaunchError(f"{self.kernel}: argument {name!r} asks for a wait on stream {s:#x} "
                                  f"(__cuda_array_interface__ v3) and this driver cannot wait on streams")
            wait(stream, s)
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

    def _select_compiled(self, keys, constexprs, options, capability, packed, ctx) -> _Compiled:
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
        """The variant a launch with these arguments would use (no driver call but `context`)."""
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
