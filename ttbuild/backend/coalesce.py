"""Layout assignment for the ttgir stage: one `#ttg.blocked` encoding per tensor shape, chosen so
every thread's global accesses are contiguous 16-byte chunks where the axis analysis proves it.

Triton's intent (lib/Dialect/TritonGPU/Transforms/Coalesce.cpp): for each load/store, the number
of elements a thread may own along the fastest dimension is min(16 bytes / element size,
contiguity, alignment in elements), capped by shape / threads so no thread idles; the widest over
the memory ops of a shape wins. Elementwise kernels have one shape, so this needs no
convert_layout; tensors of a shape with no memory op get Triton's default (1 element per thread).
"""

from __future__ import annotations

from math import prod

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.axis import AxisAnalysis
from ttbuild.backend.layout import Blocked, default_blocked

MEMORY_OPS = ("tt.load", "tt.store")


def vector_elems(ptr_value, axis: AxisAnalysis, order0: int) -> int:
    """Elements per 16-byte-or-smaller access that the pointer tensor's axis info allows."""
    elem = mu.pointee(mu.elem_str(ptr_value.type))
    ebytes = mu.elem_bits(elem) // 8
    info = axis.info(ptr_value)
    align_elems = max(1, info.divisibility[order0] // ebytes)
    return max(1, min(16 // ebytes, info.contiguity[order0], align_elems))


def assign(module, num_warps: int, threads_per_warp: int = 32) -> dict[tuple[int, ...], Blocked]:
    """Set every tensor result type of every tt.func to carry its shape's blocked encoding.

    Returns shape -> layout (for tests). Raises nothing on unknown ops: they keep their shapes.
    """
    layouts: dict[tuple[int, ...], Blocked] = {}
    for func in module.body.operations:
        if func.operation.name != "tt.func":
            continue
        axis = AxisAnalysis(func)
        body = func.regions[0].blocks[0]
        want: dict[tuple[int, ...], int] = {}
        tensors = []
        for op in body.operations:
            for r in op.results:
                shape = mu.shape_of(r.type)
                if shape:
                    tensors.append(r)
                    want.setdefault(shape, 1)
            if op.operation.name in MEMORY_OPS:
                ptr = op.operands[0]
                shape = mu.shape_of(ptr.type)
                if not shape:
                    continue
                order0 = len(shape) - 1
                vec = vector_elems(ptr, axis, order0)
                threads = threads_per_warp * num_warps
                cap = max(1, prod(shape) // threads)
                want[shape] = max(want.get(shape, 1), min(vec, cap, shape[order0]))
        for shape, spt in want.items():
            layouts[shape] = default_blocked(shape, num_warps, spt, threads_per_warp)
        enc = {s: mu.ir.Attribute.parse(l.attr()) for s, l in layouts.items()}
        for r in tensors:
            t = mu.ir.RankedTensorType(r.type)
            new = mu.ir.RankedTensorType.get(t.shape, t.element_type, enc[tuple(t.shape)])
            r.set_type(new)
            owner = r.owner
            if owner.name == "arith.constant":
                # The dense value's type must equal the result type, encoding included.
                old = owner.attributes["value"]
                if isinstance(old, mu.ir.DenseElementsAttr) and old.is_splat:
                    owner.attributes["value"] = mu.ir.DenseElementsAttr.get_splat(new, old.get_splat_value())
                else:
                    text = str(old)
                    owner.attributes["value"] = mu.ir.Attribute.parse(text[: text.rindex(":")] + ": " + str(new))
    return layouts
