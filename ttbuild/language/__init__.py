"""The `tl` namespace for kernel files (`import ttbuild.language as tl`): constexpr, dtypes, and stubs that raise outside a kernel.

Kernel sources import this module at top level, so it must import with nothing but the standard
library. The compiler never calls these stubs: it reads the kernel's AST and lowers each `tl.*`
call through `ttbuild.frontend.builtin_table`. The names and parameters mirror `triton.language`
(Triton 3.6) so the same kernel source builds with either import.
"""

from __future__ import annotations

from . import math  # noqa: F401  (tl.math.exp, ...)


class constexpr:
    """A compile-time constant: as an annotation (`BLOCK: tl.constexpr`) marks a parameter whose
    value is fixed per variant; as a call (`X = tl.constexpr(4)`) marks a module-level constant."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"


class dtype:
    """A scalar element type, named as Triton names it (`fp32`, `int32`, `uint8`, `bf16`, ...)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"triton.language.{self.name}"

    def __eq__(self, other):
        return isinstance(other, dtype) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class pointer_type(dtype):
    """A pointer to `element_ty` in global memory."""

    def __init__(self, element_ty: dtype, address_space: int = 1):
        super().__init__(f"pointer<{element_ty.name}>")
        self.element_ty = element_ty
        self.address_space = address_space


int1 = dtype("int1")
int8, int16, int32, int64 = (dtype(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (dtype(f"uint{b}") for b in (8, 16, 32, 64))
float16, bfloat16, float32, float64 = dtype("fp16"), dtype("bf16"), dtype("fp32"), dtype("fp64")
float8e4nv, float8e5 = dtype("fp8e4nv"), dtype("fp8e5")
void = dtype("void")
bool_ = int1  # not `bool`: shadowing the builtin inside this module would bite the stubs
globals()["bool"] = int1  # but kernels spell it tl.bool, as in Triton

TRITON_MAX_TENSOR_NUMEL = 1048576  # Triton 3.6 triton._utils: the most elements one block may hold
PropagateNan = type("PropagateNan", (), {"NONE": 0, "ALL": 0xFFFF})


def _stub(name: str):
    def fn(*args, **kwargs):
        raise RuntimeError(
            f"tl.{name} can only be called inside a @jit kernel, which ttbuild compiles "
            f"ahead of time; it has no Python implementation")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"`tl.{name}` inside a @jit kernel (see triton.language.{name}); raises outside one."
    return fn


# Every tl function the compiler knows by name, whether or not it lowers it yet: a kernel file
# that uses any of them imports cleanly, and the compiler reports unsupported ones by location.
BUILTIN_NAMES = (
    "program_id", "num_programs", "arange", "load", "store", "zeros", "zeros_like", "full",
    "where", "maximum", "minimum", "cdiv", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs",
    "sin", "cos", "sigmoid", "softmax", "fma", "clamp", "cast", "broadcast", "broadcast_to",
    "expand_dims", "reshape", "view", "trans", "permute", "sum", "max", "min", "argmax", "argmin",
    "reduce", "xor_sum", "dot", "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_and",
    "atomic_or", "atomic_xor",
    "atomic_xchg", "range", "static_range", "static_assert", "static_print", "device_assert",
    "device_print", "multiple_of", "max_contiguous", "max_constancy", "debug_barrier",
    "umulhi", "floor", "ceil", "div_rn", "fdiv", "sqrt_rn", "erf", "cumsum", "cumprod", "join", "split", "interleave", "ravel",
    "make_block_ptr", "advance", "assume", "associative_scan", "histogram",
    "rand", "randn", "randint", "randint4x", "rand4x", "randn4x", "inline_asm_elementwise",
    "make_tensor_descriptor", "load_tensor_descriptor", "store_tensor_descriptor", "dot_scaled",
    "sort", "topk", "bitonic_merge", "flip", "reduce_or", "cat", "add", "sub", "mul", "swizzle2d",
    "philox", "philox_impl", "uint_to_uniform_float", "pair_uniform_to_normal",
)
for _name in BUILTIN_NAMES:
    if _name not in globals():
        globals()[_name] = _stub(_name)
del _name
