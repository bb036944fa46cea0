"""Kernels of the project in several idioms: relative imports, constexpr defaults from another module,
kernels made by call, environment-chosen defaults."""
import os

import torch  # noqa: F401  (an opaque third-party import: fine as long as no kernel needs it)

from ..compat import erf, fast_rsqrt, squash
from ..consts import MODE_MEAN, MODE_SUM, PLAIN_LIMIT
from ..tl_shim import tl, triton

ROWS_PER_PROGRAM = int(os.environ.get("MIXPROJ_ROWS", "1"))
HAS_GPU = torch.cuda.is_available()


@triton.jit
def row_rms(x_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr, MODE: tl.constexpr = MODE_MEAN):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
    acc = tl.sum(x * x, axis=0)
    if MODE == MODE_MEAN:
        acc = acc / n_cols
    r = fast_rsqrt(acc + eps)
    tl.store(out_ptr + row * n_cols + offs, x * r, mask=mask)


def _scaled_squash(x_ptr, out_ptr, n, BLOCK: tl.constexpr, LIMIT: tl.constexpr = PLAIN_LIMIT,
                   ROWS: tl.constexpr = ROWS_PER_PROGRAM):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = squash(x) * LIMIT + erf(x) * ROWS
    tl.store(out_ptr + offs, y, mask=mask)


scaled_squash = triton.jit(_scaled_squash)


def _total(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr = MODE_SUM):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(x, axis=0))


total = triton.jit(_total)


@triton.jit
def uses_plain_global(x_ptr, n):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, offs * PLAIN_LIMIT, mask=offs < n)


@triton.jit
def uses_torch(x_ptr):
    tl.store(x_ptr, HAS_GPU)


@triton.constexpr_function
def half_block(n):
    """The half of a block a program stores, at least 16 lanes (run at compile time)."""
    return max(n // 2, 16)


@triton.jit
def halves(x_ptr, out_ptr, BLOCK: tl.constexpr):
    HALF: tl.constexpr = half_block(BLOCK)
    WIDE: tl.constexpr = triton.next_power_of_2(BLOCK + 1)
    offs = tl.arange(0, HALF)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * WIDE)
