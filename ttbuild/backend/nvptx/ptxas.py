"""PTX -> cubin with ptxas (the one `ttbuild.toolchain.ptxas_path` names): temp dir, ToolError with a repro command on failure."""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from pathlib import Path

from ttbuild.errors import ToolError
from ttbuild.target import DEFAULT_TARGET
from ttbuild.toolchain import ptxas_path


def assemble(ptx: bytes, arch: str = DEFAULT_TARGET.arch, options: list[str] | tuple[str, ...] = ()) -> bytes:
    """PTX -> cubin (ELF) with `ptxas -arch=<arch> <options> -o out.cubin in.ptx` in a temp dir.

    Raises ToolError with ptxas's stderr and a command line that reproduces the failure (the
    PTX is kept next to it, in a directory the error names).
    """
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
