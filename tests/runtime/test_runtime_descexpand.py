"""The C expansion of tensor-descriptor arguments (claunch.c DescExpand, in front of a kernel's launch): what it hands the launch of the expanded parameters, and that everything tensordesc.expander would refuse or treat otherwise goes, untouched, to the Python launch."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ttbuild.runtime import cext


@dataclass
class Base:
    ptr: int

    def data_ptr(self):
        return self.ptr


@dataclass
class Desc:  # the fields of Triton's host TensorDescriptor
    base: object
    shape: list
    strides: list
    block_shape: list


class Recorder:
    def __init__(self, name):
        self.name, self.calls = name, []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.name


@pytest.fixture
def expand():
    module = cext.load()
    if module is None:
        pytest.skip(f"no C launch path here: {cext.status()}")
    inner, fallback = Recorder("inner"), Recorder("fallback")
    # (fp16 descriptor [64, 32], a scalar, fp32 descriptor of rank 3 [2, 8, 4])
    launch = module.DescExpand(bytes([2, 0, 3]), (2, 0, 4), ((64, 32), None, (2, 8, 4)), inner, fallback)
    return launch, inner, fallback


def test_descriptors_expand_to_base_shape_and_leading_strides(expand):
    launch, inner, fallback = expand
    a, c = Base(0x1000), Base(0x2000)
    assert launch(Desc(a, [128, 96], [96, 1], [64, 32]), 7, Desc(c, (4, 16, 8), (128, 8, 1), (2, 8, 4))) == "inner"
    (args, kwargs), = inner.calls
    assert args == (a, 128, 96, 96, 7, c, 4, 16, 8, 128, 8) and kwargs == {}
    assert args[0] is a and args[5] is c and not fallback.calls


@pytest.mark.parametrize("bad", [
    Desc(Base(0x1000), [128, 96], [96, 1], [32, 32]),      # another block shape
    Desc(Base(0x1000), [128, 96], [96, 2], [64, 32]),      # last stride not 1
    Desc(Base(0x1000), [128, 96], [9, 1], [64, 32]),       # 18-byte rows
    Desc(Base(0x1008), [128, 96], [96, 1], [64, 32]),      # base not 16-byte aligned
    Desc(Base(0x1000), [128], [1], [64, 32]),              # rank 1
    Desc(Base(0x1000), [128, 96.0], [96, 1], [64, 32]),    # a float extent
    Desc(object(), [128, 96], [96, 1], [64, 32]),          # no data_ptr
    Base(0x1000),                                          # a tensor-like, not a descriptor
])
def test_anything_else_goes_to_the_python_launch_untouched(expand, bad):
    launch, inner, fallback = expand
    c = Desc(Base(0x2000), [4, 16, 8], [128, 8, 1], [2, 8, 4])
    assert launch(bad, 7, c) == "fallback"
    assert fallback.calls == [((bad, 7, c), {})] and not inner.calls


def test_keywords_and_extra_arguments_go_to_the_python_launch(expand):
    launch, inner, fallback = expand
    d = Desc(Base(0x1000), [128, 96], [96, 1], [64, 32])
    c = Desc(Base(0x2000), [4, 16, 8], [128, 8, 1], [2, 8, 4])
    launch(d, 7, c, stream=3)
    launch(d, 7, c, 5)
    assert fallback.calls == [((d, 7, c), {"stream": 3}), ((d, 7, c, 5), {})] and not inner.calls


def test_trailing_arguments_left_out_are_left_out_of_the_expansion(expand):
    """A kernel's trailing constexprs may be omitted (their built values apply): the launch of the
    expanded parameters gets the expansion of what was given, as the Python path passes it."""
    launch, inner, fallback = expand
    d = Desc(Base(0x1000), [128, 96], [96, 1], [64, 32])
    assert launch(d, 7) == "inner"
    assert inner.calls == [((d.base, 128, 96, 96, 7), {})] and not fallback.calls
