"""`tl.math`: elementwise math stubs for kernel files; the compiler lowers them, Python calls raise."""

from __future__ import annotations

MATH_NAMES = (
    "exp", "exp2", "log", "log2", "log1p", "sqrt", "sqrt_rn", "rsqrt", "abs", "sin", "cos", "tan",
    "tanh", "erf", "floor", "ceil", "fma", "div_rn", "fdiv", "pow", "max", "min", "umulhi",
)


def _stub(name: str):
    def fn(*args, **kwargs):
        raise RuntimeError(f"tl.math.{name} can only be called inside a @jit kernel")
    fn.__name__ = fn.__qualname__ = name
    return fn


for _name in MATH_NAMES:
    globals()[_name] = _stub(_name)
del _name
