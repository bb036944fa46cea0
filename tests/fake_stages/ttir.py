"""Fake ttir stage (tests/fake_stages/lowering.py), with the kernel ABI record the real one writes (ttbuild.frontend.abi)."""

import json

from ttbuild.errors import CompilationError
from ttbuild.frontend import abi
from ttbuild.signature import parse_entry

from .lowering import lower

VERSION = 1


def run(inputs, options):
    out = lower("ttir", inputs, options)
    out["abi"] = _abi(json.loads(inputs["json"]), options)
    return out


def _abi(doc: dict, options) -> bytes:
    """The fake parse's parameters as the real ttir stage records them: a parameter with an
    annotation (the fake parse's only kind: constexpr) or a constexprs value is a constexpr, the
    others take the signature's entries in order."""
    signature, constexprs = list(options.get("signature", [])), dict(options.get("constexprs", {}))
    params, descriptors = [], []
    for p in doc["functions"][doc["kernel"]]["params"]:
        name, annotated = p["name"], p["annotation"] is not None
        if name in constexprs or annotated:
            params.append(abi.constexpr_param(name, constexprs.get(name), annotated))
            continue
        if not signature:
            raise CompilationError(f"signature has too few entries for {doc['kernel']} (first extra: {name!r})", stage="ttir")
        entry = parse_entry(signature.pop(0))
        params += abi.runtime_params(name, entry)
        if entry.is_descriptor:
            descriptors.append(abi.descriptor(name, entry, False))
    if signature:
        raise CompilationError(f"signature has {len(signature)} entries more than {doc['kernel']} has parameters", stage="ttir")
    return abi.record(params, descriptors)
