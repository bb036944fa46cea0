"""Python `ast` nodes ↔ position-free JSON (docs/CONTRACTS.md "parse output"), numbering nodes with `_id`.

Encoding: `{"_t": class name, "_id": n, <field>: value, ...}` for every node that has a source
position (statements, expressions, arguments, keywords, ...); operator and context nodes
(`Add`, `Load`) carry only `_t`. Floats, and constants JSON cannot spell, carry `kind`.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable

_FLOAT = "float"


def _const_value(node: ast.Constant) -> dict:
    v = node.value
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return {"value": v, "kind": None}
    if isinstance(v, float):
        # JSON has no inf/nan and prints 1.0 back as 1.0 only by convention: tag floats explicitly.
        text = repr(v) if math.isfinite(v) else {math.inf: "inf", -math.inf: "-inf"}.get(v, "nan")
        return {"value": text, "kind": _FLOAT}
    if v is Ellipsis:
        return {"value": None, "kind": "ellipsis"}
    raise TypeError(type(v).__name__)


def encode(node: ast.AST, next_id: Callable[[ast.AST], int]) -> Any:
    """Encode `node` (pre-order), calling `next_id(node)` for every positioned node."""
    if isinstance(node, list):
        return [encode(n, next_id) for n in node]
    if not isinstance(node, ast.AST):
        return node
    out: dict[str, Any] = {"_t": type(node).__name__}
    if hasattr(node, "lineno"):
        out["_id"] = next_id(node)
    if isinstance(node, ast.Constant):
        out.update(_const_value(node))
        return out
    for field in node._fields:
        if field in ("type_comment", "type_params"):
            continue
        out[field] = encode(getattr(node, field, None), next_id)
    return out


def decode(data: Any) -> Any:
    """Rebuild `ast` nodes from `encode`'s output; each numbered node gets a `_id` attribute."""
    if isinstance(data, list):
        return [decode(d) for d in data]
    if not isinstance(data, dict) or "_t" not in data:
        return data
    cls = getattr(ast, data["_t"])
    if cls is ast.Constant:
        kind, value = data.get("kind"), data.get("value")
        if kind == _FLOAT:
            value = float(value)
        elif kind == "ellipsis":
            value = Ellipsis
        node = ast.Constant(value=value, kind=None)
    else:
        node = cls(**{k: decode(v) for k, v in data.items() if k not in ("_t", "_id")})
    node._id = data.get("_id")
    return node
