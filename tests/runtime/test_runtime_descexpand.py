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


class Size(tuple):
    """torch.Size's part here: a tuple subclass that iterates as a tuple."""


@dataclass(frozen=True, slots=True)
class SlotDesc:
    base: object
    shape: tuple
    strides: tuple
    block_shape: tuple


class PropDesc(Desc):
    """A descriptor whose `shape` is a property: read by name, as getattr reads it."""

    @property
    def shape(self):
        return self._shape

    @shape.setter
    def shape(self, value):
        self._shape = value


@pytest.mark.parametrize("kind", [Desc, SlotDesc, PropDesc])
def test_every_field_layout_reads_the_fields_getattr_reads(expand, kind):
    """Instance dicts (a dataclass: Triton's), __slots__ and properties: the C reads agree with
    getattr, launch after launch, and a rebound field is read anew."""
    launch, inner, fallback = expand
    a, c = Base(0x1000), Base(0x2000)
    cd = Desc(c, (4, 16, 8), (128, 8, 1), (2, 8, 4))
    d = kind(a, Size((128, 96)), (96, 1), (64, 32))
    for _ in range(2):
        launch(d, 7, cd)
    e = kind(a, [64, 96], [96, 1], [64, 32])
    launch(e, 7, cd)
    assert [call[0][:5] for call in inner.calls] == [(a, 128, 96, 96, 7)] * 2 + [(a, 64, 96, 96, 7)]
    if kind is not SlotDesc:
        d.shape = (32, 96)  # a mutable dataclass: another object in the same field
        launch(d, 7, cd)
        assert inner.calls[-1][0][:4] == (a, 32, 96, 96)
    assert not fallback.calls


def test_a_list_field_is_read_again_at_every_launch(expand):
    """Lists can change in place: only tuples (immutable) are remembered by identity."""
    launch, inner, fallback = expand
    cd = Desc(Base(0x2000), (4, 16, 8), (128, 8, 1), (2, 8, 4))
    shape, strides, block = [128, 96], [96, 1], [64, 32]
    d = Desc(Base(0x1000), shape, strides, block)
    launch(d, 7, cd)
    shape[0], strides[0] = 256, 104
    launch(d, 7, cd)
    assert [call[0][1:4] for call in inner.calls] == [(128, 96, 96), (256, 96, 104)]
    strides[0] = 100  # 200 bytes: not a multiple of 16
    launch(d, 7, cd)
    block[0] = 32  # not the built block any more
    strides[0] = 96
    launch(d, 7, cd)
    assert len(inner.calls) == 2 and len(fallback.calls) == 2


def test_a_tuple_remembered_after_a_check_is_still_checked_with_another_partner(expand):
    """The same shape tuple with other strides, or the same strides with another shape, is
    checked again: the cache holds the pair."""
    launch, inner, fallback = expand
    cd = Desc(Base(0x2000), (4, 16, 8), (128, 8, 1), (2, 8, 4))
    shape, good, bad = (128, 96), (96, 1), (96, 2)
    launch(Desc(Base(0x1000), shape, good, (64, 32)), 7, cd)
    launch(Desc(Base(0x1000), shape, bad, (64, 32)), 7, cd)
    launch(Desc(Base(0x1000), (128, 96.0), good, (64, 32)), 7, cd)
    launch(Desc(Base(0x1000), shape, good, (64, 32)), 7, cd)
    assert len(inner.calls) == 2 and len(fallback.calls) == 2


@dataclass
class PadDesc(Desc):  # Triton 3.6's host TensorDescriptor: padding last, "zero" by default
    padding: str = "zero"


@dataclass(frozen=True, slots=True)
class SlotPadDesc:  # ttbuild.runtime.TensorDescriptor's layout
    base: object
    shape: tuple
    strides: tuple
    block_shape: tuple
    padding: str = "zero"


class ReorderedDesc:
    """Instance dict in another order than the dataclass's: the fields are looked up."""

    def __init__(self, base, shape, strides, block_shape, padding="zero"):
        self.padding, self.block_shape, self.base, self.shape, self.strides = padding, block_shape, base, shape, strides


class ClassPadDesc(Desc):
    """padding a class attribute only (not in the instance dict)."""

    def __init__(self, base, shape, strides, block_shape, padding):
        super().__init__(base, shape, strides, block_shape)
        type(self).padding = padding


class PropPadDesc(Desc):
    """padding a property: read by name."""

    def __init__(self, base, shape, strides, block_shape, padding):
        super().__init__(base, shape, strides, block_shape)
        self._padding = padding

    @property
    def padding(self):
        return self._padding


@pytest.mark.parametrize("kind", [PadDesc, SlotPadDesc, ReorderedDesc, ClassPadDesc, PropPadDesc])
def test_padding_is_read_as_getattr_reads_it_in_every_layout(expand, kind):
    """"zero" (also an equal string that is not the interned one) expands in C; "nan" at a
    position read through pointers, and anything else, goes to the Python launch (which refuses
    it, naming the parameter); a descriptor without padding pads with zeros."""
    launch, inner, fallback = expand
    a = Base(0x1000)
    cd = Desc(Base(0x2000), (4, 16, 8), (128, 8, 1), (2, 8, 4))
    shape, strides = (128, 96), (96, 1)
    for padding in ("zero", "".join(["ze", "ro"])):
        assert launch(kind(a, shape, strides, (64, 32), padding), 7, cd) == "inner"
    assert launch(Desc(a, shape, strides, (64, 32)), 7, cd) == "inner"  # no padding: zeros
    assert len(inner.calls) == 3 and not fallback.calls
    for padding in ("nan", "zeros", None):
        assert launch(kind(a, shape, strides, (64, 32), padding), 7, cd) == "fallback"
    assert len(inner.calls) == 3 and len(fallback.calls) == 3
    assert launch(kind(a, shape, strides, (64, 32), "zero"), 7, cd) == "inner"
