"""The backend: TTIR -> TTGIR (layouts) -> LLVM IR -> PTX -> cubin; heavy imports live in submodules."""
