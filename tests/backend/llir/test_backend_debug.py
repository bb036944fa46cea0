"""Debug builds on the CPU. What is checked:

`debug` keys ttir only when on, tt.print/tt.assert lower to vprintf/__assertfail with Triton's
formats, and debug variants build through cubin (here and through the CLI).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from ttbuild import tma
from ttbuild.graph.keys import stage_key, stage_options
from ttbuild.graph.variants import load_variants
from ttbuild.stages import DEFAULT, cubin, llir, parse, ptx, ttgir, ttir

REPO = Path(__file__).resolve().parents[3]
GPU_KERNELS = REPO / "tests" / "data" / "gpu_kernels"
SOURCE = GPU_KERNELS / "debug_ops.py"

# Test-only debug kernels for the GPU (tests/gpu/test_gpu_debug.py): name -> (kernel, signature,
# constexprs, num_warps). One element per thread (128 elements, 4 warps), as Triton's layout.
DEBUG_KERNELS = {
    "print_kernel": ("print_kernel", "*i32:16,*fp32:16,i32", {"BLOCK": 128}, 4),
    "assert_kernel": ("assert_kernel", "*i32:16,i32", {"BLOCK": 128}, 4),
}


def build_debug(name: str, *, debug: bool = True, with_loc: bool = True, until: str = "cubin") -> dict:
    """Every stage output of a DEBUG_KERNELS entry, built from SOURCE (file named as in the
    test library) with the ttir stage reading the parse `loc` table as a debug build does."""
    kernel, signature, constexprs, warps = DEBUG_KERNELS[name]
    p = parse.run({"source": SOURCE.read_bytes()}, {"kernel": kernel, "file": SOURCE.name})
    opts = {"signature": signature.split(","), "constexprs": constexprs, **({"debug": True} if debug else {})}
    inputs = {"json": p["json"], **({"loc": p["loc"]} if with_loc else {})}
    out = {"loc": p["loc"], "ttir": ttir.run(inputs, opts)["ttir"]}
    out["ttgir"] = ttgir.run({"ttir": out["ttir"]}, {"num_warps": warps, "num_ctas": 1, "num_stages": 3,
                                                     "target": "cuda:90"})["ttgir"]
    out["llir"] = llir.run({"ttgir": out["ttgir"]}, {"target": "cuda:90", "enable_fp_fusion": True,
                                                     "debug": debug})["llir"]
    if until == "llir":
        return out
    out["ptx"] = ptx.run({"llir": out["llir"]}, {"arch": "sm_90a", "ptx_version": 90})["ptx"]
    out["cubin"] = cubin.run({"ptx": out["ptx"]}, {"arch": "sm_90a", "ptxas_options": []})["cubin"]
    return out


def source_line(fragment: str) -> int:
    (line,) = [i + 1 for i, text in enumerate(SOURCE.read_text().splitlines()) if fragment in text]
    return line


def formats(llir_text: str) -> list[str]:
    """The printf format strings of an LLVM module (`c"...\\0A\\00"` constants), decoded."""
    found = re.findall(r'@printfFormat_\d+ = internal (?:unnamed_addr )?constant \[\d+ x i8\] c"(.*?)\\00"', llir_text)
    return sorted(f.replace("\\0A", "\n") for f in found)


# ---- keys ---------------------------------------------------------------------------------------


def test_ttir_key_takes_debug_only_when_on():
    v = load_variants(REPO / "kernels")[0]
    assert not v.debug
    versions = DEFAULT.versions
    plain = stage_options(v)
    assert "debug" not in plain["ttir"]
    parse_key = stage_key("", "parse", versions["parse"], plain["parse"])
    # A non-debug variant's ttir key is what it was before ttir knew about debug (its options:
    # signature, constexprs, and `tma` where the target has it).
    tma_on = {"tma": True} if tma.enabled(v.capability, v.disable_tma) else {}
    old_key = stage_key(parse_key, "ttir", versions["ttir"],
                        {"signature": [str(p) for p in v.params], "constexprs": dict(v.constexprs), **tma_on})
    assert stage_key(parse_key, "ttir", versions["ttir"], plain["ttir"]) == old_key
    dbg = stage_options(v.with_options(debug=True))
    assert dbg["ttir"]["debug"] is True and dbg["parse"] == plain["parse"]
    assert stage_key(parse_key, "ttir", versions["ttir"], dbg["ttir"]) != old_key
    wiring = {s.stage.name: dict(s.inputs) for s in DEFAULT.plan("llir", None, dbg)}
    assert wiring["ttir"] == {"json": ("parse", "json"), "loc": ("parse", "loc")}
    assert wiring["llir"] == {"ttgir": ("ttgir", "ttgir")}
    assert {s.stage.name: dict(s.inputs) for s in DEFAULT.plan("ttir", None, plain)}["ttir"] == {"json": ("parse", "json")}


# ---- tt.print ---------------------------------------------------------------------------------


def test_print_lowers_to_vprintf_with_tritons_format():
    text = build_debug("print_kernel", until="llir")["llir"].decode()
    assert re.search(r"declare i32 @vprintf\(ptr, ptr\)", text)
    assert formats(text) == sorted([
        "pid (%u, %u, %u) idx (%3u) x: %i\n",
        "pid (%u, %u, %u) idx () n: %i\n",
        "pid (%u, %u, %u) idx (%3u) pair: (operand 0) %i\n",
        "pid (%u, %u, %u) idx (%3u) pair: (operand 1) %f\n",
        "pid (%u, %u, %u) idx (%3u) hx: 0x%08x\n",
    ])
    # 128 elements over 128 threads: one call per element a thread holds, per print operand.
    assert text.count("call i32 @vprintf") == 5


def test_print_formats_equal_tritons(tmp_path):
    """Oracle: Triton 3.6 compiles the same kernel to the same set of printf formats."""
    from oracle import run_triton

    script = """
import sys, importlib.util, json, re, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("dbgk", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
src = ASTSource(fn=m.print_kernel, signature={"x_ptr": "*i32", "f_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                constexprs={"BLOCK": 128})
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print(k.asm["llir"])
"""
    theirs = formats(run_triton(script, str(SOURCE)))
    ours = formats(build_debug("print_kernel", until="llir")["llir"].decode())
    assert ours == theirs


# ---- tt.assert ------------------------------------------------------------------------------


def test_assert_calls_assertfail_with_file_line_and_kernel():
    out = build_debug("assert_kernel")
    text = out["llir"].decode()
    line = source_line('tl.device_assert(x < 100, "x too big"')
    m = re.search(r"call void @__assertfail\(ptr nonnull @(\w+), ptr nonnull @(\w+), i32 (\d+), "
                  r"ptr nonnull @(\w+), i64 1\)", text)
    assert m, text
    strings = dict(re.findall(r'@(\w+) = internal (?:unnamed_addr )?constant \[\d+ x i8\] c"(.*?)\\00"', text))
    assert (strings[m[1]], strings[m[2]], int(m[3]), strings[m[4]]) == \
        ("x too big", "debug_ops.py", line, "assert_kernel")
    assert re.search(r"call(\.uni)?\s.*__assertfail", out["ptx"].decode())
    assert out["cubin"][:4] == b"\x7fELF"


def test_assert_without_a_loc_table_names_unknown_like_triton():
    text = build_debug("assert_kernel", with_loc=False, until="llir")["llir"].decode()
    assert re.search(r'c"unknown\\00"', text)
    assert re.search(r"@__assertfail\(.*i32 0,", text)


def test_no_assert_without_debug_but_print_stays():
    a = build_debug("assert_kernel", debug=False)
    assert b'"tt.assert"' not in a["ttir"] and b"__assertfail" not in a["ptx"]
    p = build_debug("print_kernel", debug=False)
    assert b"vprintf" in p["ptx"] and p["cubin"][:4] == b"\x7fELF"


# ---- through the build graph -------------------------------------------------------------------


def test_cli_builds_a_debug_variant_through_cubin(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / SOURCE.name).write_bytes(SOURCE.read_bytes())
    (kernels / "variants.toml").write_text(
        '[[variant]]\nname = "assert_debug"\nfile = "debug_ops.py"\nkernel = "assert_kernel"\n'
        'signature = "*i32:16,i32"\nconstexprs = { BLOCK = 128 }\ndebug = true\n\n'
        '[[variant]]\nname = "assert_plain"\nfile = "debug_ops.py"\nkernel = "assert_kernel"\n'
        'signature = "*i32:16,i32"\nconstexprs = { BLOCK = 128 }\n')
    out = tmp_path / "artifacts"
    proc = subprocess.run([sys.executable, "-m", "ttbuild", "build", str(kernels), "-o", str(out), "--cache", "off"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = {n: json.loads((out / "lib" / f"{n}.json").read_text()) for n in ("assert_debug", "assert_plain")}
    assert docs["assert_debug"]["hashes"]["parse"] == docs["assert_plain"]["hashes"]["parse"]
    assert docs["assert_debug"]["hashes"]["ttir"] != docs["assert_plain"]["hashes"]["ttir"]
    ptxs = [p.read_bytes() for p in (out / "ptx").rglob("*.ptx")]
    assert sum(b"__assertfail" in p for p in ptxs) == 1 and len(ptxs) == 2
    assert (out / "lib" / "assert_debug.cubin").read_bytes()[:4] == b"\x7fELF"


def test_blank_line_edit_reruns_the_debug_ttir_only(tmp_path):
    """A debug ttir reads the parse loc table (ttbuild.stages: the ttir stage's `extra`), so after a blank line
    above the assert its TTIR names the new line; the non-debug variant's ttir stays untouched."""
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    src = kernels / SOURCE.name
    src.write_bytes(SOURCE.read_bytes())
    (kernels / "variants.toml").write_text(
        '[[variant]]\nname = "assert_debug"\nfile = "debug_ops.py"\nkernel = "assert_kernel"\n'
        'signature = "*i32:16,i32"\nconstexprs = { BLOCK = 128 }\ndebug = true\n\n'
        '[[variant]]\nname = "assert_plain"\nfile = "debug_ops.py"\nkernel = "assert_kernel"\n'
        'signature = "*i32:16,i32"\nconstexprs = { BLOCK = 128 }\n')
    out = tmp_path / "artifacts"
    build = [sys.executable, "-m", "ttbuild", "build", str(kernels), "-o", str(out), "--cache", "off"]

    def ttirs():
        return {p: (p.read_text(), p.stat().st_mtime_ns) for p in (out / "ttir").rglob("*.ttir")}

    proc = subprocess.run(build, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = source_line("tl.device_assert(x < 100")
    before = ttirs()
    (debug_path,) = [p for p, (t, _) in before.items() if "tt.assert" in t]
    assert f'"debug_ops.py":{line}:' in before[debug_path][0]
    src.write_text("\n" + src.read_text())
    proc = subprocess.run(build, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = ttirs()
    assert f'"debug_ops.py":{line + 1}:' in after[debug_path][0]
    # the plain variant's TTIR file was not even rewritten (same bytes, same mtime)
    assert {p: v for p, v in after.items() if p != debug_path} == {p: v for p, v in before.items() if p != debug_path}
