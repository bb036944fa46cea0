"""A mask or range shared by unrelated loads does not tie their layouts (ttbuild.backend.ttgir.shared_cheap), and every kernel uses 32-bit shared addresses.

Kernel: tests/data/gpu_kernels/recurrence.py (ours: a state updated by outer products, rows read
along its columns and its rows under one mask). What is checked:
- each load takes the layout its use needs (a slice of the state's layout along dimension 0 for the
  rows read against the state's columns, along dimension 1 for the other), as Triton 3.6's
  backward rematerialization leaves them (oracle), where all were one group before (the shared mask
  tied them), and converted per iteration;
- the mask is rebuilt per layout (one arith.cmpi per layout it is needed in);
- the stored row keeps its loop-carried pointers coalesced, its value converted (as Triton);
- shared memory is addressed with 32-bit registers (`[%r`), never 64-bit ones (`[%rd`);
- ptxas -v: no stack frame.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from oracle import triton_ttgir

import ttbuild

SOURCE = Path(__file__).parents[2] / "data" / "gpu_kernels" / "recurrence.py"
ROW = ("decay_state_scan", "*fp32:16,*fp32:16,*fp32:16,*fp32:16,i32,i32,i32,fp32", {"D": 64})
_BUILT: dict = {}


def build(until: str) -> dict[str, bytes]:
    if until not in _BUILT:
        kernel, sig, cx = ROW
        _BUILT[until] = ttbuild.compile(SOURCE, kernel=kernel, signature=sig, constexprs=cx, num_warps=4,
                                        until=until)
    return _BUILT[until]


_LOAD = re.compile(r'"tt\.load"\(.*?-> tensor<64xf32, (#ttg\.slice<\{dim = \d)')


def _loop(text: str) -> str:
    return text[text.index('"scf.for"'):]


def test_each_load_takes_the_layout_its_use_needs():
    g = build("ttgir")["ttgir"].decode()
    assert _LOAD.findall(g) == ["#ttg.slice<{dim = 0", "#ttg.slice<{dim = 0", "#ttg.slice<{dim = 1"]
    masks = re.findall(r'"arith\.cmpi"\(.*?-> (tensor<64xi1, #ttg\.[a-z]+<\{[a-zA-Z]+ = [^,]*)', g)
    assert len(masks) == len(set(masks)) == 3  # the mask rebuilt once per layout: slice 0, slice 1, the store's


def test_a_stored_vector_keeps_its_carried_pointers_coalesced():
    """The loop-carried output pointers keep one element per thread (a 1-D blocked layout); the reduction's
    result converts before the store, the loop's one conversion (Triton converts it the same way)."""
    loop = _loop(build("ttgir")["ttgir"].decode())
    store = re.search(r'"tt\.store"\(.*?: \(tensor<64x!tt\.ptr<f32>, (#ttg\.[a-z]+)', loop)
    assert store.group(1) == "#ttg.blocked" and loop.count('"ttg.convert_layout"') == 1




def test_load_layouts_as_triton():
    text = triton_ttgir(SOURCE, *ROW)
    theirs = re.findall(r"tt\.load .*: tensor<64x!tt\.ptr<f32>, #ttg\.slice<\{dim = (\d)", text)
    ours = [m[-1] for m in _LOAD.findall(build("ttgir")["ttgir"].decode())]
    assert ours == theirs


def test_shared_memory_takes_32_bit_addresses():
    ptx = build("ptx")["ptx"].decode()
    assert re.search(r"(ld|st)\.shared[^\n]*\[%r\d", ptx) and not re.search(r"(ld|st)\.shared[^\n]*\[%rd", ptx)


def test_no_stack_frame(tmp_path):
    from ttbuild.toolchain import ptxas_path

    try:
        ptxas = ptxas_path()
    except Exception as exc:  # noqa: BLE001  (no CUDA toolkit here: nothing to measure)
        pytest.skip(f"no ptxas: {exc}")
    f = tmp_path / "k.ptx"
    f.write_bytes(build("ptx")["ptx"])
    proc = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", "-o", str(tmp_path / "k.cubin"), str(f)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert int(re.search(r"(\d+) bytes stack frame", proc.stderr).group(1)) == 0
