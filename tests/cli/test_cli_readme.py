"""The README's commands against the code: each flag a documented `ttbuild COMMAND` line shows is in its --help; the help lists every command; the cache command's options."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ttbuild
from ttbuild.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "docs" / "CONTRACTS.md"]
COMMAND = re.compile(r"\bttbuild (build|list|explain|show|clean|cache|package|tune|record|serve)\b([^`\n]*)")
FLAG = re.compile(r"(?<![\w/-])(--?[a-zA-Z][\w-]*)")


def help_of(*argv: str) -> str:
    """What `ttbuild ARGV --help` prints (argparse exits 0 after printing)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0, out.getvalue()
    return out.getvalue()


def documented() -> list[tuple[str, str, str]]:
    """(where, command, text after it) for every `ttbuild COMMAND ...` of the docs."""
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for m in COMMAND.finditer(line):
                # what follows ` -- ` is the command `record`/`serve` run, not their flags
                found.append((f"{doc.name}:{n}", m.group(1), m.group(2).split(" -- ")[0]))
    return found


def test_the_docs_show_commands():
    assert {c for _, c, _ in documented()} >= {"build", "list", "explain", "show", "clean", "cache", "package", "tune", "record", "serve"}


@pytest.mark.parametrize("where, command, rest", documented(), ids=lambda x: str(x)[:40])
def test_every_flag_the_docs_show_exists(where, command, rest):
    """Each flag of a documented command line is one its --help lists (for `cache`, one of its
    subcommands named on the line, or any of them)."""
    if command == "cache":
        subs = re.findall(r"\b(stats|verify|prune)\b", rest) or ["stats", "verify", "prune"]
        text = help_of("cache") + "".join(help_of("cache", s) for s in subs)
    else:
        text = help_of(command)
    for flag in FLAG.findall(rest):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", text), f"{where}: {command} {rest.strip()!r}: {flag} is not in:\n{text}"


def test_help_lists_every_command():
    """Issue 32: `tune` and `cache verify --recompute` were missing from --help, and the cache
    command called itself `python -m ttbuild.cache`."""
    top = help_of()
    for command in ("build", "list", "explain", "show", "clean", "cache", "doit", "package", "tune", "record", "serve"):
        assert re.search(rf"^\s+{command}\s", top, re.M), top
    assert "--recompute" in top and "--recompute N" in help_of("cache", "verify")
    assert "usage: ttbuild cache" in help_of("cache") and "python -m" not in help_of("cache")
    assert "usage: ttbuild tune" in help_of("tune") and "usage: ttbuild package" in help_of("package")
    assert "usage: ttbuild record" in help_of("record") and "usage: ttbuild serve" in help_of("serve")


def test_cache_options_go_after_the_command_too(tmp_path, capsys):
    """`ttbuild cache stats --cache X` was refused (only `cache --cache X stats` parsed)."""
    remote = tmp_path / "remote"
    remote.mkdir()
    assert main(["cache", "stats", "--cache", str(remote), "--remote"]) == 0
    assert f"dir:{remote}:" in capsys.readouterr().out
    assert main(["cache", "--cache", str(remote), "stats", "--remote"]) == 0
    assert f"dir:{remote}:" in capsys.readouterr().out


def test_a_missing_key_file_under_recompute_is_a_message(tmp_path):
    """Issue 32: `cache verify --recompute` with TTBUILD_CACHE_HMAC_KEY_FILE naming no file
    raised a traceback (the cache was opened outside the command's error handling)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TTBUILD_CACHE_DIR": str(tmp_path / "c"),
           "TTBUILD_CACHE_HMAC_KEY_FILE": str(tmp_path / "nope")}
    run = subprocess.run([sys.executable, "-m", "ttbuild", "cache", "verify", "--recompute", "1"],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"TTBUILD_CACHE_HMAC_KEY_FILE {tmp_path / 'nope'}: No such file" in run.stderr


def test_compilation_error_is_exported():
    from ttbuild.errors import CompilationError

    assert ttbuild.CompilationError is CompilationError and "CompilationError" in ttbuild.__all__


def test_the_defaults_the_readme_states_are_the_code_s(monkeypatch):
    """The figures the README gives for settings are the code's defaults (issue 32: stale figures)."""
    from ttbuild.cache.base import DEFAULT_MAX_BLOB_BYTES
    from ttbuild.cache.http import HttpCache
    from ttbuild.frontend.controlflow import MAX_STATIC_UNROLL
    from ttbuild.limits import DEFAULT_MEMORY, DEFAULT_SECONDS

    text = " ".join((REPO / "README.md").read_text().split())

    def stated(pattern: str) -> str:
        m = re.search(pattern, text)
        assert m, f"the README no longer says {pattern!r}"
        return m.group(1)

    monkeypatch.delenv("TTBUILD_CACHE_DEADLINE", raising=False)
    assert float(stated(r"`TTBUILD_CACHE_DEADLINE`, (\d+) s\)")) == HttpCache("http://127.0.0.1:9/c").deadline
    assert int(stated(r"`TTBUILD_CACHE_MAX_BLOB_BYTES` \((\d+) MiB\)")) << 20 == DEFAULT_MAX_BLOB_BYTES
    assert float(stated(r"`TTBUILD_STAGE_TIMEOUT` seconds \((\d+)\)")) == DEFAULT_SECONDS
    assert int(stated(r"`TTBUILD_STAGE_MEMORY` resident bytes \(`(\d+)G`")) << 30 == DEFAULT_MEMORY
    assert int(stated(r"`TTBUILD_MAX_STATIC_UNROLL`, ([\d,]+),").replace(",", "")) == MAX_STATIC_UNROLL
