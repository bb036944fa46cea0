"""The skip summary (tests/skips.py) names the cause of each kind of skip this suite has."""

from __future__ import annotations

from skips import cause, summary


def test_each_skip_reason_of_the_suite_names_its_cause():
    assert cause("needs an NVIDIA GPU (cuda.bindings found none)").startswith("need an NVIDIA GPU")
    assert cause("could not import 'torch': No module named 'torch'").startswith("need an NVIDIA GPU")
    assert cause("triton is not importable and TTBUILD_TRITON_PYTHON is not set").startswith("need the Triton oracle")
    assert cause("could not import 'triton': No module named 'triton'").startswith("need the Triton oracle")
    assert cause("no nginx with --with-http_dav_module on PATH (apt-get install -y nginx)").startswith("need nginx")
    assert cause("no C launch path here: python (no C compiler)").startswith("need a C compiler")
    assert cause("something else") == "something else"


def test_the_summary_counts_by_cause_most_first():
    lines = summary(["no nginx x", "needs an NVIDIA GPU", "needs an NVIDIA GPU", "could not import 'triton'"])
    assert lines[0].split(None, 1) == ["2", "need an NVIDIA GPU or torch with CUDA (run on a GPU machine)"]
    assert len(lines) == 3
