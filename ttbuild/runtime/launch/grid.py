"""Grids and streams as the driver takes them: a grid as three ints, a stream as an int handle, torch's current device and stream."""

from __future__ import annotations

import sys

from .common import LaunchError


def torch_get_device() -> int:
    """torch's current CUDA device ordinal (torch is loaded: a torch tensor was passed)."""
    torch = sys.modules["torch"]
    get = getattr(torch._C, "_cuda_getDevice", None)
    return get() if get is not None else torch.cuda.current_device()


def stream_handle(stream) -> int:
    """A launch stream as an int handle: an int, a torch.cuda.Stream (.cuda_stream), a
    cuda.core / CUDA-Python stream (__cuda_stream__() -> (version, handle)), a CUstream.
    Raises LaunchError for anything else."""
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return int(handle)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise LaunchError(f"stream= must be a CUstream handle (int), a torch.cuda.Stream or an object "
                          f"with __cuda_stream__, got {stream!r}") from None


def torch_raw_stream(device: int) -> int:
    """The CUstream handle of torch's current stream on `device` (torch is loaded)."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def grid3(grid) -> tuple[int, int, int]:
    """`grid` (an int, or 1 to 3 ints with __index__) as (x, y, z), missing dimensions 1.
    Raises LaunchError for another shape, a non-integer or a negative dimension (Triton's
    launcher takes the same forms)."""
    if isinstance(grid, int):
        grid = (grid,)
    try:
        n = len(grid)
    except TypeError:
        raise LaunchError(f"grid must be a tuple of 1-3 ints (or a callable returning one), "
                          f"got {grid!r}") from None
    if not 1 <= n <= 3:
        raise LaunchError(f"grid must have 1 to 3 dimensions, got {grid!r}")
    out = []
    for g in grid:
        try:
            g = g.__index__()
        except AttributeError:
            raise LaunchError(f"grid dimensions must be ints, got {grid!r}") from None
        if g < 0:
            raise LaunchError(f"grid dimensions must be >= 0, got {grid!r}")
        out.append(g)
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]
