"""LLIR rules for Triton's debug ops: `tt.print` -> vprintf, `tt.assert` -> __assertfail (CUDA device runtime)."""

from __future__ import annotations
