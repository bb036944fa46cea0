"""NVPTX code generation: `llvm` (llvmlite target machine, O3 pipeline, PTX emission) and `ptxas` (PTX -> cubin).

Importing this package is cheap: llvmlite is imported by `nvptx.llvm`, never here. Tool
paths and versions live in `ttbuild.toolchain`.
"""

# LLVM target triple of every module this backend emits (Triton's NVPTX triple).
TRIPLE = "nvptx64-nvidia-cuda"
