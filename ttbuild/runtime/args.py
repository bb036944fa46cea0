"""Turns launch arguments into (signature key, packed value) pairs: tensors by dtype and 16-byte alignment, scalars by kind and range.

A *key item* is hashable and says everything variant selection needs about one argument:
  pointer:  ("ptr", dtype or None, address % 16 == 0)
  int:      ("int", negative, magnitude bits, value % 16 == 0)  -- magnitude = v or ~v
  bool:     ("bool",)        float: ("float",)
Extractors are cached per Python type, so the per-launch cost is one dict lookup and the
attribute reads the object needs (data_ptr(), dtype).
"""

from __future__ import annotations

from .interop import InteropError, cai_stream, dlpack_device, dlpack_pointer

# torch / numpy / cupy dtype names (str(dtype), "torch." stripped) -> Triton dtype names.
DTYPE_NAMES = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float64": "fp64", "double": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "long": "i64", "int": "i32",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}

# __cuda_array_interface__ typestr kind+size (byte order stripped) -> Triton dtype names.
TYPESTR_NAMES = {
    "f2": "fp16", "f4": "fp32", "f8": "fp64", "b1": "i1",
    "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64",
}

_dtype_cache: dict = {}


def dtype_name(dtype) -> str | None:
    """Triton dtype name of a torch/numpy/cupy dtype object, or None if unknown."""
    try:
        return _dtype_cache[dtype]
    except (KeyError, TypeError):
        pass
    text = str(dtype)
    name = DTYPE_NAMES.get(text.rpartition(".")[2])
    if name is None and len(text) == 3 and text[0] in "<|=":  # numpy dtype('<f4') spelled as typestr
        name = TYPESTR_NAMES.get(text[1:])
    try:
        _dtype_cache[dtype] = name
    except TypeError:
        pass
    return name


def typestr_name(typestr: str) -> str | None:
    """'<f4' -> 'fp32'; big-endian ('>') or unknown -> None (the GPU is little-endian)."""
    if not typestr or typestr[0] == ">":
        return None
    return TYPESTR_NAMES.get(typestr[1:] if typestr[0] in "<|=" else typestr)


def _torch_like(obj):
    ptr = obj.data_ptr()
    return ("ptr", dtype_name(obj.dtype), ptr & 15 == 0), ptr


def _data_ptr_only(obj):
    ptr = obj.data_ptr()
    dt = getattr(obj, "dtype", None)
    return ("ptr", dtype_name(dt) if dt is not None else None, ptr & 15 == 0), ptr


def _cuda_array(obj):
    cai = obj.__cuda_array_interface__
    ptr = cai["data"][0] or 0
    return ("ptr", typestr_name(cai.get("typestr", "")), ptr & 15 == 0), ptr


def _int(v):
    v = int(v)
    neg = v < 0
    return ("int", neg, (~v if neg else v).bit_length(), v & 15 == 0), v


def _bool(v):
    return ("bool",), bool(v)


def _float(v):
    return ("float",), float(v)


_extractors: dict = {bool: _bool, int: _int, float: _float}
torch_types: set = set()


def _dlpack(obj):
    raise AssertionError("DLPack arguments are read by classify(..., stream=)")  # marker only


def _extractor_for(tp, value):
    if tp.__module__.startswith("torch") and hasattr(tp, "data_ptr"):
        torch_types.add(tp)
        return _torch_like
    if hasattr(tp, "data_ptr"):
        return _data_ptr_only
    if hasattr(value, "__cuda_array_interface__"):  # a property on cupy/numba types, or per instance
        return _cuda_array
    if hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"):  # after CAI: no capsule to build
        return _dlpack
    if issubclass(tp, bool) or tp.__name__ in ("bool_", "bool"):  # numpy.bool_
        return _bool
    if hasattr(tp, "__index__"):  # numpy integer scalars
        return _int
    if hasattr(tp, "__float__"):  # numpy float scalars
        return _float
    return None


def extractor(value, name: str):
    """The cached per-type reader of `value` (one of this module's `_torch_like`, `_cuda_array`,
    `_dlpack`, ...). Raises TypeError for objects a kernel cannot take."""
    tp = type(value)
    ex = _extractors.get(tp)
    if ex is None:
        ex = _extractor_for(tp, value)
        if ex is None:
            raise TypeError(
                f"argument {name!r}: cannot pass a {tp.__module__}.{tp.__qualname__} to a kernel "
                "(expected a tensor with data_ptr(), __cuda_array_interface__ or __dlpack__, or "
                "an int, float or bool)")
        _extractors[tp] = ex
    return ex


def classify(value, name: str, stream: int = 0):
    """(key item, packed value) of one argument. Raises TypeError for unsupported objects.
    `stream`: the launch stream a DLPack producer is asked to order its work before."""
    ex = extractor(value, name)
    if ex is _dlpack:
        ptr, dtype, _, _ = dlpack_pointer(value, name, stream)
        return ("ptr", dtype, ptr & 15 == 0), ptr
    return ex(value)


class ArgsRead:
    """What the generic launch path needs to know about its runtime arguments, read in one
    pass: key items and packed values (None at DLPack positions until `resolve_dlpack`), the
    device they live on (None: unknown, i.e. the current one), the torch tensor type seen (or
    None), CAI producer streams to wait on as (name, stream), DLPack positions."""

    __slots__ = ("keys", "packed", "device", "torch_type", "producers", "dlpack")

    def __init__(self):
        self.keys, self.packed, self.producers, self.dlpack = [], [], [], []
        self.device = self.torch_type = None


def read_args(values, names, kernel: str) -> ArgsRead:
    """Read every runtime argument once (see ArgsRead). Raises TypeError for unsupported
    objects, InteropError for host memory, a CAI stream of 0 or tensors on two devices."""
    out = ArgsRead()
    where = None
    ext = _extractors
    for name, v in zip(names, values):
        ex = ext.get(type(v)) or extractor(v, name)
        dev = None
        if ex is _dlpack:
            dev = dlpack_device(v, name)
            out.dlpack.append(len(out.keys))
            k = p = None
        elif ex is _cuda_array:
            cai = v.__cuda_array_interface__
            p = cai["data"][0] or 0
            k = ("ptr", typestr_name(cai.get("typestr", "")), p & 15 == 0)
            s = cai_stream(cai, name)
            if s is not None:
                out.producers.append((name, s))
        else:
            k, p = ex(v)
            if ex is _torch_like or ex is _data_ptr_only:
                if ex is _torch_like:
                    out.torch_type = type(v)
                get = getattr(v, "get_device", None)
                if get is not None:
                    dev = get()
                    if dev < 0:
                        raise InteropError(f"{kernel}: argument {name!r}: tensor is in host memory (device "
                                           f"{getattr(v, 'device', 'cpu')}); a kernel needs CUDA device memory")
        out.keys.append(k)
        out.packed.append(p)
        if dev is not None:
            if out.device is None:
                out.device, where = dev, name
            elif dev != out.device:
                raise InteropError(f"{kernel}: arguments are on different devices: {where!r} on "
                                   f"cuda:{out.device}, {name!r} on cuda:{dev}; move them to one device")
    return out


def resolve_dlpack(read: ArgsRead, values, names, stream: int) -> None:
    """Fill the DLPack positions of `read`, asking each producer to order its work before `stream`."""
    for i in read.dlpack:
        ptr, dtype, _, _ = dlpack_pointer(values[i], names[i], stream)
        read.keys[i] = ("ptr", dtype, ptr & 15 == 0)
        read.packed[i] = ptr


def describe(key: tuple, value) -> str:
    """Human wording of an argument for error messages: 'fp32 tensor at 0x7f..00 (16-aligned)'."""
    if key[0] == "ptr":
        dt = key[1] or "unknown-dtype"
        return f"{dt} pointer 0x{value:x}" + (" (16-byte aligned)" if key[2] else " (not 16-byte aligned)")
    if key[0] == "int":
        return f"int {value}"
    return f"{key[0]} {value!r}"
