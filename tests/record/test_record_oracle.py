"""The recorder against real Triton 3.6 (the oracle interpreter, no GPU): the hook it installs in `knobs.runtime.jit_cache_hook` reads what Triton's own `_call_hook` passes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracle import ROW_SOURCE, run_triton  # noqa: E402

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


# The serve test project's kernel (tests/data/serve_proj), without the torch host code beside it:
# the oracle Python has no torch.
_SERVED = (REPO / "tests" / "data" / "serve_proj" / "servepkg" / "rowscale.py").read_text()
ROWSCALE = "import triton\nimport triton.language as tl\n\n\n" + _SERVED[_SERVED.index("@triton.jit"):_SERVED.index("\n\n\ndef rowscale(")] + "\n"

# Triton's _call_hook for two specializations: w_ptr None and OUT_DTYPE tl.float16 (fp16 data), a
# w_ptr tensor and OUT_DTYPE tl.float32; the recorder writes what it is given.
RECORD_NONE_DTYPE = '''
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import triton.language as tl
from triton import knobs
from triton.backends.nvidia.compiler import CUDAOptions
from ttbuild.record import hook
hook._capability = lambda: [9, 0]
hook.install(sys.argv[3])
import kmod
k = kmod.rowscale_kernel
div = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
for ty, out, w in (("*fp16", tl.float16, None), ("*fp32", tl.float32, "*fp32")):
    sig = {"x_ptr": ty, "out_ptr": ty, "n_cols": "i32", "row_stride": "i32", "OUT_DTYPE": "constexpr", "BLOCK": "constexpr",
           "w_ptr": w or "constexpr"}
    constants = {(4,): out, (5,): 128, **({(6,): None} if w is None else {})}
    k._call_hook(knobs.runtime.jit_cache_hook, ("key", list(sig.values())), sig, 0, constants, CUDAOptions(num_warps=4),
                 [{**div, **({} if w is None else {(6,): [["tt.divisibility", 16]]})}], False)
'''

# Triton builds each row from the source (a dtype constexpr as the tl.dtype, None as None) and from
# our TTIR; prints the op counts of both TTGIRs.
COMPARE = ROW_SOURCE + r'''
out = []
for job in json.loads(sys.argv[2]):
    theirs = triton.compile(row_source(mod.rowscale_kernel, job["signature"], job["constexprs"]), target=target).asm["ttgir"]
    ours = triton.compile(job["ttir"], target=target).asm["ttgir"]
    out.append([ops(theirs), ops(ours)])
print(json.dumps(out))
'''


def test_none_and_dtype_rows_build_as_triton_builds_them(tmp_path):
    """Record (Triton's own hook arguments) -> rows ({ none = true }, { dtype = "fp16" }) -> the
    build's reading of them -> our TTIR: Triton 3.6 builds the same kernel from the source."""
    import json

    from ttbuild.graph.variants import load_variants
    from ttbuild.record import rows_text
    from ttbuild.stages import parse, ttir

    (tmp_path / "kmod.py").write_text(ROWSCALE)
    run_triton(RECORD_NONE_DTYPE, REPO, tmp_path, tmp_path / "rec")
    events = read_records(str(tmp_path / "rec"))
    assert sorted(json.dumps(e["constants"]["OUT_DTYPE"]) for e in events) == ['{"dtype": "fp16"}', '{"dtype": "fp32"}']
    rows, problems = merge_records(events, str(tmp_path))
    assert not problems and len(rows) == 4
    text = rows_text(rows)
    assert 'OUT_DTYPE = { dtype = "fp16" }' in text and "w_ptr = { none = true }" in text
    (tmp_path / "variants.toml").write_text(text)
    jobs = []
    for v in load_variants(tmp_path):
        assert v.constexprs["OUT_DTYPE"] in ({"dtype": "fp16"}, {"dtype": "fp32"})
        assert ("w_ptr" in v.constexprs) == (v.constexprs["OUT_DTYPE"] == {"dtype": "fp16"})
        p = parse.run({"source": ROWSCALE.encode()}, {"kernel": v.kernel, "file": "kmod.py"})
        path = tmp_path / f"{v.name}.ttir"
        path.write_bytes(ttir.run({"json": p["json"]}, {"signature": [str(e) for e in v.params], "constexprs": v.constexprs})["ttir"])
        jobs.append({"signature": v.signature, "constexprs": v.constexprs, "ttir": str(path)})
    out = json.loads(run_triton(COMPARE, str(tmp_path / "kmod.py"), json.dumps(jobs)).splitlines()[-1])
    assert len(out) == 4 and all(theirs == ours for theirs, ours in out), json.dumps(out, indent=1)
    # `if w_ptr is not None:` folded: one load with None, two with a pointer (Triton's count)
    assert sorted(theirs["tt.load"] for theirs, _ in out) == [1, 1, 2, 2]
