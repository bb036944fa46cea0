"""The kernel ABI, computed once where the TTIR is made: per kernel parameter the entries the cubin takes (or the constexpr it was built with), recorded as the ttir stage's `abi` output.

The ttir stage (frontend/codegen.py) builds the kernel's block arguments from `runtime_params`
and writes `record()`'s document beside the TTIR; the meta step copies it into the variant's
metadata and the runtime packs launch arguments from that list (docs/CONTRACTS.md, "Kernel
ABI"). Nothing else derives it. Standard library only.

A parameter's entries (`params`, in the kernel's parameter order):
- a pointer or scalar: one entry, `{"name", "kind": "pointer" | "scalar", "dtype", "divisibility",
  "origin"}`;
- a `tensordesc<...>` (ttbuild's pointer form of Triton's descriptors): `<name>.tensormap` (u64,
  the device address of its CUtensorMap: only where it loads through TMA, ttbuild.tma), then
  `<name>` (the base, `*dtype:16`), `<name>.shape<i>` (i32 per dimension; `:16` after the entry
  makes every extent a multiple of 16), `<name>.stride<i>` (i64 per stride but the last, which
  is 1); each with `"origin": <name>` and `"part"`: tensormap / base / shape / stride;
- a constexpr: `{"name", "kind": "constexpr", "value", "origin"}`, plus `"specialized": true`
  where the parameter is not annotated `tl.constexpr` (the variant fixed a runtime parameter:
  Triton's `== 1` and `None` specializations).
"""

from __future__ import annotations

import json
from typing import Any

from ttbuild.signature import SigEntry

# The parts a tensor descriptor parameter passes as, in the order the cubin takes them.
PARTS = ("tensormap", "base", "shape", "stride")


def entry(name: str, kind: str, dtype: str, divisibility: int = 1, origin: str | None = None,
          part: str | None = None) -> dict:
    """One pointer or scalar kernel parameter of the ABI: `divisibility` is 1 or 16, what the
    variant was specialised on and the launch checks (bytes of an address, value of an integer)."""
    out = {"name": name, "kind": kind, "dtype": dtype, "divisibility": divisibility, "origin": origin or name}
    if part is not None:
        out["part"] = part
    return out


def runtime_params(name: str, sig: SigEntry, tensormap: bool = False) -> list[dict]:
    """The kernel parameters the runtime parameter `name` with signature entry `sig` passes as,
    in order: itself for a pointer or scalar; for a descriptor its tensormap address (with
    `tensormap`: it loads through TMA), base, one i32 per dimension, one i64 per stride but the
    last (ttbuild's ABI: the pointer form of Triton's descriptors, TMA's map in front)."""
    if not sig.is_descriptor:
        return [entry(name, sig.kind, sig.dtype, sig.divisibility)]
    rank = len(sig.block_shape)
    out = [entry(f"{name}.tensormap", "scalar", "u64", 1, name, "tensormap")] if tensormap else []
    out.append(entry(name, "pointer", sig.dtype, 16, name, "base"))  # a TMA base is 16-byte aligned
    out += [entry(f"{name}.shape{i}", "scalar", "i32", sig.divisibility, name, "shape") for i in range(rank)]
    out += [entry(f"{name}.stride{i}", "scalar", "i64", 1, name, "stride") for i in range(rank - 1)]
    return out


def part_signature(param: dict) -> SigEntry:
    """The signature entry of one pointer or scalar ABI entry (its IR type's source)."""
    return SigEntry(param["kind"], param["dtype"], param["divisibility"])


def constexpr_param(name: str, value: Any, annotated: bool) -> dict:
    """The ABI entry of a constexpr parameter built with `value` (JSON, value_json()); not
    `annotated` (no `tl.constexpr`): a runtime parameter the variant specialised."""
    out = {"name": name, "kind": "constexpr", "value": value, "origin": name}
    if not annotated:
        out["specialized"] = True
    return out


def descriptor(name: str, sig: SigEntry, tensormap: bool) -> dict:
    """The `descriptors` record of a tensordesc parameter: name, dtype, block_shape, and whether
    it takes a tensormap (the ttgir stage fills in its box and swizzle, ttbuild.tma)."""
    return {"name": name, "dtype": sig.dtype, "block_shape": list(sig.block_shape), "tensormap": tensormap}


def value_json(value: Any, dtype: str | None = None) -> Any:
    """A constexpr value the frontend evaluated (a parameter's default) as the metadata carries
    it: numbers, bools, strings and None as they are, a dtype (its Triton name `dtype`, given by
    the caller) as {"dtype": name} (ttbuild.cxvalue); None for what JSON cannot hold (a tuple,
    a function)."""
    if dtype is not None:
        return {"dtype": dtype}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return None


def record(params: list[dict], descriptors: list[dict]) -> bytes:
    """The ttir stage's `abi` output: `{"params": [...], "descriptors": [...]}` as JSON bytes
    (keys in a fixed order, so equal ABIs are equal bytes)."""
    return (json.dumps({"params": params, "descriptors": descriptors}, separators=(",", ":")) + "\n").encode()
