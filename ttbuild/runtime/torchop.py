"""A prebuilt kernel as a torch custom op (`torch.library.custom_op`), so `torch.compile` calls it without a graph break; torch is imported only when an op is made.

The op's schema comes from the kernel's runtime parameters (the first variant's): pointers are
`Tensor`, integer scalars `int`, float scalars `float`, i1 `bool`; it returns nothing and
mutates the tensors named in `mutates_args` (the kernel's outputs), which torch.compile then
orders like any in-place op. A fake (meta) implementation that does nothing is registered, so
tracing needs no GPU work. Source: torch docs, "Custom Python operators" (torch.library.custom_op,
register_fake), PyTorch 2.4+.
"""

from __future__ import annotations

import keyword

from ..errors import TTBuildError

_INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


class TorchOpError(TTBuildError, ValueError):
    """A kernel that cannot be described as a torch op: bad name, unknown mutated argument."""


def _annotation(param) -> str:
    if param.kind == "pointer":
        return "torch.Tensor"
    if param.dtype == "i1":
        return "bool"
    return "int" if param.dtype in _INTS else "float"


def torch_op(launcher, name: str, grid, *, mutates_args, constexprs: dict | None = None, **options):
    """Wrap `launcher` (`lib.<kernel>`) as the torch custom op `name` ("namespace::op").

    grid: a tuple or a callable of Triton's `meta` dict, as for `launcher[grid]`.
    mutates_args: names of the pointer parameters the kernel writes.
    constexprs / options (num_warps=...): fixed keyword arguments of every launch.
    Returns the op (a torch CustomOpDef): `op(x, y, out, n)` launches on torch's current stream.
    Raises TorchOpError for a name without "::" or an unknown / non-tensor mutated argument.
    """
    import torch

    if "::" not in name:
        raise TorchOpError(f"op name {name!r} must look like 'namespace::name'")
    params = launcher.variants[0].launch_params
    names = [p.name for p in params]
    by_name = {p.name: p for p in params}
    mutates = tuple(mutates_args)
    for m in mutates:
        if m not in by_name or by_name[m].kind != "pointer":
            raise TorchOpError(f"{launcher.kernel}: mutates_args names {m!r}, which is not a pointer "
                               f"parameter; pointers: {', '.join(p.name for p in params if p.kind == 'pointer')}")
    bad = [n for n in names if keyword.iskeyword(n) or n.startswith("_ttb")]
    if bad:
        raise TorchOpError(f"{launcher.kernel}: parameter names {bad} cannot name op arguments")
    fixed = dict(constexprs or {}, **options)
    bound = launcher[grid]

    # The schema is read from the annotations of a real function, so build one per kernel.
    args = ", ".join(f"{p.name}: {_annotation(p)}" for p in params)
    call = ", ".join(names)
    src = (f"def _ttb_impl({args}) -> None:\n"
           f"    _ttb_launch({call}, **_ttb_fixed)\n"
           f"def _ttb_fake({args}) -> None:\n"
           f"    return None\n")
    scope = {"torch": torch, "_ttb_launch": bound, "_ttb_fixed": fixed}
    exec(compile(src, f"<ttbuild torch op {name}>", "exec"), scope)
    impl = scope["_ttb_impl"]
    impl.__name__ = impl.__qualname__ = name.split("::", 1)[1]
    op = torch.library.custom_op(name, mutates_args=mutates)(impl)
    op.register_fake(scope["_ttb_fake"])
    return op
