"""The cache under a shared key (issue 32, item 4): entries of another key are misses that stay (a job with a rotated or mistyped key cannot take the fleet's entries away, nor `cache verify` with it), an empty key says so, the key file is read bounded, and a server of wrong or oversized answers costs a bounded number of bytes and one warning."""

import json
import warnings

import pytest
from cache_server import LyingServer

from ttbuild.cache import CacheWarning, DirCache, HttpCache, action_key, digest, open_cache
from ttbuild.cache import base as cache_base
from ttbuild.cache import http as http_mod
from ttbuild.cache.__main__ import main as cache_main
from ttbuild.cache.base import CacheError, entry_secret


def key_of(n) -> str:
    return action_key("cubin", 1, {"ptx": digest(str(n).encode())}, {"arch": "sm_90a"}, {})


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    monkeypatch.setattr(http_mod, "_warned_down", set())
    for var in ("TTBUILD_CACHE_HMAC_KEY", "TTBUILD_CACHE_HMAC_KEY_FILE", "TTBUILD_CACHE_FETCH_BUDGET",
                "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY", "TTBUILD_CACHE_AUTH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")


def _valid_for_fleet(shared, n: int) -> int:
    fleet = DirCache(shared, readonly=True, create=False)
    return sum(fleet.get(key_of(i)) == {"cubin": f"kernel {i}".encode()} for i in range(n))


def test_a_job_with_another_key_neither_deletes_nor_resigns_the_fleets_entries(tmp_path, monkeypatch):
    """The review's reproduction: two jobs with different keys on one shared folder. Before, the
    second job dropped every entry as forged and re-signed it with its own key: 0 of 128 valid."""
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "fleet key")
    fleet = DirCache(shared, create=False)
    for i in range(16):
        fleet.put(key_of(i), {"cubin": f"kernel {i}".encode()})
    assert "kid" in json.loads(fleet.ac_path(key_of(0)).read_bytes())
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "a typo")
    job = open_cache(str(shared), env={"TTBUILD_CACHE_DIR": str(tmp_path / "job-local")})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(16):
            assert job.get(key_of(i)) is None  # signed with another key: a miss
            job.put(key_of(i), {"cubin": f"kernel {i}".encode()})  # what the job built
    msgs = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(msgs) == 1 and "signed with another key" in msgs[0], msgs
    assert job.remote.stats().foreign == 16 and job.remote.stats().corrupt == 0
    assert job.get(key_of(3)) == {"cubin": b"kernel 3"}  # its own local tier serves it
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "fleet key")
    assert _valid_for_fleet(shared, 16) == 16


def test_verify_with_a_wrong_key_keeps_the_cache(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "fleet key")
    fleet = DirCache(shared)
    for i in range(8):
        fleet.put(key_of(i), {"cubin": f"kernel {i}".encode()})
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "wrong key")
    monkeypatch.setenv("TTBUILD_CACHE_DIR", str(tmp_path / "local"))
    with pytest.warns(CacheWarning, match="8 entries are signed with another key"):
        assert cache_main(["--cache", str(shared), "--remote", "verify"]) == 1
    assert "kept 8 entries signed with another key" in capsys.readouterr().out
    with pytest.warns(CacheWarning, match="kept; check TTBUILD_CACHE_HMAC_KEY"):
        rep = DirCache(shared).verify()
    assert rep.entries_foreign == 8 and rep.entries_dropped == 0 and rep.blobs_dropped == 0
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "fleet key")
    assert _valid_for_fleet(shared, 8) == 8 and DirCache(shared).verify().ok


def test_an_empty_key_says_so(monkeypatch):
    monkeypatch.setattr(cache_base, "_empty_key_warned", False)
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "")
    with pytest.warns(CacheWarning, match="TTBUILD_CACHE_HMAC_KEY is set but empty"):
        assert entry_secret() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert entry_secret() is None  # once per process
    monkeypatch.delenv("TTBUILD_CACHE_HMAC_KEY")
    monkeypatch.setattr(cache_base, "_empty_key_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert entry_secret() is None  # unset: no key, nothing to say


def test_the_key_file_is_read_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY_FILE", "/dev/zero")
    with pytest.raises(CacheError, match="not a regular file"):
        entry_secret()
    big = tmp_path / "big"
    big.write_bytes(b"k" * 100_000)
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY_FILE", str(big))
    with pytest.raises(CacheError, match="over 4096 bytes"):
        entry_secret()


def _cas_gets(server) -> int:
    return sum(1 for m, p in server.requests if m == "GET" and "/cas/" in p)


@pytest.mark.parametrize("readonly", [True, False])
def test_a_server_of_wrong_bytes_is_marked_down_after_a_few_with_one_warning(readonly):
    """The review's server answering every entry with a 255 MiB blob of wrong bytes, scaled
    down: 64 KiB. Before, each of the build's entries fetched its blob and warned."""
    server = LyingServer(64 << 10).start()
    try:
        c = HttpCache(server.url, readonly=readonly)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(40):
                assert c.get(key_of(i)) is None
        msgs = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
        assert _cas_gets(server) == http_mod.CORRUPT_LIMIT and c.down
        assert len(msgs) == 1 and "is corrupt" in msgs[0] and "3 corrupt answers take it out" in msgs[0], msgs
        gets = [r for r in server.requests if r[0] == "GET"]
        assert len(gets) == 2 * http_mod.CORRUPT_LIMIT  # and no request after the third
        assert len(server.requests) == len(gets) + (0 if readonly else 2 * http_mod.CORRUPT_LIMIT)  # DELETEs
    finally:
        server.stop()


def test_a_build_fetches_at_most_its_byte_budget(monkeypatch):
    """Entries naming big blobs that are each under the cap: the build's total is bounded
    ($TTBUILD_CACHE_FETCH_BUDGET, scaled down here), then the rest is a miss with one warning."""
    monkeypatch.setenv("TTBUILD_CACHE_FETCH_BUDGET", str(200_000))
    server = LyingServer(64 << 10, honest=True).start()
    try:
        c = HttpCache(server.url, readonly=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [c.get(key_of(i)) for i in range(40)]
        msgs = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
        assert sum(g is not None for g in got) == 3 and server.sent == 3 * (64 << 10) <= 200_000
        assert len(msgs) == 1 and "TTBUILD_CACHE_FETCH_BUDGET" in msgs[0], msgs
        assert len(server.requests) == 2 * 3 + 1  # the 4th entry was read, its blob never asked for
    finally:
        server.stop()
