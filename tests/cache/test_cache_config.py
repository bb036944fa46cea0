"""open_cache URL/env parsing, the layered cache over a shared directory, and run_cached."""

import types
import warnings

import pytest

from ttbuild.cache import (
    CacheError,
    CacheWarning,
    DirCache,
    HttpCache,
    LayeredCache,
    NullCache,
    action_key,
    digest,
    module_action_key,
    open_cache,
    run_cached,
)
from ttbuild.cache.config import default_local_dir


def key_of(n) -> str:
    return action_key("ttgir", 1, {"ttir": digest(str(n).encode())}, {"num_warps": 4}, {})


def test_local_dir_precedence(tmp_path):
    assert default_local_dir({"TTBUILD_CACHE_DIR": str(tmp_path / "a"),
                              "XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "a"
    assert default_local_dir({"XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "ttbuild"
    assert default_local_dir({}).parts[-2:] == (".cache", "ttbuild")


def test_no_url_is_the_local_directory(tmp_path):
    c = open_cache(env={"TTBUILD_CACHE_DIR": str(tmp_path)})
    assert isinstance(c, DirCache) and c.root == tmp_path


@pytest.mark.parametrize("form", ["path", "file"])
def test_path_and_file_url_mean_a_shared_directory(tmp_path, form):
    shared = tmp_path / "nfs"
    url = str(shared) if form == "path" else shared.as_uri()
    c = open_cache(env={"TTBUILD_CACHE": url, "TTBUILD_CACHE_DIR": str(tmp_path / "local")})
    assert isinstance(c, LayeredCache) and isinstance(c.remote, DirCache)
    assert c.remote.root == shared and c.local.root == tmp_path / "local"
    assert not c.readonly and not c.remote.readonly


def test_http_url_and_explicit_argument_beats_env(tmp_path):
    env = {"TTBUILD_CACHE": "/somewhere", "TTBUILD_CACHE_DIR": str(tmp_path)}
    c = open_cache("https://cache.example:8443/ttbuild/", env=env)
    assert isinstance(c.remote, HttpCache)
    assert c.remote.name == "https://cache.example:8443/ttbuild/" and c.remote.base_path == "/ttbuild"


@pytest.mark.parametrize("value, expect", [("1", True), ("true", True), ("0", False), ("", False)])
def test_readonly_env(tmp_path, value, expect):
    c = open_cache(env={"TTBUILD_CACHE": "http://127.0.0.1:9/", "TTBUILD_CACHE_READONLY": value,
                        "TTBUILD_CACHE_DIR": str(tmp_path)})
    assert c.readonly is expect and c.remote.readonly is expect
    assert open_cache("http://127.0.0.1:9/", readonly=True, env={"TTBUILD_CACHE_DIR": str(tmp_path)}).readonly


def test_off_and_bad_urls(tmp_path):
    assert isinstance(open_cache("off", env={}), NullCache)
    with pytest.raises(CacheError, match="scheme"):
        open_cache("s3://bucket/x", env={"TTBUILD_CACHE_DIR": str(tmp_path)})
    with pytest.raises(CacheError, match="host"):
        open_cache("file://fileserver/x", env={"TTBUILD_CACHE_DIR": str(tmp_path)})


def test_shared_dir_equal_to_local_is_just_local(tmp_path):
    c = open_cache(str(tmp_path / "." / ""), env={"TTBUILD_CACHE_DIR": str(tmp_path)})
    assert isinstance(c, DirCache)


def test_layered_over_a_shared_directory(tmp_path):
    shared = DirCache(tmp_path / "shared")
    shared.put(key_of(1), {"ttgir": b"from another machine"})
    mine = open_cache(str(tmp_path / "shared"), env={"TTBUILD_CACHE_DIR": str(tmp_path / "me")})
    assert mine.get(key_of(1)) == {"ttgir": b"from another machine"}
    assert DirCache(tmp_path / "me").get(key_of(1)) is not None  # written back
    mine.put(key_of(2), {"ttgir": b"mine"})
    assert shared.get(key_of(2)) == {"ttgir": b"mine"}


def test_readonly_layered_over_a_shared_directory(tmp_path):
    env = {"TTBUILD_CACHE_DIR": str(tmp_path / "me"), "TTBUILD_CACHE_READONLY": "1"}
    mine = open_cache(str(tmp_path / "shared"), env=env)
    mine.put(key_of(3), {"ttgir": b"untrusted"})
    assert not (tmp_path / "shared").exists()
    assert mine.get(key_of(3)) == {"ttgir": b"untrusted"}  # from its own local tier


def test_a_remote_that_raises_is_dropped_with_one_warning(tmp_path):
    class Broken(NullCache):
        name = "broken"

        def get(self, key):
            raise RuntimeError("bug in a tier")

    c = LayeredCache(DirCache(tmp_path), Broken())
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for i in range(3):
            assert c.get(key_of(i)) is None
    assert len([w for w in rec if issubclass(w.category, CacheWarning)]) == 1
    c.put(key_of(0), {"ttgir": b"x"})
    assert c.get(key_of(0)) == {"ttgir": b"x"}


def _fake_stage(version=1):
    calls = []

    def run(inputs, options):
        calls.append((dict(inputs), dict(options)))
        return {"ttgir": inputs["ttir"].upper() + str(options["num_warps"]).encode()}

    return types.SimpleNamespace(VERSION=version, run=run, calls=calls)


def test_run_cached_runs_once_per_action(tmp_path):
    cache, mod = DirCache(tmp_path), _fake_stage()
    opts = {"num_warps": 4, "num_ctas": 1, "num_stages": 3, "target": "cuda:90"}
    first = run_cached("ttgir", mod, {"ttir": b"module"}, opts, cache=cache)
    again = run_cached("ttgir", mod, {"ttir": b"module"}, dict(reversed(opts.items())), cache=cache)
    assert first == again == {"ttgir": b"MODULE4"} and len(mod.calls) == 1
    run_cached("ttgir", mod, {"ttir": b"module"}, {**opts, "num_warps": 8}, cache=cache)
    run_cached("ttgir", mod, {"ttir": b"module2"}, opts, cache=cache)
    run_cached("ttgir", _fake_stage(version=2), {"ttir": b"module"}, opts, cache=cache)
    assert len(mod.calls) == 3
    assert module_action_key("ttgir", mod, {"ttir": b"module"}, opts) != module_action_key("ttgir", _fake_stage(2), {"ttir": b"module"}, opts)


def test_run_cached_stores_nothing_on_failure(tmp_path):
    cache = DirCache(tmp_path)

    def run(inputs, options):
        raise ValueError("bad kernel")

    mod = types.SimpleNamespace(VERSION=1, run=run)
    with pytest.raises(ValueError):
        run_cached("ttgir", mod, {"ttir": b"m"}, {}, cache=cache)
    assert cache.stats().entries == 0


def test_cli_stats_verify_prune(tmp_path, monkeypatch, capsys):
    from ttbuild.cache.__main__ import main
    from ttbuild.units import parse_duration as parse_age
    from ttbuild.units import parse_size

    assert parse_size("10G") == 10 << 30 and parse_size("512k") == 512 << 10 and parse_size("7") == 7
    assert parse_age("30d") == 30 * 86400 and parse_age("90m") == 5400 and parse_age("5") == 5
    monkeypatch.setenv("TTBUILD_CACHE_DIR", str(tmp_path / "me"))
    monkeypatch.delenv("TTBUILD_CACHE", raising=False)
    shared = DirCache(tmp_path / "shared")
    for i in range(3):
        shared.put(key_of(i), {"ttgir": bytes([i]) * 1000})
    assert main(["--cache", str(tmp_path / "shared"), "--remote", "stats"]) == 0
    assert "3 entries, 3 blobs" in capsys.readouterr().out
    assert main(["stats"]) == 0
    assert "0 entries" in capsys.readouterr().out
    (shared.cas_path(digest(bytes([0]) * 1000))).write_bytes(b"rot")
    with pytest.warns(CacheWarning):
        assert main(["--cache", str(tmp_path / "shared"), "--remote", "verify"]) == 1
    assert main(["--cache", str(tmp_path / "shared"), "--remote", "prune", "--max-bytes", "0"]) == 0
    assert shared.stats().entries == 0
    assert main(["--remote", "stats"]) == 2


def test_missing_shared_directory_is_not_created(tmp_path):
    c = open_cache(str(tmp_path / "unmounted"), env={"TTBUILD_CACHE_DIR": str(tmp_path / "me")})
    with pytest.warns(CacheWarning, match="does not exist") as rec:
        for i in range(3):
            c.put(key_of(i), {"ttgir": b"x"})
    assert len([w for w in rec if issubclass(w.category, CacheWarning)]) == 1
    assert not (tmp_path / "unmounted").exists()
    assert c.get(key_of(0)) == {"ttgir": b"x"}  # the local tier still works
