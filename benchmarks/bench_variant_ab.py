"""One variant from two libraries (two builds of it: before and after a compiler change), launched alike through ttbuild.runtime on the same arguments: the GPU time of each and A's time / B's.

Each side is timed by `bench_served.device_ms` (torch.profiler's CUDA activity, L2 flushed before
every call as `triton.testing.do_bench` flushes it; the kernel's own duration, in µs here), in
rounds that alternate A and B so that clock and thermal drift fall on both. A side's figure is
the median of its round medians; `x A` = A's µs / B's µs, so above 1 means B is faster. Passing
the same library twice measures the noise of the method (a control).

This is how a served kernel's gap against Triton was taken apart in sessions 23 and 24 (the row
address on the uniform datapath; occupancy): the whole-benchmark ratio says that a kernel is slower,
this says which build of it is, with nothing else in the timed work.

LIB_B may instead be `triton:SOURCE` (a .py file, or a dotted module on PYTHONPATH): side B is then
Triton's JIT of that source's kernel, launched with the variant's constexprs, num_warps and
num_stages on the same arguments (compiled before timing; needs Triton). That compares one
served kernel with Triton's build of it, with nothing else in the timed work.

Arguments of the kernel (`--arg NAME=SPEC`, one per runtime parameter, by the Python name):
  dtype[d0,d1,...][:fill]  a new CUDA tensor (fill: randn, the default for floats; rand; zeros, the
                           default for integers; ones), e.g. `x=bf16[8192,4096]`, `o=bf16[8192,4096]:rand`
  an int / a float / true / false / None
A tensor-descriptor parameter takes a tensor (`desc_q=fp16[524288,128]`), which the runtime makes
a descriptor of the variant's block shape (not against `triton:`, whose JIT wants Triton's own).
Constexprs are the variant's own (omitted). The variant must have the same parameters in both
libraries.

Usage: python benchmarks/bench_variant_ab.py LIB_A (LIB_B | triton:SOURCE) VARIANT --grid X[,Y[,Z]] --arg NAME=SPEC ...
       [--rounds 6] [--calls 20] [--json OUT]
LIB_A / LIB_B: an artifacts directory or its lib/ folder. Needs a CUDA GPU, torch and ttbuild's
runtime (not Triton). Errors (a missing argument, an unknown dtype, a variant absent from a
library) exit with status 2 and one line naming the argument.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from ttbuild.cxvalue import to_live
from ttbuild.runtime.retune import TORCH_DTYPES

FILLS = ("randn", "rand", "zeros", "ones")
_TENSOR = re.compile(r"^(\w+)\[([\d,\s]*)\](?::(\w+))?$")


class SpecError(ValueError):
    """A `--arg` the benchmark cannot read, or a runtime parameter without one."""


def parse_spec(text: str):
    """One `--arg` value: ("tensor", dtype, shape, fill) or ("value", python value).
    Raises SpecError for an unknown dtype or fill and for text that is none of the forms."""
    text = text.strip()
    m = _TENSOR.match(text)
    if m:
        dtype, dims, fill = m.group(1), m.group(2), m.group(3)
        if dtype not in TORCH_DTYPES:
            raise SpecError(f"unknown dtype {dtype!r} (one of {', '.join(TORCH_DTYPES)})")
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
        if fill is None:
            fill = "randn" if dtype.startswith(("fp", "bf")) else "zeros"
        if fill not in FILLS:
            raise SpecError(f"unknown fill {fill!r} (one of {', '.join(FILLS)})")
        return ("tensor", dtype, shape, fill)
    low = text.lower()
    if low in ("true", "false"):
        return ("value", low == "true")
    if low == "none":
        return ("value", None)
    for cast in (int, float):
        try:
            return ("value", cast(text))
        except ValueError:
            pass
    raise SpecError(f"cannot read {text!r}: give dtype[shape][:fill], a number, true, false or None")


def parse_args_list(items: list[str]) -> dict:
    """`NAME=SPEC` strings -> {name: parsed spec}. Raises SpecError (naming the item) for a
    missing `=` or a name given twice."""
    out = {}
    for item in items:
        name, eq, spec = item.partition("=")
        if not eq or not name.strip():
            raise SpecError(f"--arg {item!r}: expected NAME=SPEC")
        name = name.strip()
        if name in out:
            raise SpecError(f"--arg {name}: given twice")
        try:
            out[name] = parse_spec(spec)
        except SpecError as exc:
            raise SpecError(f"--arg {name}: {exc}") from None
    return out


def runtime_names(variant, descriptors: bool = True) -> list[str]:
    """The Python names of a variant's runtime parameters, in order (what `--arg` must give). A
    tensor descriptor's parameters (its map, base, shape and strides) are one name, the Python
    parameter's: a tensor given for it is made a descriptor of the variant's block shape by the
    runtime. Raises SpecError for one when `descriptors` is false (a Triton side, whose JIT
    takes a TensorDescriptor this benchmark does not build)."""
    parts = sorted({p.origin for p in variant.params if p.part is not None})
    if parts and not descriptors:
        raise SpecError(f"{variant.variant}: tensor-descriptor parameters ({', '.join(parts)}) are not supported "
                        "against triton:")
    names = [p.origin if p.part is not None else p.name for p in variant.params if p.kind != "constexpr"]
    return list(dict.fromkeys(names))


def check_specs(names: list[str], specs: dict) -> None:
    """Raises SpecError naming the runtime parameters without an `--arg` and the `--arg`s that
    name no parameter."""
    missing = [n for n in names if n not in specs]
    extra = [n for n in specs if n not in names]
    if missing or extra:
        parts = []
        if missing:
            parts.append("no --arg for " + ", ".join(missing))
        if extra:
            parts.append("no parameter named " + ", ".join(extra))
        raise SpecError("; ".join(parts) + f" (runtime parameters: {', '.join(names)})")


def make_value(spec, torch):
    """The call argument of one parsed spec (a new CUDA tensor, or the value)."""
    if spec[0] == "value":
        return spec[1]
    _, dtype, shape, fill = spec
    tdtype = getattr(torch, TORCH_DTYPES[dtype])
    if fill in ("randn", "rand") and not (tdtype.is_floating_point and tdtype.itemsize >= 2):
        # randn has no integer or fp8 form: draw in fp32 and convert
        base = getattr(torch, fill)(shape, device="cuda")
        return base.to(tdtype)
    return getattr(torch, fill)(shape, device="cuda", dtype=tdtype)


def summarize(rounds: dict) -> dict:
    """{side: [round figures, µs]} -> {side: {"us": median, "low": min, "high": max}} and, when
    both "A" and "B" are there, "x_A": A's median / B's."""
    out = {side: {"us": statistics.median(v), "low": min(v), "high": max(v)} for side, v in rounds.items()}
    if "A" in out and "B" in out:
        out["x_A"] = out["A"]["us"] / out["B"]["us"]
    return out


TRITON = "triton:"


def triton_constexprs(variant) -> dict:
    """The keyword arguments that make Triton's JIT build `variant`: every constexpr of the row
    (integers specialized as == 1 included; a `{"dtype": "bf16"}` value as `tl.bfloat16`, through
    ttbuild.cxvalue.to_live once the source imported triton), and
    num_warps / num_stages, which Triton binds to a parameter of that name when there is one."""
    out = {p.name: to_live(p.value) for p in variant.params if p.kind == "constexpr"}
    for opt in ("num_warps", "num_stages"):
        out.setdefault(opt, getattr(variant, opt))
    return out


def triton_kernel(source: str, kernel: str):
    """Triton's JITFunction `kernel` of `source` (a .py file, run as a module, or a dotted module,
    imported), unwrapped from Autotuner / Heuristics (the row gives every config value).
    Raises SpecError when the source has no such kernel."""
    import importlib
    import importlib.util

    if source.endswith(".py"):
        spec = importlib.util.spec_from_file_location(f"ab_{os.path.basename(source)[:-3]}", source)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(source)
    fn = getattr(mod, kernel, None)
    while fn is not None and type(fn).__name__ != "JITFunction" and hasattr(fn, "fn"):
        fn = fn.fn
    if fn is None or type(fn).__name__ != "JITFunction":
        raise SpecError(f"{source} has no @triton.jit kernel {kernel!r}")
    return fn


def _parse_grid(text: str) -> tuple:
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        raise SpecError(f"--grid {text!r}: expected X[,Y[,Z]] integers") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise SpecError(f"--grid {text!r}: one to three positive integers")
    return dims


def _variant_launcher(path: str, name: str, runtime):
    """(launcher, Variant) of variant `name` in the library at `path`; SpecError when it has none."""
    try:
        k = runtime.load(path).variant(name)
    except KeyError as exc:  # its message lists every variant of the library: keep the first part
        raise SpecError(str(exc.args[0]).split("; variants:")[0]) from None
    return k, getattr(k, "inner", k).variants[0]


def _sides(a, grid, specs, runtime, torch) -> tuple:
    """(the kernel's name in the profile, {"A": call, "B": call}): each call launches the variant
    once on the same new arguments. Raises SpecError for a missing variant, kernel or argument."""
    ka, va = _variant_launcher(a.lib_a, a.variant, runtime)
    names = runtime_names(va, descriptors=not a.lib_b.startswith(TRITON))
    if a.lib_b.startswith(TRITON):
        fn = triton_kernel(a.lib_b[len(TRITON):], va.kernel)
        check_specs(names, specs)
        kwargs = {n: make_value(specs[n], torch) for n in names}
        extra = triton_constexprs(va)
        return va.entry, {"A": lambda: ka[grid](**kwargs), "B": lambda: fn[grid](**kwargs, **extra)}
    kb, vb = _variant_launcher(a.lib_b, a.variant, runtime)
    if runtime_names(vb) != names:
        raise SpecError(f"the variant's runtime parameters differ: {names} in A, {runtime_names(vb)} in B")
    check_specs(names, specs)
    kwargs = {n: make_value(specs[n], torch) for n in names}
    return va.entry, {"A": lambda: ka[grid](**kwargs), "B": lambda: kb[grid](**kwargs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lib_a")
    ap.add_argument("lib_b")
    ap.add_argument("variant")
    ap.add_argument("--grid", required=True)
    ap.add_argument("--arg", action="append", default=[], metavar="NAME=SPEC")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    try:
        grid = _parse_grid(a.grid)
        specs = parse_args_list(a.arg)
    except SpecError as exc:
        print(f"bench_variant_ab: error: {exc}", file=sys.stderr)
        return 2

    import torch
    from bench_served import device_ms

    from ttbuild import runtime

    try:
        entry, calls = _sides(a, grid, specs, runtime, torch)
    except SpecError as exc:
        print(f"bench_variant_ab: error: {exc}", file=sys.stderr)
        return 2
    rounds = {"A": [], "B": []}
    for r in range(a.rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            _, own = device_ms(calls[side], frozenset({entry}), n=a.calls)
            rounds[side].append(own[entry] * 1000)
    res = summarize(rounds)
    print(f"{a.variant} ({entry}), grid {grid}, {a.rounds} rounds of {a.calls} calls, "
          f"{torch.cuda.get_device_name()}")
    for side, path in (("A", a.lib_a), ("B", a.lib_b)):
        s = res[side]
        print(f"  {side} {s['us']:9.2f} us  ({s['low']:.2f}-{s['high']:.2f})  {path}")
    print(f"  x A = {res['x_A']:.3f}  (A us / B us: above 1, B is faster)")
    if a.lib_b.startswith(TRITON):
        print(f"  x Triton = {1 / res['x_A']:.3f}  (Triton us / A us, bench_served's ratio: above 1, A is faster)")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({"variant": a.variant, "grid": grid, "args": a.arg, "rounds": rounds,
                                "lib_a": a.lib_a, "lib_b": a.lib_b, **res}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
