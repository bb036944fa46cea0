"""The recorder's record of a tuned call (ttbuild.record.hook `_call_doc`) read off real Triton 3.6 Autotuner and Heuristics objects (the oracle interpreter, no GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracle import run_triton  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

KERNEL = '''import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 256}, num_warps=4)],
                 key=["n"], reset_to_zero=["out_ptr"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def tuned_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr, FLAG: tl.constexpr = 3):
    pass
'''

SCRIPT = '''
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import triton
from ttbuild.record import hook
import kmod


class T:  # what the recorder reads of a torch tensor
    def __init__(self, shape, stride, ptr):
        self.shape, self._stride, self.ptr, self.dtype = shape, stride, ptr, "torch.float16"

    def stride(self):
        return self._stride

    def data_ptr(self):
        return self.ptr


tuner = kmod.tuned_kernel
jit = tuner.fn.fn
grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]), meta["FLAG"])
doc = hook._call_doc(tuner, jit, (T([4, 256], [512, 1], 0x1008), T([1024], [1], 0x2000), 1024), {"scale": 0.5, "grid": grid, "warmup": False})
print(json.dumps(doc))
'''


def test_tuned_call_record_from_tritons_autotuner(tmp_path):
    (tmp_path / "kmod.py").write_text(KERNEL)
    doc = json.loads(run_triton(SCRIPT, REPO, tmp_path).splitlines()[-1])
    assert doc["args"] == {"x_ptr": {"tensor": {"shape": [4, 256], "stride": [512, 1], "dtype": "fp16", "align": 8}},
                           "out_ptr": {"tensor": {"shape": [1024], "stride": [1], "dtype": "fp16", "align": 0}},
                           "n": {"value": 1024}, "scale": {"value": 0.5}, "FLAG": {"value": 3}}
    assert [(c["kwargs"], c["num_warps"], per) for c, per in doc["per_config"]] == [
        ({"BLOCK": 64}, 2, {"grid": [16, 3], "constexprs": {"EVEN": True}}),
        ({"BLOCK": 256}, 4, {"grid": [4, 3], "constexprs": {"EVEN": True}})]
    assert doc["reset_to_zero"] == ["out_ptr"] and doc["restore_value"] == []
