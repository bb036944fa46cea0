"""The recorder against real Triton 3.6 (the oracle interpreter, no GPU): the hook it installs in `knobs.runtime.jit_cache_hook` reads what Triton's own `_call_hook` passes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracle import run_triton  # noqa: E402

from ttbuild.record import merge_records, read_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def strided_kernel(x_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs * stride, tl.zeros((BLOCK,), tl.float16), mask=offs < n)
'''

SCRIPT = '''
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import triton
from triton import knobs
from triton.backends.nvidia.compiler import CUDAOptions
from ttbuild.record import hook
hook._capability = lambda: [9, 0]  # no GPU here: what the driver would say on an H200
hook.install(sys.argv[3])
previous = knobs.runtime.jit_cache_hook
import kmod
sig = {"x_ptr": "*fp16", "n": "i32", "stride": "constexpr", "BLOCK": "constexpr"}
k = kmod.strided_kernel
out = k._call_hook(knobs.runtime.jit_cache_hook, ("key", list(sig.values())), sig, 0, {(2,): 1, (3,): 128},
                   CUDAOptions(num_warps=8, enable_fp_fusion=False), [{(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}], False)
print("hook returned", out)
'''


def test_hook_records_what_tritons_call_hook_passes(tmp_path):
    (tmp_path / "kmod.py").write_text(KERNEL)
    out = run_triton(SCRIPT, REPO, tmp_path, tmp_path / "rec")
    assert "hook returned None" in out  # Triton goes on compiling as it would unrecorded
    (event,) = read_records(str(tmp_path / "rec"))
    assert event["module"] == "kmod" and event["qualname"] == "strided_kernel" and len(event["sha256"]) == 64
    rows, problems = merge_records([event], str(tmp_path))
    assert not problems
    spec = rows[1] if rows[1]["constexprs"].get("stride") else rows[0]
    assert spec["signature"] == "*fp16:16,i32:16" and spec["constexprs"] == {"BLOCK": 128, "stride": 1}
    assert spec["num_warps"] == 8 and spec["file"] == "kmod.py" and spec["enable_fp_fusion"] is False
    assert {r["signature"] for r in rows} == {"*fp16:16,i32:16", "*fp16,i32,i32"}
