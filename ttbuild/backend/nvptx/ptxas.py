"""PTX -> cubin with ptxas (`ttbuild.toolchain.ptxas_path`): ToolError with a repro command on failure; a `.reqntid` kernel starved of registers retried with `.maxnreg`."""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from ttbuild.backend.nvptx.cubin_info import kernel_resources
from ttbuild.errors import ToolError
from ttbuild.target import DEFAULT_TARGET
from ttbuild.toolchain import ptxas_path

_REQNTID = re.compile(rb"^\.reqntid (\d+)(?:, 1, 1)?\s*$", re.M)
_MAXNTID = re.compile(rb"^\.maxntid (\d+)(?:, 1, 1)?\s*$", re.M)
_MAXNREG = re.compile(rb"^\.maxnreg (\d+)\s*$", re.M)


def assemble(ptx: bytes, arch: str = DEFAULT_TARGET.arch, options: list[str] | tuple[str, ...] = ()) -> bytes:
    """PTX -> cubin (ELF) with `ptxas -arch=<arch> <options> -o out.cubin in.ptx` in a temp dir.

    A kernel that states `.reqntid` and no register directive (ours with tensor cores, as
    Triton's) and that ptxas made spill while leaving registers unused is assembled again with
    `.maxnreg` = its threads' share of the 64K register file (at most 255), and the cubin with the
    smaller stack frame is kept: under `.reqntid` alone ptxas (12.8, 13.0) may aim at full
    occupancy once a kernel must spill (an fp8 64x128x128 GEMM on mma.sync, 4 warps: 32
    registers and a 2984-byte frame, Triton's PTX alike; 255 and 1400 bytes with the cap). A
    kernel that does not spill is assembled once, so its cubin is what ptxas gives its PTX.

    Raises ToolError with ptxas's stderr and a command line that reproduces the failure (the
    PTX is kept next to it, in a directory the error names).
    """
    cubin = _ptxas(ptx, arch, options)
    regs, frame = kernel_resources(cubin)
    capped = register_retry(ptx, regs, frame, options)
    if capped is None:
        return cubin
    other = _ptxas(capped, arch, options)
    return other if kernel_resources(other)[1] < frame else cubin


def register_retry(ptx: bytes, regs: int, frame: int, options=()) -> bytes | None:
    """The PTX to assemble again when ptxas gave it `regs` registers and a `frame`-byte stack
    frame: `.maxnreg` after its `.reqntid` when that alone left registers to spare, or, for a
    `.maxntid` kernel that spilled at its `.maxnreg` cap, the cap raised to its threads' share;
    None otherwise (no stack, -maxrregcount, registers to spare under the cap, no directive)."""
    if frame == 0 or any("maxrregcount" in o for o in options):
        return None
    m, given = _REQNTID.search(ptx), _MAXNREG.search(ptx)
    if m is None:
        # A `.maxntid` kernel under the llir stage's occupancy cap (emit.max_registers: 128 at 8
        # warps) that spilled at the cap: the threads' whole share instead, as Triton sets no cap
        # (a library's int8 row quantizer, 8 warps: 128 registers and a 96-byte frame; Triton 111, 0).
        n = _MAXNTID.search(ptx)
        if n is None or given is None:
            return None
        cap = min(255, 65536 // int(n.group(1)))
        if regs < int(given.group(1)) or int(given.group(1)) >= cap:
            return None
        return _MAXNREG.sub(b".maxnreg " + str(cap).encode(), ptx, count=1)
    if given is not None:
        return None
    cap = min(255, 65536 // int(m.group(1)))
    if regs >= cap:
        return None
    return _REQNTID.sub(lambda r: r.group(0).rstrip() + b"\n.maxnreg " + str(cap).encode(), ptx, count=1)


def _ptxas(ptx: bytes, arch: str, options) -> bytes:
    exe = ptxas_path()
    with tempfile.TemporaryDirectory(prefix="ttbuild-ptxas-") as tmp:
        src, dst = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_bytes(ptx)
        cmd = [str(exe), f"-arch={arch}", *options, "-o", str(dst), str(src)]
        proc = subprocess.run(cmd, capture_output=True)
        if proc.returncode != 0 or not dst.is_file():
            keep = Path(tempfile.mkdtemp(prefix="ttbuild-ptxas-failed-"))
            (keep / "kernel.ptx").write_bytes(ptx)
            cmd[-1], cmd[-2] = str(keep / "kernel.ptx"), str(keep / "kernel.cubin")
            err = proc.stderr.decode(errors="replace").replace(str(tmp), str(keep))
            raise ToolError("ptxas", err or f"exit status {proc.returncode}", shlex.join(cmd))
        return dst.read_bytes()
