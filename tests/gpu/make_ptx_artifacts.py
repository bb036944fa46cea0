"""Writes a stand-in `artifacts/lib` from hand-written PTX (ptxas -> cubin + metadata JSON), to test the runtime on a GPU without the compiler.

Usage: python tests/gpu/make_ptx_artifacts.py OUT_DIR [PTXAS]
The kernels and variants mirror kernels/variants.toml (add_kernel fp32 / fp32 w8 / fp16, axpy
fp32 / fp16) and the metadata follows docs/CONTRACTS.md ("ttbuild.kernel/2"). Each program
handles BLOCK_SIZE elements with a strided per-thread loop: simple, not fast.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

HEAD = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry {name}(
\t.param .u64 p_x,
\t.param .u64 p_y,
\t.param .u64 p_out,
{scalar_params}\t.param .u32 p_n
)
.maxntid {threads}, 1, 1
{{
\t.reg .pred %p<3>;
\t.reg .b32 %r<10>;
\t.reg .b64 %rd<10>;
\t.reg .f32 %f<6>;
\t.reg .b16 %h<5>;
\tld.param.u64 %rd1, [p_x];
\tld.param.u64 %rd2, [p_y];
\tld.param.u64 %rd3, [p_out];
{scalar_loads}\tld.param.u32 %r1, [p_n];
\tcvta.to.global.u64 %rd1, %rd1;
\tcvta.to.global.u64 %rd2, %rd2;
\tcvta.to.global.u64 %rd3, %rd3;
\tmov.u32 %r2, %ctaid.x;
\tmul.lo.s32 %r3, %r2, {block};
\tmov.u32 %r4, %tid.x;
\tmov.u32 %r5, %ntid.x;
LOOP:
\tsetp.ge.u32 %p1, %r4, {block};
\t@%p1 bra DONE;
\tadd.s32 %r6, %r3, %r4;
\tsetp.ge.s32 %p2, %r6, %r1;
\t@%p2 bra DONE;
\tmul.wide.s32 %rd4, %r6, {esize};
\tadd.s64 %rd5, %rd1, %rd4;
\tadd.s64 %rd6, %rd2, %rd4;
\tadd.s64 %rd7, %rd3, %rd4;
{body}\tadd.s32 %r4, %r4, %r5;
\tbra LOOP;
DONE:
\tret;
}}
"""

BODIES = {
    ("add", "fp32"): "\tld.global.f32 %f1, [%rd5];\n\tld.global.f32 %f2, [%rd6];\n"
                     "\tadd.rn.f32 %f3, %f1, %f2;\n\tst.global.f32 [%rd7], %f3;\n",
    ("add", "fp16"): "\tld.global.b16 %h1, [%rd5];\n\tld.global.b16 %h2, [%rd6];\n"
                     "\tadd.rn.f16 %h3, %h1, %h2;\n\tst.global.b16 [%rd7], %h3;\n",
    ("axpy", "fp32"): "\tld.global.f32 %f1, [%rd5];\n\tld.global.f32 %f2, [%rd6];\n"
                      "\tfma.rn.f32 %f3, %f4, %f1, %f2;\n\tst.global.f32 [%rd7], %f3;\n",
    ("axpy", "fp16"): "\tld.global.b16 %h1, [%rd5];\n\tld.global.b16 %h2, [%rd6];\n"
                      "\tcvt.f32.f16 %f1, %h1;\n\tcvt.f32.f16 %f2, %h2;\n"
                      "\tfma.rn.f32 %f3, %f4, %f1, %f2;\n\tcvt.rn.f16.f32 %h3, %f3;\n"
                      "\tst.global.b16 [%rd7], %h3;\n",
}

VARIANTS = [  # (variant, op, dtype, BLOCK_SIZE, num_warps)
    ("add_kernel_fp32", "add", "fp32", 1024, 4),
    ("add_kernel_fp32_w8", "add", "fp32", 1024, 8),
    ("add_kernel_fp16", "add", "fp16", 1024, 4),
    ("axpy_fp32", "axpy", "fp32", 1024, 4),
    ("axpy_fp16", "axpy", "fp16", 2048, 8),
]


def default_ptxas() -> str:
    hits = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia",
                                  "cu13", "bin", "ptxas"))
    return hits[0] if hits else "ptxas"


def build(out_dir: str, ptxas: str) -> list[str]:
    lib = os.path.join(out_dir, "lib")
    os.makedirs(lib, exist_ok=True)
    made = []
    for variant, op, dt, block, warps in VARIANTS:
        kernel = f"{op}_kernel"
        axpy = op == "axpy"
        ptx = HEAD.format(
            name=kernel, threads=32 * warps, block=block, esize=4 if dt == "fp32" else 2,
            scalar_params="\t.param .f32 p_a,\n" if axpy else "",
            scalar_loads="\tld.param.f32 %f4, [p_a];\n" if axpy else "",
            body=BODIES[(op, dt)])
        ptx_path = os.path.join(lib, f"{variant}.ptx")
        with open(ptx_path, "w") as f:
            f.write(ptx)
        cubin = os.path.join(lib, f"{variant}.cubin")
        subprocess.run([ptxas, "-arch=sm_90a", "-O3", ptx_path, "-o", cubin], check=True)
        names = ["x_ptr", "y_ptr", "out_ptr" if axpy else "output_ptr"]
        params = [{"name": n, "kind": "pointer", "dtype": dt, "divisibility": 16} for n in names]
        if axpy:
            params.append({"name": "a", "kind": "scalar", "dtype": "fp32", "divisibility": 1})
        params += [{"name": "n_elements", "kind": "scalar", "dtype": "i32", "divisibility": 1},
                   {"name": "BLOCK_SIZE", "kind": "constexpr", "value": block}]
        sig = ",".join([f"*{dt}:16"] * 3 + (["fp32"] if axpy else []) + ["i32"])
        doc = {"schema": "ttbuild.kernel/2", "variant": variant, "kernel": kernel, "entry": kernel,
               "cubin": f"{variant}.cubin", "params": params, "signature": sig,
               "constexprs": {"BLOCK_SIZE": block}, "num_warps": warps, "num_ctas": 1,
               "num_stages": 3, "shared": 0, "target": "cuda:90", "arch": "sm_90a",
               "hashes": {}, "ttbuild_version": "0.1.0"}
        with open(os.path.join(lib, f"{variant}.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
        made.append(variant)
    return made


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else ".ptx_artifacts"
    print(build(out, sys.argv[2] if len(sys.argv) > 2 else default_ptxas()))
