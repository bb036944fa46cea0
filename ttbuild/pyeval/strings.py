"""The string methods ttbuild's static Python evaluator runs (`",".join(...)`, `"{x}".format(x=1)`, `.split()`...), each result's size bounded first; standard library only."""

from __future__ import annotations

import re
import string

from . import bounds

# Pure methods whose cost is at most the string's length (`os.environ.get(...).lower()`).
SIMPLE = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith", "split", "isdigit",
                    "casefold", "isidentifier"})
METHODS = SIMPLE | {"join", "format", "replace"}

# A replacement field's format spec without nested fields, its width and precision four digits at
# most (Python's format-spec mini-language, "Format Specification Mini-Language"): `{:>10}`,
# `{:08.3f}`; a width of 10**9 would build a gigabyte string.
_SPEC = re.compile(r"(.?[<>=^])?[+\- ]?z?#?0?\d{0,4}[_,]?(\.\d{0,4})?[bcdeEfFgGnosxX%]?\Z")
_ATOMS = (str, int, float, bool)


class StringError(ValueError):
    """A string method call outside what the evaluator runs, or one Python refuses: `message` says which."""


def call(text: str, name: str, args: list, kwargs: dict):
    """`text.name(*args, **kwargs)` for a method of METHODS on strings and numbers, the result's size checked
    against ttbuild.pyeval.bounds before it is built. Raises StringError (with Python's message when Python's call
    fails) and bounds.BoundError."""
    if name == "format":
        return _format(text, args, kwargs)
    if kwargs:
        raise StringError(f"str.{name}() is evaluated with positional arguments only")
    if name == "join":
        if len(args) != 1 or not isinstance(args[0], (list, tuple)):
            raise StringError("str.join() takes one list or tuple of strings")
        items = args[0]
        if not all(isinstance(i, str) for i in items):
            raise StringError("str.join() takes strings only")
        bounds.check_items(sum(map(len, items)) + len(text) * max(len(items) - 1, 0), "the joined string")
        return text.join(items)
    if not all(isinstance(a, (str, int)) and not isinstance(a, bool) for a in args):
        raise StringError(f"str.{name}() takes strings and ints")
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        growth = text.count(args[0]) if args[0] else len(text) + 1
        bounds.check_items(len(text) + growth * len(args[1]), "the replaced string")
    try:
        result = getattr(text, name)(*args)
    except (TypeError, ValueError) as e:
        raise StringError(str(e)) from None
    bounds.check_items(len(result) if isinstance(result, (str, list)) else 0, "the string method's result")
    return result


def _format(text: str, args: list, kwargs: dict) -> str:
    """`text.format(...)` with plain replacement fields (`{}`, `{0}`, `{name}`, a simple spec) over strings and
    numbers: no attribute or index lookups, no nested fields, widths of four digits at most."""
    values = list(args) + list(kwargs.values())
    if not all(isinstance(v, _ATOMS) for v in values):
        raise StringError("str.format() is evaluated on strings and numbers only")
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as e:
        raise StringError(str(e)) from None
    size = len(text)
    for _, field, spec, _ in fields:
        if field is None:
            continue
        if not (field == "" or field.isdigit() or field.isidentifier()) or not _SPEC.match(spec or ""):
            raise StringError(f"str.format() field `{{{field}{':' + spec if spec else ''}}}` is not evaluated: "
                              "plain names or positions with a simple format spec")
        size += 10_000 + max((len(str(v)) for v in values), default=0)
    bounds.check_items(size, "the formatted string")
    try:
        return text.format(*args, **kwargs)
    except (IndexError, KeyError, ValueError, TypeError) as e:
        raise StringError(f"{type(e).__name__}: {e}") from None
