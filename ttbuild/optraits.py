"""Compatibility re-export of ttbuild.backend.ir.optraits for the frontend's TTIR cleanup (frontend/passes.py), which must not reach into the backend package by path."""

from ttbuild.backend.ir.optraits import (  # noqa: F401
    DOT_OPS,
    ELEMENTWISE_TT,
    NOT_SPECULATABLE,
    OPEN_REGIONS,
    PURE,
    PURE_DIALECTS,
    SCALAR_REGIONS,
    TERMINATORS,
    defined_in,
    erase_dead,
    is_elementwise,
    is_pure,
    walk,
)
