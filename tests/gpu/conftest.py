"""GPU test fixtures: the artifacts library (TTBUILD_ARTIFACTS, default ./artifacts), one test per built variant; skips without a GPU, torch or artifacts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def artifacts_dir() -> Path:
    return Path(os.environ.get("TTBUILD_ARTIFACTS", REPO / "artifacts"))


def built_variants() -> list[tuple[str, str]]:
    """(variant, kernel) of every lib/*.json, without importing CUDA."""
    lib = artifacts_dir() / "lib"
    out = []
    for p in sorted(lib.glob("*.json")) if lib.is_dir() else []:
        try:
            doc = json.loads(p.read_text())
            out.append((doc["variant"], doc["kernel"]))
        except (OSError, ValueError, KeyError):
            continue
    return out


# Kernels the generic per-variant tests (test_gpu_kernels.py) know how to call and check; the
# tutorial kernels have their own tests (test_gpu_tutorials.py, test_backend_gpu_*.py).
ELEMENTWISE_KERNELS = ("add_kernel", "axpy_kernel")


def pytest_generate_tests(metafunc):
    if "variant_name" in metafunc.fixturenames:
        found = [(v, k) for v, k in built_variants() if k in ELEMENTWISE_KERNELS]
        if found:
            metafunc.parametrize("variant_name", [v for v, _ in found], ids=[v for v, _ in found])
        else:
            metafunc.parametrize("variant_name", [pytest.param(None, marks=pytest.mark.skip(
                reason=f"no built variants in {artifacts_dir() / 'lib'} (run `doit` first)"))])


@pytest.fixture(scope="session")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(scope="session")
def lib(torch):
    lib_dir = artifacts_dir() / "lib"
    if not lib_dir.is_dir():
        pytest.skip(f"no {lib_dir} (build the kernels first: `doit`)")
    import ttbuild.runtime as rt

    return rt.load(str(artifacts_dir()))
