"""The backend: TTIR -> TTGIR (layouts) -> LLVM IR -> PTX -> cubin; heavy imports live in submodules.

ir is the dialect model every other subpackage imports (analysis, ttgir, llir); nvptx drives
LLVM and ptxas.
"""
