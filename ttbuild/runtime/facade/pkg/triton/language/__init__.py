"""Façade `triton.language`: dtypes and constexpr are real objects (annotations and module-level constants use them); any other name is a placeholder, as kernel bodies never run here."""

from ttbuild.language import dtype as _KernelDtype


class dtype(_KernelDtype):
    """A Triton dtype by Triton's name (`tl.float16.name == "fp16"`, `str(tl.int32) == "int32"`, as
    triton.language.core.dtype): a served variant built for a dtype constexpr matches it by name.
    ttbuild.language's dtype (equality and hash by name) with Triton's `str`."""

    def __str__(self):
        return self.name


class constexpr:
    """`x: tl.constexpr` annotations and `X = tl.constexpr(4)` module constants."""

    def __init__(self, value=None):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __index__(self):
        return self.value

    def __bool__(self):
        return bool(self.value)

    def __eq__(self, other):
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __hash__(self):
        return hash(self.value)


_DTYPES = {"int1": "int1", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
           "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
           "float8e4nv": "fp8e4nv", "float8e5": "fp8e5"}
for _py, _name in _DTYPES.items():
    globals()[_py] = dtype(_name)
globals()["void"] = dtype("void")


class _Placeholder:
    """Stands for a device-side name (tl.load, tl.math.exp, ...): usable at import time, never called."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name} runs only inside a kernel (ttbuild's triton façade compiles nothing)")

    def __repr__(self):
        return f"<ttbuild façade {self._name}>"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Placeholder(f"triton.language.{name}")
