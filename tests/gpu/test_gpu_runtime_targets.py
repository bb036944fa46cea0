"""GPU: a multi-target variant (cubins for sm_80 and sm_90a, PTX for sm_90) runs on this device from its best image, and its PTX JIT-compiles through the driver.

Artifacts: `targets/lib` of the test artifacts (`$TTBUILD_TEST_ARTIFACTS`, else
build/test-artifacts), written by tests/gpu/build_test_artifacts.py on a CPU machine.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
N = 3000


@pytest.fixture(scope="module")
def multi(torch):
    root = Path(os.environ.get("TTBUILD_TEST_ARTIFACTS") or Path(__file__).parents[2] / "build" / "test-artifacts")
    if not (root / "targets" / "lib").is_dir():
        pytest.skip(f"no {root / 'targets' / 'lib'} (python tests/gpu/build_test_artifacts.py)")
    import ttbuild.runtime as rt

    return rt.load(str(root / "targets"))


def only(lib, kind, arch):
    """A launcher over the multi-target variant restricted to one of its images."""
    import ttbuild.runtime as rt

    (v,) = lib.variants
    images = tuple(i for i in v.images if i.kind == kind and i.arch == arch)
    assert images, v.images
    return rt.Launcher(v.kernel, [dataclasses.replace(v, images=images)])


def check(torch, launcher):
    x, y = torch.rand(N, device="cuda"), torch.rand(N, device="cuda")
    out = torch.full_like(x, float("nan"))
    launcher[(-(-N // 512),)](x, y, out, 0.5, N)
    torch.testing.assert_close(out, x + 0.5 * y)


def test_best_image_runs(multi, torch):
    check(torch, multi.scale_add)


def test_ptx_jit_through_the_driver(multi, torch):
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        pytest.skip("the PTX is for compute capability 9.0 and newer")
    check(torch, only(multi, "ptx", "sm_90"))


def test_a_cubin_for_another_major_is_refused_by_name(multi, torch):
    import ttbuild.runtime as rt

    if torch.cuda.get_device_capability()[0] == 8:
        pytest.skip("an sm_80 cubin runs here")
    with pytest.raises(rt.NoMatchingVariant, match=r"compiled for cuda:80 \(sm_80\), device is compute capability"):
        check(torch, only(multi, "cubin", "sm_80"))


def test_the_drivers_capability_carries_the_devices_sm_count(torch):
    """The SM count a variant built for a GPU model is checked against (Variant.model_ok) is the device's."""
    from ttbuild.runtime.driver import default_driver

    _, cap = default_driver().context(None)
    props = torch.cuda.get_device_properties(0)
    assert tuple(cap) == (props.major, props.minor) and cap.sm_count == props.multi_processor_count
