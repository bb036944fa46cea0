"""GPU differential test (marker `gpu`): cases made by `differential.py generate` on a machine with our compiler, run where triton, torch and a GPU are; Triton-from-source and Triton-from-our-TTIR must store identical bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "frontend"  # differential.py, the case runner


@pytest.mark.gpu
def test_our_ttir_computes_what_triton_computes():
    cases = os.environ.get("TTBUILD_DIFF_CASES")
    if not cases or not (Path(cases) / "manifest.json").exists():
        pytest.skip("set TTBUILD_DIFF_CASES to a folder made by `differential.py generate`")
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    proc = subprocess.run([sys.executable, str(HERE / "differential.py"), "run", cases], capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " 0 mismatched" in proc.stdout
