"""Re-exports triton and its language, as some libraries do from one utility module."""
import triton
import triton.language as tl

__all__ = ["triton", "tl"]
