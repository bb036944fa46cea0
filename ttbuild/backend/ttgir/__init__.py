"""TTGIR transforms of the ttgir stage, and passes, their driver.

In the order passes.PASSES runs them: transpose_loads, coalesce (layout assignment),
accelerate_matmul (tensor-core layouts), remove_layout_conversions, pipeline (software
pipelining, a package), tma_lowering.
"""
