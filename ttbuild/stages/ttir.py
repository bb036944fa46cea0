"""ttir stage: canonical kernel JSON + signature + constexprs → TTIR (MLIR generic form, local scope, `loc("n<id>")` per op)."""

from __future__ import annotations

import json
from typing import Any, Mapping

VERSION = 12  # comparisons make a tensor of a Python number first; tl.core.get_int_dtype

def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """`inputs["json"]`: the parse stage's output; `options`: `signature` (list of str, one per
    non-constexpr parameter, e.g. `["*fp32:16", "i32"]`), `constexprs` (name → value; None for a
    None argument; a dtype as {"dtype": "fp16"}, ttbuild.cxvalue, or by its bare name `"fp16"`),
    `debug` (bool, absent = false: keep tl.device_assert as `tt.assert`, as Triton's debug=True),
    `tma` (bool, absent = false: the target loads descriptor parameters through TMA, ttbuild.tma;
    Triton's make_ttir rewrites descriptors to pointers only below sm_90). With debug, `inputs["loc"]` (the parse `loc` table,
    optional) puts file:line:col into every location: `loc("n17"("vector_add.py":12:5))`.
    Returns `{"ttir": bytes, "abi": bytes}`: `abi` is the parameter list the TTIR's kernel takes
    (ttbuild.frontend.abi: per parameter its pointer / scalar entries, a descriptor's expansion,
    or its constexpr value), which the metadata copies and the runtime packs from.

    Raises CompilationError carrying `node_id` (resolve it with `ttbuild.locs.locate`
    and the parse stage's `loc` output) for kernels Triton would reject.
    """
    from ttbuild.errors import CompilationError
    from ttbuild.frontend.codegen import generate

    desc = json.loads(inputs["json"])
    signature = options.get("signature", [])
    if isinstance(signature, str):
        from ttbuild.signature import split_entries

        signature = [s for s in split_entries(signature) if s]
    debug = bool(options.get("debug", False))
    loc_table = json.loads(inputs["loc"]) if debug and inputs.get("loc") else None
    text, abi = generate(desc, list(signature), dict(options.get("constexprs", {})), debug=debug, loc_table=loc_table,
                    tma=bool(options.get("tma", False)))
    from mlir import ir

    from ttbuild.backend.mlir_util import context
    ctx = context()
    try:
        module = ir.Module.parse(text, context=ctx)
    except Exception as e:  # MLIRError: our own output failed to verify — a compiler bug
        raise CompilationError(f"internal error: generated TTIR does not verify: {e}", stage="ttir") from e
    from ttbuild.frontend import passes
    passes.run(module)
    if not module.operation.verify():
        raise CompilationError("internal error: TTIR does not verify after the cleanup passes", stage="ttir")
    asm = module.operation.get_asm(print_generic_op_form=True, use_local_scope=True, enable_debug_info=True)
    return {"ttir": asm.encode(), "abi": abi}
