"""`lib.<kernel>[grid](*args, **constexprs)`: binds arguments, picks the variant (cached per argument signature), packs parameters, launches.

Three paths. The fast one takes positional torch tensors and Python scalars on torch's current
device: one lookup from (dtypes, alignment bits, scalar classes, device) to a packed launch. It
is C (claunch.c, through ttbuild.runtime.cext) for a fixed grid where a C compiler is present,
else generated Python (ttbuild.runtime.fastpath); the C one hands whatever it does not take to
the generated one. The generic one takes everything else: arguments by name, constexprs,
launch options, DLPack and __cuda_array_interface__ objects (with their streams), tensors on
another device; it also fills the fast paths' shared dict.

A variant with global scratch (metadata "global_scratch", ttbuild.runtime.scratch) gets one more
parameter after its own on every path: the address of its launch stream's scratch buffer, grown
to size x programs; kernels without it launch as they did before it existed.

The parts, one concern each: `launcher` (the Launcher and which path a call takes), `fast` (the
generated and C paths), `generic` (binding, variant choice, the generic launch), `compiled` (one
variant's launch state), `pack` (parameter slots and struct codes), `image` (which image loads,
checked by sha256), `grid` (grids and streams), `common` (LaunchError, cache bounds). How an
argument is read and classified is ttbuild.runtime.args', shared by every path.
"""

from __future__ import annotations

from .common import MAX_CACHED, LaunchError
from .launcher import Launcher

__all__ = ["Launcher", "LaunchError", "MAX_CACHED"]
