"""Variant selection: which compiled variant accepts these argument keys, constexprs, launch options and device.

Rules (docs/CONTRACTS.md "Metadata"; Triton's specialization semantics):
- pointer: the tensor's dtype must equal the param's pointee dtype (unknown dtype: accepted);
  divisibility 16 needs address % 16 == 0.
- scalar: bool -> i1 (or any integer param); int -> an integer param whose range holds it
  (i32 preferred as Triton does; a float param accepts an int only when nothing matches exactly);
  float -> fp16/bf16/fp32/fp64; integer divisibility 16 needs value % 16 == 0.
- constexprs and num_warps/num_stages/num_ctas given as keywords must equal the variant's.
- device: cubin for "cuda:90a"-style arch (sm_XXa) runs only on that exact compute capability,
  plain sm_XX on the same major with minor >= XX (CUDA binary compatibility rules); a
  multi-target variant's PTX runs on any newer capability (JIT), after its exact cubins.
"""

from __future__ import annotations

from ..cxvalue import matches
from ..errors import TTBuildError
from .args import describe
from .metadata import Variant, best_image

INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
FLOATS = ("fp16", "bf16", "fp32", "fp64")
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


class NoMatchingVariant(TTBuildError, TypeError, LookupError):
    """No compiled variant accepts the call; the message lists each variant and why it was rejected."""


def _int_fits(dtype: str, neg: bool, bits: int) -> bool:
    width = INT_BITS[dtype]
    if dtype[0] == "u":
        return not neg and bits <= width
    return bits <= width - 1


def check_arg(param, key: tuple) -> tuple[bool, bool, str]:
    """(accepted, exact, reason-if-rejected) for one runtime argument against one param."""
    kind = key[0]
    if param.kind == "pointer":
        if kind != "ptr":
            return False, False, f"expects a pointer to {param.dtype}"
        if key[1] is not None and key[1] != param.dtype:
            return False, False, f"expects *{param.dtype}, got a {key[1]} tensor"
        if param.divisibility == 16 and not key[2]:
            return False, False, f"expects *{param.dtype}:16 (address a multiple of 16)"
        return True, key[1] is not None, ""
    dt = param.dtype
    if kind == "ptr":
        return False, False, f"expects a scalar {dt}, got a pointer"
    if kind == "float":
        if dt in FLOATS:
            return True, dt == "fp32", ""
        return False, False, f"expects {dt}, got a float"
    if kind == "bool":
        if dt == "i1":
            return True, True, ""
        if dt in INT_BITS:
            return True, False, ""
        return False, False, f"expects {dt}, got a bool"
    # int
    _, neg, bits, div16 = key
    if dt in INT_BITS:
        if not _int_fits(dt, neg, bits):
            return False, False, f"expects {dt}, value out of range"
        if param.divisibility == 16 and not div16:
            return False, False, f"expects {dt}:16 (a multiple of 16)"
        return True, dt == "i32" or (dt == "i64" and bits > 31), ""
    if dt in FLOATS:
        return True, False, ""
    if dt == "i1":
        return (bits <= 1 and not neg), False, "expects i1, got an int other than 0/1"
    return False, False, f"expects {dt}"


def arch_ok(variant: Variant, capability: tuple[int, int] | None) -> str:
    """'' if one of the variant's images runs on this compute capability (best_image: exact
    SASS, else PTX to JIT) and, for a variant built for a GPU model, the device's SM count is the
    model's (a driver's Capability carries it; Variant.model_ok), else the reason naming what the
    variant holds."""
    if capability is None or best_image(variant.images, capability) is not None:
        return variant.model_ok(getattr(capability, "sm_count", None))
    if len(variant.images) == 1 and variant.images[0].kind == "cubin":
        img = variant.images[0]
        return (f"compiled for {img.target} ({img.arch}), device is "
                f"compute capability {capability[0]}.{capability[1]}")
    return (f"holds {variant.holds()}; nothing runs on compute capability "
            f"{capability[0]}.{capability[1]}")


def same_constexpr(have, value) -> bool:
    """Whether a variant's constexpr `have` accepts the passed `value` (equal; a bool constexpr
    takes only a bool, as Triton keys a bool apart from an int; None only None; a dtype built as
    {"dtype": name} a tl.dtype of that name, Triton's or the façade's: ttbuild.cxvalue.matches)."""
    if type(have) is type(value) and type(have) in (int, str, float):  # the common case, kept cheap
        return have == value
    return matches(have, value)


def check_variant(variant: Variant, keys: tuple, constexprs: dict, options: dict,
                  capability) -> tuple[bool, bool, list[str]]:
    """(accepted, exact, reasons) for one variant; `keys` are the runtime args' key items in order."""
    reasons = []
    exact = True
    for param, key in zip(variant.launch_params, keys):
        ok, ex, why = check_arg(param, key)
        if not ok:
            reasons.append(f"{param.name}: {why}")
        exact = exact and ex
    for name, value in constexprs.items():
        have = variant.constexprs.get(name)
        if name not in variant.constexprs:
            reasons.append(f"{name}: not a constexpr of this variant")
        elif not same_constexpr(have, value):
            reasons.append(f"{name}={value!r} passed, variant has {name}={have!r}")
    for name, value in options.items():
        if getattr(variant, name) != value:
            reasons.append(f"{name}={value!r} asked, variant has {name}={getattr(variant, name)!r}")
    why_arch = arch_ok(variant, capability)
    if why_arch:
        reasons.append(why_arch)
    return not reasons, exact, reasons


def _sibling(a: Variant, b: Variant) -> bool:
    """Same constexprs, launch options and dtypes: the two differ at most in divisibility."""
    return (a.constexprs == b.constexprs and all(getattr(a, o) == getattr(b, o) for o in LAUNCH_OPTIONS)
            and [(p.kind, p.dtype) for p in a.launch_params] == [(p.kind, p.dtype) for p in b.launch_params])


def most_specialized(first: Variant, accepting: list) -> Variant:
    """Among the accepting siblings of `first` (_sibling), the one with the most `:16`
    promises (first in library order on a tie): a recorded row beats its generic fallback
    whenever the arguments meet its assumptions, whatever their file order."""
    best, best_n = first, sum(p.divisibility == 16 for p in first.launch_params)
    for v in accepting:
        if v is not first and _sibling(v, first):
            n = sum(p.divisibility == 16 for p in v.launch_params)
            if n > best_n:
                best, best_n = v, n
    return best


def select(variants, keys: tuple, constexprs: dict, options: dict, capability, *,
           kernel: str, names=(), values=()) -> Variant:
    """The first exactly-matching variant in library order, else the first accepting one; then
    its most specialized accepting sibling (most_specialized).

    Raises NoMatchingVariant listing every variant with its reasons; `names`/`values` (the
    runtime args) only feed that message.
    """
    fallback = None
    report = []
    accepted = []
    for v in variants:
        ok, exact, reasons = check_variant(v, keys, constexprs, options, capability)
        if ok:
            accepted.append((v, exact))
        report.append((v, reasons))
    for v, exact in accepted:
        if exact:
            return most_specialized(v, [a for a, ex in accepted if ex])
    if accepted:
        fallback = accepted[0][0]
        return most_specialized(fallback, [a for a, _ in accepted])
    call = ", ".join(f"{n}={describe(k, x)}" for n, k, x in zip(names, keys, values))
    extra = ", ".join(f"{k}={v!r}" for k, v in {**constexprs, **options}.items())
    lines = [f"no compiled variant of {kernel} accepts this call:",
             f"  called with: {call}" + (f"; {extra}" if extra else "")]
    if capability is not None:
        lines[-1] += f"; device compute capability {capability[0]}.{capability[1]}"
    lines.append(f"available variants ({len(report)}):")
    for v, reasons in report:
        lines.append(f"  {v.describe()}")
        lines.extend(f"    - rejected: {r}" for r in reasons)
    raise NoMatchingVariant("\n".join(lines))
