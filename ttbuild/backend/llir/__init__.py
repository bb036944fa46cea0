"""TTGIR -> LLVM IR: per-thread code from blocked layouts, one lowering rule per op name (see rules)."""
