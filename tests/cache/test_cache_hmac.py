"""Authenticated action-cache entries (issue 14, item 3): with a key configured, an entry that is unsigned, forged, signed with another key or replayed under another action key is a miss, over a shared folder and over HTTP; `cache verify` reports it."""

import json

import pytest
from cache_server import NginxDav, find_nginx

from ttbuild.cache import DirCache, HttpCache, action_key, digest
from ttbuild.cache.base import CacheError, entry_secret

NGINX = find_nginx()


def key_of(n) -> str:
    return action_key("cubin", 1, {"ptx": digest(str(n).encode())}, {"arch": "sm_90a"}, {})


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "team secret")
    monkeypatch.delenv("TTBUILD_CACHE_HMAC_KEY_FILE", raising=False)


def _poison(cache: DirCache, victim: str, donor: str) -> None:
    """The review's attack: point the victim's entry at the donor's blobs (an `x - y` cubin for
    `add_kernel_fp32`), writing the entry file directly, as anyone with write access to the
    shared folder can."""
    cache.ac_path(victim).write_bytes(cache.ac_path(donor).read_bytes())


def test_signed_entries_round_trip(tmp_path, keyed):
    c = DirCache(tmp_path / "c")
    c.put(key_of(1), {"cubin": b"add"})
    assert c.get(key_of(1)) == {"cubin": b"add"}
    assert "mac" in json.loads(c.ac_path(key_of(1)).read_bytes())


def test_without_a_key_a_poisoned_entry_is_served_the_threat(tmp_path, monkeypatch):
    monkeypatch.delenv("TTBUILD_CACHE_HMAC_KEY", raising=False)
    monkeypatch.delenv("TTBUILD_CACHE_HMAC_KEY_FILE", raising=False)
    c = DirCache(tmp_path / "c")
    c.put(key_of(1), {"cubin": b"x + y"})
    c.put(key_of(2), {"cubin": b"x - y"})
    _poison(c, key_of(1), key_of(2))
    assert c.get(key_of(1)) == {"cubin": b"x - y"}  # what the trust model in the README warns of


@pytest.mark.filterwarnings("ignore::ttbuild.cache.base.CacheWarning")  # the test damages entries on purpose
def test_with_a_key_a_replayed_entry_is_a_miss(tmp_path, keyed):
    c = DirCache(tmp_path / "c")
    c.put(key_of(1), {"cubin": b"x + y"})
    c.put(key_of(2), {"cubin": b"x - y"})
    _poison(c, key_of(1), key_of(2))  # validly signed, but for another action
    assert c.get(key_of(1)) is None


@pytest.mark.filterwarnings("ignore::ttbuild.cache.base.CacheWarning")  # the test damages entries on purpose
def test_with_a_key_unsigned_and_forged_entries_are_misses(tmp_path, keyed, monkeypatch):
    c = DirCache(tmp_path / "c")
    c.put(key_of(2), {"cubin": b"x - y"})
    donor = json.loads(c.ac_path(key_of(2)).read_bytes())
    unsigned = {k: v for k, v in donor.items() if k != "mac"}
    c.ac_path(key_of(1)).parent.mkdir(parents=True, exist_ok=True)
    c.ac_path(key_of(1)).write_bytes(json.dumps(unsigned).encode())
    assert c.get(key_of(1)) is None
    # signed by an attacker with their own key
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "attacker")
    DirCache(tmp_path / "c").put(key_of(3), {"cubin": b"x - y"})
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY", "team secret")
    assert DirCache(tmp_path / "c").get(key_of(3)) is None


@pytest.mark.filterwarnings("ignore::ttbuild.cache.base.CacheWarning")  # the test damages entries on purpose
def test_verify_reports_entries_that_are_not_authentic(tmp_path, keyed, monkeypatch):
    c = DirCache(tmp_path / "c")
    c.put(key_of(1), {"cubin": b"x + y"})
    c.put(key_of(2), {"cubin": b"x - y"})
    _poison(c, key_of(1), key_of(2))
    rep = DirCache(tmp_path / "c").verify()
    assert rep.entries_dropped == 1 and any("mac does not match" in p for p in rep.problems), rep.problems


def test_key_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TTBUILD_CACHE_HMAC_KEY", raising=False)
    f = tmp_path / "key"
    f.write_text("from a file\n")
    monkeypatch.setenv("TTBUILD_CACHE_HMAC_KEY_FILE", str(f))
    assert entry_secret() == b"from a file"
    f.write_text("")
    with pytest.raises(CacheError, match="is empty"):
        entry_secret()


@pytest.mark.skipif(NGINX is None, reason="no nginx with --with-http_dav_module on PATH")
def test_over_http_a_poisoned_entry_is_a_miss(tmp_path_factory, keyed):
    server = NginxDav(NGINX, tmp_path_factory.mktemp("nginx-hmac")).start()
    try:
        remote = HttpCache(server.url)
        remote.put(key_of(1), {"cubin": b"x + y"})
        remote.put(key_of(2), {"cubin": b"x - y"})
        assert remote.get(key_of(1)) == {"cubin": b"x + y"}
        status, raw, _ = remote._request("GET", f"/ac/{key_of(2)}")
        assert status == 200
        remote._request("PUT", f"/ac/{key_of(1)}", raw)   # the attack, over the wire
        ro = HttpCache(server.url, readonly=True)
        assert ro.get(key_of(1)) is None
        remote.close()
        ro.close()
    finally:
        server.stop()
