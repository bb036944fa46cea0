"""The record files: one JSON object per line, appended with O_APPEND by any number of processes; read back tolerant of a torn last line.

Line kinds (field "event"):
  "compile": one specialization Triton compiled (or a served process missed):
      {"event", "module", "qualname", "kernel", "path" (absolute source file), "sha256" (of that
       file), "params" (every parameter name in order), "annotated" (names annotated
       tl.constexpr), "signature" ({name: "*fp16" | "i32" | "fp32" | "constexpr" ...}),
       "constants" ({name: value} of the constexpr entries; a dtype as {"dtype": name}),
       "div16" (names Triton marked tt.divisibility 16), "num_warps", "num_stages",
       "num_ctas", "maxnreg", "capability" ([major, minor] or null)}
  "autotune": one key an Autotuner tuned:
      {"event", "module", "qualname", "kernel", "path", "sha256", "key_names", "key" (values,
       then tensor dtypes as Triton's names), "config" ({"kwargs", "num_warps", "num_stages",
       "num_ctas", "maxnreg"}), "timings" ([[config, ms], ...])}
"""

from __future__ import annotations

import json
import os
import socket

ENV = "TTBUILD_RECORD"


def record_file(directory: str) -> str:
    """This process's file in `directory` (asked per write: a fork writes its own file)."""
    return os.path.join(directory, f"{socket.gethostname()}-{os.getpid()}.jsonl")


def append(directory: str, event: dict) -> None:
    """Append one line with a single write() on an O_APPEND descriptor: POSIX keeps lines of
    concurrent writers whole, so ranks sharing a file (a miss log) never interleave."""
    line = (json.dumps(event, sort_keys=True, separators=(",", ":"), default=str) + "\n").encode()
    path = directory if directory.endswith(".jsonl") else record_file(directory)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_records(*paths: str) -> list[dict]:
    """Every event of the given .jsonl files and directories of them. A line that does not
    parse (a process killed mid-write) is skipped."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".jsonl"))
        elif os.path.exists(p):
            files.append(p)
    events = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict) and ev.get("event") in ("compile", "autotune"):
                    events.append(ev)
    return events
