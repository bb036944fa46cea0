"""Why tests skipped, in a few words: the pytest summary's one line per cause (a GPU, the Triton oracle, nginx, a C compiler, a built library), so "N skipped" is never unexplained."""

from __future__ import annotations

import re
from collections import Counter

# (cause, pattern over the skip reason): the first that matches names the cause
CAUSES = (
    ("need an NVIDIA GPU or torch with CUDA (run on a GPU machine)",
     r"GPU|CUDA|cuda\.bindings|torch|float8|triton\.tools\.tensor_descriptor"),
    ("need the Triton oracle (export TTBUILD_TRITON_PYTHON=/path/to/python-with-triton)",
     r"TTBUILD_TRITON_PYTHON|triton"),
    ("need nginx with the WebDAV module (apt-get install -y nginx)", r"nginx"),
    ("need a C compiler and Python's headers (the C launch path)", r"C launch|C compiler|launcher"),
    ("need the library built first (ttbuild build)", r"doit|not in the library|no .*lib|built|build_test_artifacts"),
)


def cause(reason: str) -> str:
    """The cause of one skip reason (CAUSES), else the reason itself."""
    for name, pattern in CAUSES:
        if re.search(pattern, reason):
            return name
    return reason


def summary(reasons) -> list[str]:
    """One line per cause, most frequent first: "  412 need an NVIDIA GPU ..."."""
    counts = Counter(cause(r) for r in reasons)
    return [f"{n:>5} {name}" for name, n in counts.most_common()]


def reason_of(report) -> str:
    """The reason text of a skipped test's report (pytest keeps (file, line, "Skipped: why"))."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")
