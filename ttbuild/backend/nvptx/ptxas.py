"""PTX -> cubin with ptxas (`ttbuild.toolchain.ptxas_path`): ToolError with a repro on failure; its notes as warnings; a register cap only where it costs no CTA per SM."""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
import warnings
from pathlib import Path

from ttbuild.backend.nvptx.cubin_info import kernel_resources
from ttbuild.errors import CompilerWarning, ToolError
from ttbuild.target import DEFAULT_TARGET, Target
from ttbuild.toolchain import ptxas_path

_REQNTID = re.compile(rb"^\.reqntid (\d+)(?:, 1, 1)?\s*$", re.M)
_MAXNTID = re.compile(rb"^\.maxntid (\d+)(?:, 1, 1)?\s*$", re.M)
_MAXNREG = re.compile(rb"^\.maxnreg (\d+)[ \t]*\r?\n", re.M)
_SETMAXNREG = re.compile(rb"^[ \t]*setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32 \d+;[ \t]*\r?\n", re.M)
SERIALIZED = "wgmma.mma_async instructions are serialized"  # ptxas's C75xx performance notes


def assemble(ptx: bytes, arch: str = DEFAULT_TARGET.arch, options: list[str] | tuple[str, ...] = ()) -> bytes:
    """PTX -> cubin (ELF) with `ptxas -arch=<arch> <options> -o out.cubin in.ptx` in a temp dir
    (a starved `.reqntid` kernel retried with a cap).

    A `.maxntid` kernel under the llir stage's `.maxnreg` cap (emit.max_registers) keeps that
    cap only where it costs no CTA per SM against the PTX without it (_within_occupancy). A
    kernel that states `.reqntid` and no register directive (ours with tensor cores, as
    Triton's) and that ptxas made spill while leaving registers unused is assembled again with
    `.maxnreg` = its threads' share of the 64K register file (at most 255), and the cubin with
    the smaller stack frame is kept: under `.reqntid` alone ptxas (12.8, 13.0) may aim at full
    occupancy once a kernel must spill (an fp8 64x128x128 GEMM on mma.sync, 4 warps: 32
    registers and a 2984-byte frame, Triton's PTX alike; 255 and 1400 bytes with the cap).
    A warp-specialized kernel whose register plan aims at two CTAs an SM (llir.control_flow.
    register_plan: `.maxnreg` and `setmaxnreg`) keeps it unless ptxas serializes its wgmma or
    spills under it; then the one-CTA form (neither directive: every warp up to 255 registers)
    is assembled too and kept when it does neither (a 4-warp attention consumer at d128 needs
    250 registers, more than the plan's 216).
    Other kernels are assembled once, so their cubin is what ptxas gives their PTX.

    What ptxas prints while assembling the kept cubin (without -v: its "Potential Performance
    Loss" notes, e.g. C7514, every wgmma of the kernel serialized because other instructions
    touch an accumulator in flight, and its warnings) is warned as a CompilerWarning at the
    kernel's `def` (node 0): a silent halving of a tensor-core kernel's speed becomes a line of
    the build's output.

    Raises ToolError with ptxas's stderr and a command line that reproduces the failure (the
    PTX is kept next to it, in a directory the error names).
    """
    notes: dict[bytes, list[str]] = {}
    cubin = _choose(ptx, arch, options, notes)
    for text in notes.get(cubin, ()):
        warnings.warn(CompilerWarning(f"ptxas: {text}", node_id=0), stacklevel=2)
    return cubin


def _choose(ptx: bytes, arch: str, options, notes: dict) -> bytes:
    """The cubin assemble keeps (see there); `notes` receives ptxas's messages per cubin."""
    capped = _MAXNTID.search(ptx) is not None and _MAXNREG.search(ptx) is not None
    if capped and not any("maxrregcount" in o for o in options):
        return _within_occupancy(ptx, arch, options, notes)
    cubin = _ptxas(ptx, arch, options, notes)
    if _two_ctas_planned(ptx):
        return _plan_or_one_cta(ptx, cubin, arch, options, notes)
    regs, frame = kernel_resources(cubin)
    retry = register_retry(ptx, regs, frame, options)
    if retry is None:
        return cubin
    other = _ptxas(retry, arch, options, notes)
    return other if kernel_resources(other)[1] < frame else cubin


def _within_occupancy(ptx: bytes, arch: str, options, notes: dict) -> bytes:
    """A `.maxntid` kernel under the llir stage's `.maxnreg` cap: its cubin as given unless that
    fits fewer CTAs per SM, or spills more, than the PTX without the cap (Triton's form, which
    states no register directive); then the cubin under the cap that keeps the directive-less
    CTAs per SM (occupancy_cap), when that cap leaves ptxas registers to spend and spills no
    more, else the directive-less cubin. A kernel whose capped cubin already fits the most CTAs
    an SM holds is assembled once.

    Why: without a register directive ptxas 13.0 keeps few loads in flight in some of our
    kernels (layer norm w4: 4 of 8 16-byte loads a pass, 0.82x Triton; under `.maxnreg` all 8,
    1.04x, benchmarks/RESULTS_backend.md), but the cap lets ptxas spend registers that cost
    CTAs per SM, so that a project's kernels ran slower than Triton's build of the same source:
    a one-row layer norm forward (w8) 47 -> 56 registers, 5 -> 4 CTAs, 0.89x; a group norm
    forward (w4) 48 -> 80, 10 -> 6, 0.93x; a DyT backward (w16, 4 x 132 CTAs) 30 -> 38, 4 -> 3
    CTAs per SM, two waves, 0.82x (H200). Triton's PTX of each gives the directive-less count."""
    threads = int(_MAXNTID.search(ptx).group(1))
    capped = _ptxas(ptx, arch, options, notes)
    regs_c, frame_c = kernel_resources(capped)
    if not frame_c and ctas_per_sm(regs_c, threads, arch) == ctas_per_sm(1, threads, arch):
        return capped
    plain = _ptxas(_MAXNREG.sub(b"", ptx, count=1), arch, options, notes)
    regs, frame = kernel_resources(plain)
    if frame_c <= frame and ctas_per_sm(regs_c, threads, arch) >= ctas_per_sm(regs, threads, arch):
        return capped
    if frame:
        return plain if frame < frame_c else capped
    cap = occupancy_cap(regs, threads, int(_MAXNREG.search(ptx).group(1)), arch)
    if cap <= _granule(regs):  # no register left to spend without losing a CTA per SM
        return plain
    other = _ptxas(_MAXNREG.sub(b".maxnreg " + str(cap).encode() + b"\n", ptx, count=1), arch, options, notes)
    return other if not kernel_resources(other)[1] else plain


def _two_ctas_planned(ptx: bytes) -> bool:
    """Whether `ptx` moves registers with setmaxnreg under a `.maxnreg` that leaves room for two
    CTAs of its `.reqntid` threads on an SM (register_plan's 8-warp block)."""
    m, cap = _REQNTID.search(ptx), _MAXNREG.search(ptx)
    return (m is not None and cap is not None and _SETMAXNREG.search(ptx) is not None
            and 2 * int(m.group(1)) * int(cap.group(1)) <= 65536)


def _plan_or_one_cta(ptx: bytes, cubin: bytes, arch: str, options, notes: dict) -> bytes:
    """`cubin` (the planned two-CTA form of `ptx`) unless ptxas serialized its wgmma or gave it a
    stack frame; then the one-CTA form when that has neither (see assemble)."""
    frame = kernel_resources(cubin)[1]
    if not frame and not any(SERIALIZED in t for t in notes.get(cubin, ())):
        return cubin
    one = _ptxas(_SETMAXNREG.sub(b"", _MAXNREG.sub(b"", ptx, count=1)), arch, options, notes)
    if kernel_resources(one)[1] or any(SERIALIZED in t for t in notes.get(one, ())):
        return cubin
    return one


# Registers are allocated per warp in units of 256 (8 a thread); every capability has 64K a SM.
def _granule(regs: int) -> int:
    return -(-max(regs, 1) // 8) * 8


def ctas_per_sm(regs: int, threads: int, arch: str = DEFAULT_TARGET.arch) -> int:
    """CTAs of `threads` threads that fit on one SM of `arch` (`sm_90a`) at `regs` registers a
    thread, by registers, resident warps and resident CTAs (shared memory not counted)."""
    max_warps, max_ctas = Target.from_arch(arch).sm_residency
    warps = -(-threads // 32)
    by_regs = 65536 // (_granule(regs) * 32) // warps
    return min(by_regs, max_warps // warps, max_ctas)


def occupancy_cap(regs: int, threads: int, given: int, arch: str = DEFAULT_TARGET.arch) -> int:
    """The `.maxnreg` for a kernel of `threads` threads that ptxas gave `regs` registers without a
    directive: the most registers (a multiple of 8, at most `given`, the llir stage's cap) at
    which as many CTAs per SM fit as at `regs`."""
    ctas = max(1, ctas_per_sm(regs, threads, arch))
    warps = -(-threads // 32)
    return min(given, 255, 65536 // (ctas * warps * 32) // 8 * 8)


def register_retry(ptx: bytes, regs: int, frame: int, options=()) -> bytes | None:
    """The PTX to assemble again when ptxas gave it `regs` registers and a `frame`-byte stack
    frame: `.maxnreg` after its `.reqntid` when that alone left registers to spare; None
    otherwise (no stack, -maxrregcount, registers all used, a register directive already, no
    `.reqntid`). `.maxntid` kernels under a cap take _within_occupancy instead."""
    if frame == 0 or any("maxrregcount" in o for o in options):
        return None
    m, given = _REQNTID.search(ptx), _MAXNREG.search(ptx)
    if m is None or given is not None:
        return None
    cap = min(255, 65536 // int(m.group(1)))
    if regs >= cap:
        return None
    return _REQNTID.sub(lambda r: r.group(0).rstrip() + b"\n.maxnreg " + str(cap).encode(), ptx, count=1)


def _ptxas(ptx: bytes, arch: str, options, notes: dict | None = None) -> bytes:
    """One ptxas run; its messages on success go to `notes[cubin]` (the temp paths dropped)."""
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
        cubin = dst.read_bytes()
        if notes is not None:
            notes[cubin] = _messages(proc.stderr.decode(errors="replace"), tmp)
        return cubin


_PREFIX = re.compile(r"^ptxas\s*(?:info|warning)?\s*:\s*")


def _messages(stderr: str, tmp: str) -> list[str]:
    """ptxas's lines of a successful run, its `ptxas info    : ` prefix and temp paths dropped."""
    out = []
    for line in stderr.splitlines():
        line = _PREFIX.sub("", line.strip().replace(str(Path(tmp) / "kernel.ptx"), "kernel.ptx"))
        if line:
            out.append(line)
    return out
