"""A `None` argument picks the variant built with it a constexpr None (by position or name); a pointer there is refused; variants for None and for a pointer coexist."""

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


@pytest.fixture
def mixed(tmp_path):
    drv = FakeDriver()
    root = write_lib(tmp_path / "artifacts", [meta("bias_none", "bias_kernel", _params(None)),
                                              meta("bias_ptr", "bias_kernel", _params("ptr"))])
    lib = rt.load(str(root), driver=drv)
    drv.params_of = {v.entry: len(v.launch_params) for v in lib.variants}
    return lib, drv


def test_variants_for_none_and_for_a_pointer_pick_by_the_call(mixed):
    lib, drv = mixed
    lib.bias_kernel[(1,)](f32(), None, f32(0x3000), 10, 128)
    lib.bias_kernel[(1,)](f32(), f32(0x4000), f32(0x3000), 10, 128)
    lib.bias_kernel[(1,)](x_ptr=f32(), bias_ptr=None, out_ptr=f32(0x3000), n=10)
    assert [l[1] for l in drv.loads][:2] == [b"CUBIN:bias_none", b"CUBIN:bias_ptr"]
    assert {l[1] for l in drv.loads} == {b"CUBIN:bias_none", b"CUBIN:bias_ptr"}
    assert [len(c["values"]) for c in drv.launches] == [3, 4, 3]


def test_none_for_a_parameter_no_variant_makes_constexpr_is_refused(mixed):
    lib, drv = mixed
    with pytest.raises(TypeError) as exc:
        lib.bias_kernel[(1,)](f32(), None, None, 10, 128)
    assert "out_ptr" in str(exc.value) and not drv.launches
