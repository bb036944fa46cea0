"""A `None` argument reaches a variant built with that parameter a constexpr None (Triton's specialization of None), by position or by name; a pointer where the variant has None is refused with the reason."""

from __future__ import annotations

import pytest
from runtime_fakes import meta, write_lib
from test_runtime import FakeDriver, f32

import ttbuild.runtime as rt


def _params(bias):
    ptr = {"kind": "pointer", "dtype": "fp32", "divisibility": 16}
    return [{"name": "x_ptr", **ptr},
            {"name": "bias_ptr", "kind": "constexpr", "value": None} if bias is None else {"name": "bias_ptr", **ptr},
            {"name": "out_ptr", **ptr},
            {"name": "n", "kind": "scalar", "dtype": "i32", "divisibility": 1},
            {"name": "BLOCK", "kind": "constexpr", "value": 128}]


@pytest.fixture
def lib(tmp_path):
    drv = FakeDriver()
    root = write_lib(tmp_path / "artifacts", [meta("bias_none", "bias_kernel", _params(None))])
    return rt.load(str(root), driver=drv), drv


def test_none_positional_picks_the_none_variant(lib):
    lib, drv = lib
    lib.bias_kernel[(1,)](f32(), None, f32(0x3000), 10, 128)
    assert [l[1] for l in drv.loads] == [b"CUBIN:bias_none"]
    assert len(drv.launches) == 1 and len(drv.launches[0]["values"]) == 3  # x, out, n: no bias argument


def test_none_by_name_picks_the_none_variant(lib):
    lib, drv = lib
    lib.bias_kernel[(1,)](x_ptr=f32(), bias_ptr=None, out_ptr=f32(0x3000), n=10)
    assert len(drv.launches) == 1


def test_a_pointer_where_the_variant_has_none_is_refused(lib):
    lib, drv = lib
    with pytest.raises(rt.NoMatchingVariant) as exc:
        lib.bias_kernel[(1,)](x_ptr=f32(), bias_ptr=f32(0x4000), out_ptr=f32(0x3000), n=10)
    assert "bias_ptr" in str(exc.value)
    assert not drv.launches
