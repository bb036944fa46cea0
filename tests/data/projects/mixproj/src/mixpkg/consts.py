"""Mode constants shared by the kernels: constexpr globals and a plain int."""
import triton.language as tl

MODE_SUM = tl.constexpr(0)
MODE_MEAN = tl.constexpr(1)
PLAIN_LIMIT = 7
