"""The module executor's reading of values beyond plain Python data: Triton's Autotuner and Config, enum classes, device facts and per-GPU lists, torch's finfo; standard library only.

A mixin of ttbuild.pyeval.modules._Executor (before ttbuild.pyeval.evaluator.Evaluator in its
bases): each method handles its values and leaves the rest to the next class.
"""

from __future__ import annotations

import ast

from . import autotuner, device, enums, torchfacts
from .objects import Constexpr, DeviceProperties, External, GPUTarget, Kernel, NeedsValue, Opaque, Signature
from .values import PythonError, Scope, short

_NOT = object()  # "not a value this mixin reads"
_TYPE_INFO = ("bits", "min", "max", "eps", "tiny", "resolution", "smallest_normal")


class Extensions:
    """Attributes, subscripts, calls and comprehensions of the values in the module docstring."""

    def value_attribute(self, value, attr: str, node: ast.Attribute):
        """`value.attr` for the values of this mixin; _NOT for any other value."""
        if isinstance(value, Constexpr) and attr == "value":
            return value.value
        if isinstance(value, (torchfacts.FloatInfo, torchfacts.IntInfo)) and attr in _TYPE_INFO:
            return getattr(value, attr)
        if isinstance(value, autotuner.ConfigValue) and attr in value.args:
            return value.field(attr)
        if isinstance(value, Kernel) and attr == "arg_names":
            return value.arg_names
        if isinstance(value, (GPUTarget, Signature)) and attr in ("backend", "arch", "warp_size", "parameters"):
            return getattr(value, attr)
        if isinstance(value, DeviceProperties):
            return device.attribute(value, attr, node, self.cannot)
        if isinstance(value, enums.EnumClass):
            found = value.attribute(attr)
            if found is None:
                raise PythonError(f"type object `{value.name}` has no attribute `{attr}`", self.src.loc(node),
                                  "AttributeError")
            return found
        if isinstance(value, enums.Member) and attr in ("name", "value"):
            return getattr(value, attr)
        if isinstance(value, Opaque):
            return Opaque(f"{value.what}.{attr}")
        return _NOT

    def _Subscript(self, node, scope):
        """`os.environ[NAME]` (recorded), `EnumClass[name]`, a per-GPU list's entry; else the base evaluator's."""
        value = self.eval(node.value, scope)
        if isinstance(value, External) and value.path == "os.environ":
            return self.apply(External("os.environ.__getitem__"), [self.eval(node.slice, scope)], node)
        if isinstance(value, enums.EnumClass):
            key = self.eval(node.slice, scope)
            if not isinstance(key, str) or key not in value.members:
                raise PythonError(f"`{short(node)}` fails: KeyError: {key!r}", self.src.loc(node), "KeyError")
            return value.members[key]
        if isinstance(value, device.Uniform):
            index = self.eval(node.slice, scope)
            if index in (0, -1) and type(index) is int:
                return value.value
            raise NeedsValue(f"whether the machine has a GPU of index {index!r}")
        return super()._Subscript(node, scope)

    def value_call(self, callee, values: list, kwargs: dict, node: ast.AST):
        """A call of the values of this mixin; _NOT for any other callee."""
        if isinstance(callee, (autotuner.ClassValue, autotuner.AutotuneFactory)) or (
                isinstance(callee, External) and callee.path in autotuner.AUTOTUNER):
            return autotuner.construct(self, callee, values, kwargs, node)
        if isinstance(callee, External) and callee.path in autotuner.CONFIG:
            try:
                return autotuner.ConfigValue(autotuner.bind(autotuner.CONFIG_PARAMS, values, kwargs, "triton.Config"),
                                             self.src.loc(node))
            except autotuner.SignatureError as e:
                raise self.src.error(node, str(e)) from None
        if isinstance(callee, enums.BoundMethod):
            first = [callee.first] if callee.first is not None else []
            return self.apply(callee.fn, first + list(values), node, kwargs)
        if isinstance(callee, enums.EnumClass) and len(values) == 1 and not kwargs:
            member = callee.by_value(values[0])
            if member is None:
                raise PythonError(f"{values[0]!r} is not a valid {callee.name}", self.src.loc(node), "ValueError")
            return member
        if isinstance(callee, External) and callee.path in ("torch.finfo", "torch.iinfo") and len(values) == 1 \
                and isinstance(values[0], External) and torchfacts.type_info(callee.path, values[0].path) is not None:
            return torchfacts.type_info(callee.path, values[0].path)
        return _NOT

    def builtin(self, node: ast.Call, scope):
        """`range(torch.cuda.device_count())`: one index per GPU (device.DeviceRange); else the base evaluator's."""
        if node.func.id == "range" and _counts_devices(node):
            if isinstance(self.eval(node.args[0], scope), device.DeviceCount):
                return device.DeviceRange()
        return super().builtin(node, scope)

    def _ListComp(self, node, scope):
        """`[f(i) for i in range(torch.cuda.device_count())]`: f of one GPU, the same for each (device.Uniform)."""
        (gen, *more) = node.generators
        if not more and not gen.ifs and isinstance(gen.target, ast.Name) and _counts_devices(gen.iter) \
                and isinstance(self.eval(gen.iter, scope), device.DeviceRange):
            inner = Scope(scope)
            inner.vars[gen.target.id] = device.DEVICE_INDEX
            return device.Uniform(self.eval(node.elt, inner))
        return super()._ListComp(node, scope)


def _counts_devices(node: ast.AST) -> bool:
    """Whether `node` is written `range(<...>.device_count())` (then evaluating it twice costs nothing)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Attribute) and node.args[0].func.attr == "device_count"
            and not node.args[0].args and not node.args[0].keywords)
