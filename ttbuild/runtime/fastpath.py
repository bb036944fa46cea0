"""Generated per-kernel launch functions: the hot path of `lib.kernel[grid](*tensors, *scalars)` as straight-line Python, one dict lookup from arguments to a packed launch.

Measured before choosing (benchmarks/profile_launch.py, a no-op driver on the CPU): the generic
launcher spent 4.9 us per call in Python, nearly all of it in its own bytecode (binding,
per-argument classification into tuples, context lookup, grid checks), against 0.84 us for the
cuda.bindings cuLaunchKernel wrapper itself. The generated function keeps only what the
arguments can change from call to call:

- the type of every pointer argument (exactly torch.Tensor: anything else takes the generic path),
- each tensor's device (all must be torch's current device, else the generic path decides: error
  or a launch on the device that holds them),
- each tensor's dtype object and whether its address is a multiple of 16,
- for an integer parameter that is i32/i64 (or float) in every variant: the value's 2**31
  block and residue mod 16; for a float parameter: that it is a float; otherwise the generic
  key item of `ttbuild.runtime.args.classify`,

and looks the tuple of those up in a dict filled by the generic path (variant selection, function
handle for the device's context, packer, parameter buffer). A hit packs the parameters with one
`struct.pack_into` into a parameter buffer taken from the variant's pool and calls
cuLaunchKernel directly; everything fixed
per grid (the normalized grid) or per variant (block, shared memory, buffer address) is bound
when `kernel[grid]` is first seen or at the first launch of the variant.

A kernel some variant of which takes global scratch (ttbuild.runtime.scratch) gets the source
with `scratch`: its hits carry a tenth item, the variant's ScratchUse or None, and a variant with
one packs the address of the launch stream's buffer after its parameters. Other kernels get the
source as it was before global scratch.
"""

from __future__ import annotations

INT_FAST = frozenset({"i32", "i64", "u64", "fp16", "bf16", "fp32", "fp64"})  # u64: TMA tensormap addresses
FLOAT_FAST = frozenset({"fp16", "bf16", "fp32", "fp64"})
ARG = "_ttb_a"  # generated parameter names: a kernel parameter spelled like this disables the path


class _NoTensorYet:
    """Stands for torch.Tensor until the generic path has seen one (torch is never imported here)."""


class _Missing:
    def __repr__(self):
        return "<missing argument>"


def position_kinds(variants) -> tuple[str, ...] | None:
    """Per runtime parameter: "ptr", "int" (an int fits the fast i32 test in every variant),
    "float" (float in every variant) or "any"; None when variants disagree on which parameters
    are pointers (then every launch takes the generic path)."""
    first = variants[0].launch_params
    if any(p.name.startswith(ARG) or p.name == "stream" for v in variants for p in v.params):
        return None
    kinds = []
    for i, p in enumerate(first):
        ps = [v.launch_params[i] for v in variants if len(v.launch_params) == len(first)]
        if len(ps) != len(variants):
            return None
        is_ptr = {q.kind == "pointer" for q in ps}
        if len(is_ptr) != 1:
            return None
        if p.kind == "pointer":
            kinds.append("ptr")
        elif all(q.dtype in FLOAT_FAST for q in ps):
            kinds.append("float")
        elif all(q.dtype in INT_FAST for q in ps):
            kinds.append("int")
        else:
            kinds.append("any")
    return tuple(kinds)


def c_kinds(kinds: tuple[str, ...]) -> bytes:
    """position_kinds as the C launch path's letters (claunch.c): p pointer, i int, f float, a any."""
    return bytes(ord({"ptr": "p", "int": "i", "float": "f", "any": "a"}[k]) for k in kinds)


def source(kinds: tuple[str, ...], raw_launch: bool, names: tuple[str, ...] = (), dynamic: bool = False,
           scratch: bool = False) -> str:
    """Python source of `make(grid, g0, g1, g2) -> launch(*args, stream=None, **kw)` for one
    kernel whose runtime parameters are `kinds` (see position_kinds); `dynamic`: `make(grid)`
    for a callable grid, called with the runtime arguments by `names` plus the variant's
    constexprs and options (Triton's `meta`) once the variant is known.

    Key items: a pointer gives its dtype object and address % 16; an "int" parameter (int in
    the guard) gives `v >> 31` and `v % 16`: every variant's verdict on an i32/i64/float
    parameter is constant over such a class (i32 range = classes 0 and -1; i64 bounds are
    multiples of 2**31); a "float" parameter (float in the guard) gives nothing; any other
    gives its generic key item.

    `scratch`: hits are 10-tuples whose last item is None or `use(stream, programs) ->
    address` of the variant's global scratch, packed after the parameters (and passed as the
    last of the values to `driver_launch`).
    """
    n = len(kinds)
    a = [f"{ARG}{i}" for i in range(n)]
    ptrs = [i for i, k in enumerate(kinds) if k == "ptr"]
    vals = [f"p{i}" if k == "ptr" else a[i] for i, k in enumerate(kinds)]
    guard, key = _guard_and_key(kinds, a)
    vt = "(" + ", ".join(vals) + ("," if n == 1 else "") + ")"
    call, after = _call_lines(raw_launch, scratch, vt)
    unpack, take, packing = _packing_lines(scratch, dynamic, vals, vt)
    grid_lines = _grid_lines(names, a) if dynamic else []
    body = [
        "def make(grid):" if dynamic else "def make(grid, g0, g1, g2):",
        f"    def launch({', '.join(f'{x}=MISSING' for x in a)}, *rest, stream=None, **kw):",
        f"        if rest or kw or {a[-1]} is MISSING:",
        f"            return slow(grid, tuple(x for x in ({', '.join(a)},) if x is not MISSING) + rest, kw, stream)",
        f"        if {' and '.join(guard)}:",
        "            dev = getdev()",
        f"            if {' and '.join(f'{a[i]}.get_device() == dev' for i in ptrs)}:",
        *[f"                p{i} = {a[i]}.data_ptr()" for i in ptrs],
        f"                key = ({', '.join(key)})",
        "                hit = D.get(key)",
        "                if hit is None:",
        f"                    hit = fill(key, ({', '.join(a)},), dev)",
        unpack,
        *[f"                {c}" for c in grid_lines],
        "                if stream is None:",
        "                    stream = rawstream(dev)",
        "                elif type(stream) is not int:",
        "                    stream = norm_stream(stream)",
        *[f"                {c}" for c in take],
        "                try:",
        "                    slot = pool.pop()",
        "                except IndexError:",
        "                    slot = grow()",
        *[f"                {c}" for c in packing],
        *[f"                {c}" for c in call],
        "                pool.append(slot)",
        *[f"                {c}" for c in after],
        "                return None",
        f"        return slow(grid, ({', '.join(a)},), kw, stream)",
        "    return launch",
    ]
    return "\n".join(body) + "\n"


def _guard_and_key(kinds, a) -> tuple[list[str], list[str]]:
    """source's type guard (pointers exactly TT or TP: torch.Tensor or nn.Parameter, which a
    layer's weights are; "int" ints, "float" floats) and its fast key
    expressions (per pointer: dtype, address % 16; per "int": v >> 31, v % 16; per "any": the
    generic key item), the device last."""
    guard = [f"(type({a[i]}) is TT or type({a[i]}) is TP)" for i, k in enumerate(kinds) if k == "ptr"]
    guard += [f"type({a[i]}) is int" for i, k in enumerate(kinds) if k == "int"]
    guard += [f"type({a[i]}) is float" for i, k in enumerate(kinds) if k == "float"]
    key = []
    for i, k in enumerate(kinds):
        if k == "ptr":
            key += [f"{a[i]}.dtype", f"p{i} & 15"]
        elif k == "int":
            key += [f"{a[i]} >> 31", f"{a[i]} & 15"]
        elif k == "any":
            key.append(f"tok({a[i]}, {i})")
    key.append("dev")
    return guard, key


def _call_lines(raw_launch: bool, scratch: bool, vt: str) -> tuple[list[str], list[str]]:
    """(the launch call, the lines after it): cuLaunchKernel directly (`L`, its CUresult
    checked) when the driver offers it raw, else the driver's launch (with the scratch address
    after the values when the variant has one)."""
    if raw_launch:
        return (["r = L(fn, g0, g1, g2, bx, 1, 1, sh, stream, slot[1], 0)"],
                ["if r[0]:  # a CUresult is an int enum: CUDA_SUCCESS is 0",
                 "    fail(r, hit, g0, g1, g2)"])
    if scratch:
        return [f"driver_launch(fn, (g0, g1, g2), bx, sh, stream, slot[1], {vt} if sa is None else {vt} + (sa,))"], []
    return [f"driver_launch(fn, (g0, g1, g2), bx, sh, stream, slot[1], {vt})"], []


def _packing_lines(scratch: bool, dynamic: bool, vals: list[str], vt: str) -> tuple[str, list[str], list[str]]:
    """(how a hit unpacks, the scratch address taken before the buffer, the packing of the
    parameters, converted where `conv` says, the scratch address after them)."""
    if scratch:  # the scratch address is taken before the parameter buffer (it may raise)
        unpack = ("                pool, grow, pack, conv, fn, bx, sh = hit[:7]\n"
                  "                scr = hit[9]") if dynamic else \
            "                pool, grow, pack, conv, fn, bx, sh, _, _, scr = hit"
        take = ["sa = None if scr is None else scr(stream, g0 * g1 * g2)"]
        packing = ["if sa is None:",
                   "    if conv is None:",
                   f"        pack(slot[0], 0, {', '.join(vals)})",
                   "    else:",
                   f"        pack(slot[0], 0, *conv({vt}))",
                   "elif conv is None:",
                   f"    pack(slot[0], 0, {', '.join(vals)}, sa)",
                   "else:",
                   f"    pack(slot[0], 0, *conv({vt}), sa)"]
        return unpack, take, packing
    unpack = "                pool, grow, pack, conv, fn, bx, sh = hit[:7]" if dynamic else \
        "                pool, grow, pack, conv, fn, bx, sh, _, _ = hit"
    packing = ["if conv is None:",
               f"    pack(slot[0], 0, {', '.join(vals)})",
               "else:",
               f"    pack(slot[0], 0, *conv({vt}))"]
    return unpack, [], packing


def _grid_lines(names, a) -> list[str]:
    """A callable grid's lines: called with Triton's `meta` (the arguments by name, the variant's
    constexprs and options), its result normalized; an empty grid launches nothing."""
    meta = "{" + ", ".join(f"{nm!r}: {x}" for nm, x in zip(names, a)) + "}"
    return [
        f"meta = {meta}",
        "meta.update(hit[7])",
        "gg = grid(meta)",
        "if type(gg) is tuple and len(gg) == 1 and type(gg[0]) is int and gg[0] > 0:",
        "    g0, g1, g2 = gg[0], 1, 1",
        "else:",
        "    g0, g1, g2 = grid3(gg)",
        "    if not (g0 and g1 and g2):",
        "        return None  # an empty grid launches nothing, as in Triton",
    ]


def compile_maker(kinds: tuple[str, ...], namespace: dict, raw_launch: bool, names=(), dynamic=False,
                  scratch=False):
    """exec the generated source in `namespace` (the launcher's mutable globals: TT, TP, getdev,
    rawstream, D, fill, slow, tok, grid3, ...) and return its `make`; `scratch`: see source."""
    if not kinds or "ptr" not in kinds:
        return None
    namespace.setdefault("MISSING", _Missing())
    text = source(kinds, raw_launch, names, dynamic, scratch)
    code = compile(text, f"<ttbuild launch {len(kinds)} args{' dynamic grid' if dynamic else ''}>", "exec")
    scope: dict = {}
    exec(code, namespace, scope)
    return scope["make"]


def choice_source(forms) -> str:
    """Python source of `make(grid, calls, miss, slow) -> launch(*args, **kw)`: the call forms
    of a kernel whose launch function depends on some arguments' values (constexprs passed
    positionally, as Triton's call passes a specialised `stride = 1`; autotune key arguments;
    heuristics' inputs) and tensors' dtypes (ttbuild.runtime.tuned, Launcher's Triton call).

    `forms`: (number of positional args, runtime positions, value positions, dtype positions)
    per accepted form. A call with that many positional args and no keywords builds the tuple
    of those values and dtype objects, looks it up in `calls` (filled by `miss(grid, args,
    key)`, which returns the launch function taking the runtime arguments) and calls it with
    the runtime arguments; anything else, or an argument without `.dtype` or an unhashable
    value, goes to `slow(grid, args, kw)`.
    """
    lines = ["def make(grid, calls, miss, slow):", "    def launch(*args, **kw):", "        n = len(args)"]
    for i, (count, rt_pos, value_pos, dtype_pos) in enumerate(forms):
        # the form's number keeps two forms' keys apart (only needed when there are two)
        items = [str(i)] * (len(forms) > 1) + [f"args[{p}]" for p in value_pos] + [f"args[{p}].dtype" for p in dtype_pos]
        lines += [f"        {'if' if i == 0 else 'elif'} n == {count} and not kw:",
                  "            try:",
                  f"                key = ({', '.join(items)},)" if items else "                key = ()",
                  "                fn = calls.get(key)",
                  "            except (AttributeError, TypeError):  # no dtype, an unhashable value",
                  "                return slow(grid, args, kw)",
                  "            if fn is None:",
                  "                fn = miss(grid, args, key)",
                  f"            return fn({', '.join(f'args[{p}]' for p in rt_pos)})"]
    lines += ["        return slow(grid, args, kw)", "    return launch"]
    return "\n".join(lines) + "\n"


def compile_choice(forms):
    """exec choice_source(forms) and return its `make`."""
    scope: dict = {}
    exec(compile(choice_source(forms), f"<ttbuild call forms {[f[0] for f in forms]}>", "exec"), {}, scope)
    return scope["make"]
