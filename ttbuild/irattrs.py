"""Module attributes of a TTIR/TTGIR text (`ttg.num-warps`, `ttg.shared`, `ttg.target`, ...) read without MLIR; stdlib only.

The one reader of module attributes from IR text: the metadata writer (graph/meta.py) and the
CLI read them here, so neither needs the MLIR bindings (CONTRACTS.md, "TTIR and TTGIR"). It
reads the module's own attribute dictionary only (generic form: the `}) {...} : () -> ()` that
closes `"builtin.module"`; custom form: `module attributes {...}`), never an op's attribute
of the same name inside the body.
"""

from __future__ import annotations

import re

# The module op's attribute dictionary: closes the generic form at column 0, or opens the custom form.
_GENERIC = re.compile(r"^\}\) \{(?P<attrs>.*)\} : \(\) -> \(\)", re.M)
_CUSTOM = re.compile(r"^module(?: @\S+)? attributes \{(?P<attrs>.*)\} \{", re.M)
# One `name = value` entry: name bare or quoted; value a quoted string, `N : iK`, or anything up to a comma.
_ENTRY = re.compile(r'\s*(?:"(?P<qname>[^"]+)"|(?P<name>[\w.$-]+))\s*=\s*'
                    r'(?:"(?P<str>(?:[^"\\]|\\.)*)"|(?P<int>-?\d+)\s*:\s*i\d+|(?P<other>[^,]*))\s*(?:,|\Z)')


def module_attrs(text: str | bytes) -> dict[str, int | str]:
    """Attributes of the module in `text`: name -> int (for `N : iK`), str (for `"..."`,
    unescaped only of `\\"`), or the value's raw text otherwise. {} when the module has none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    matches = list(_GENERIC.finditer(text)) or list(_CUSTOM.finditer(text))
    if not matches:
        return {}
    body = (matches[-1] if matches[-1].re is _GENERIC else matches[0]).group("attrs")
    out: dict[str, int | str] = {}
    pos = 0
    while pos < len(body):
        m = _ENTRY.match(body, pos)
        if not m or m.end() == pos:
            break
        name = m.group("qname") or m.group("name")
        if m.group("int") is not None:
            out[name] = int(m.group("int"))
        elif m.group("str") is not None:
            out[name] = m.group("str").replace('\\"', '"')
        else:
            out[name] = m.group("other").strip()
        pos = m.end()
    return out


def module_int(text: str | bytes, name: str) -> int | None:
    """Integer module attribute `name` (e.g. "ttg.shared") of `text`, None when absent or not an int."""
    value = module_attrs(text).get(name)
    return value if isinstance(value, int) else None
