"""The attribute names of `triton` and `triton.language` in Triton 3.6 (dir() of each), for `hasattr` probes at module level."""

from __future__ import annotations

TRITON_ATTRIBUTES = {
    "triton": frozenset({
        'AsyncCompileMode', 'CompilationError', 'Config', 'FutureKernel', 'InterpreterError', 'JITFunction',
        'KernelInterface', 'MockTensor', 'OutOfResources', 'TensorWrapper', 'TritonError', '_C', '_utils',
        'autotune', 'backends', 'cdiv', 'compile', 'compiler', 'constexpr_function', 'errors', 'heuristics',
        'jit', 'knobs', 'language', 'must_use_result', 'next_power_of_2', 'reinterpret', 'runtime',
        'set_allocator', 'testing', 'tools',
    }),
    "triton.language": frozenset({
        'PropagateNan', 'TRITON_MAX_TENSOR_NUMEL', 'abs', 'add', 'advance', 'arange', 'argmax', 'argmin',
        'associative_scan', 'assume', 'atomic_add', 'atomic_and', 'atomic_cas', 'atomic_max', 'atomic_min',
        'atomic_or', 'atomic_xchg', 'atomic_xor', 'bfloat16', 'bitonic_merge', 'block_type', 'broadcast',
        'broadcast_to', 'cast', 'cat', 'cdiv', 'ceil', 'clamp', 'condition', 'const', 'constexpr',
        'constexpr_type', 'core', 'cos', 'cumprod', 'cumsum', 'debug_barrier', 'device_assert',
        'device_print', 'div_rn', 'dot', 'dot_scaled', 'dtype', 'erf', 'exp', 'exp2', 'expand_dims', 'extra',
        'fdiv', 'flip', 'float16', 'float32', 'float64', 'float8e4b15', 'float8e4b8', 'float8e4nv',
        'float8e5', 'float8e5b16', 'floor', 'fma', 'full', 'gather', 'histogram', 'inline_asm_elementwise',
        'int1', 'int16', 'int32', 'int64', 'int8', 'interleave', 'join', 'load', 'load_tensor_descriptor',
        'log', 'log2', 'make_block_ptr', 'make_tensor_descriptor', 'map_elementwise', 'math', 'max',
        'max_constancy', 'max_contiguous', 'maximum', 'min', 'minimum', 'mul', 'multiple_of', 'num_programs',
        'pair_uniform_to_normal', 'permute', 'philox', 'philox_impl', 'pi32_t', 'pointer_type', 'program_id',
        'rand', 'rand4x', 'randint', 'randint4x', 'randn', 'randn4x', 'random', 'range', 'ravel', 'reduce',
        'reduce_or', 'reshape', 'rsqrt', 'sigmoid', 'sin', 'slice', 'softmax', 'sort', 'split', 'sqrt',
        'sqrt_rn', 'standard', 'static_assert', 'static_print', 'static_range', 'store',
        'store_tensor_descriptor', 'str_to_ty', 'sub', 'sum', 'swizzle2d', 'target_info', 'tensor',
        'tensor_descriptor', 'tensor_descriptor_type', 'topk', 'trans', 'tuple', 'tuple_type', 'uint16',
        'uint32', 'uint64', 'uint8', 'uint_to_uniform_float', 'umulhi', 'view', 'void', 'where', 'xor_sum',
        'zeros', 'zeros_like',
    }),
}
