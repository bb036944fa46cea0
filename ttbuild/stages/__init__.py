"""The six compiler stages, one module each, every one a pure `run(inputs, options) -> outputs`.

See docs/CONTRACTS.md for each stage's input and output roles and options. This package must
stay cheap to import: stage modules import MLIR and llvmlite inside `run`, never at the top.
"""

STAGES = ("parse", "ttir", "ttgir", "llir", "ptx", "cubin")
