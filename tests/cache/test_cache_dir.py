"""The directory cache backend: layout, round trips, corruption handling, concurrency, stats, prune."""

import hashlib
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from ttbuild.cache import CacheWarning, DirCache, action_key, digest


def key_of(n) -> str:
    return action_key("ptx", 1, {"llir": digest(str(n).encode())}, {"arch": "sm_90a"}, {})


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.fixture
def cache(tmp_path):
    return DirCache(tmp_path / "c")


def test_miss_then_round_trip_and_layout(cache):
    k = key_of(1)
    assert cache.get(k) is None
    outs = {"ptx": b".version 9.0\n" * 100, "json": b"{}"}
    cache.put(k, outs)
    assert cache.get(k) == outs
    for data in outs.values():
        h = hashlib.sha256(data).hexdigest()
        assert (cache.root / "cas" / h[:2] / h).read_bytes() == data
    entry = (cache.root / "ac" / k).read_bytes()
    assert digest(outs["ptx"]).encode() in entry
    s = cache.stats()
    assert (s.hits, s.misses, s.puts, s.entries, s.blobs) == (1, 1, 1, 1, 2)
    assert s.bytes == disk_bytes(cache.root)


def test_identical_outputs_share_one_blob(cache):
    cache.put(key_of(1), {"cubin": b"\x7fELF same"})
    cache.put(key_of(2), {"cubin": b"\x7fELF same", "json": b"{}"})
    assert cache.stats().blobs == 2
    assert cache.get(key_of(1)) == {"cubin": b"\x7fELF same"}


def test_malformed_keys_and_outputs_are_caller_errors(cache):
    for bad in ["../../etc/passwd", "ab" * 31, "A" * 64, key_of(1)[:32]]:
        with pytest.raises(ValueError):
            cache.get(bad)
        with pytest.raises(ValueError):
            cache.put(bad, {"x": b""})
    with pytest.raises(TypeError):
        cache.put(key_of(1), {"x": "text"})


def _blob_path(cache, data):
    h = digest(data)
    return cache.root / "cas" / h[:2] / h


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend"])
def test_corrupt_blob_is_reported_dropped_and_a_miss(cache, damage):
    k, data = key_of(1), bytes(range(256)) * 8
    cache.put(k, {"ptx": data})
    p = _blob_path(cache, data)
    raw = bytearray(p.read_bytes())
    if damage == "flip":
        raw[100] ^= 0x01
    elif damage == "truncate":
        raw = raw[:1000]
    else:
        raw += b"!"
    p.write_bytes(bytes(raw))
    with pytest.warns(CacheWarning, match="corrupt"):
        assert cache.get(k) is None
    assert not p.exists() and not (cache.root / "ac" / k).exists()
    assert cache.stats().corrupt == 1
    cache.put(k, {"ptx": data})  # the next build stores it again
    assert cache.get(k) == {"ptx": data}


@pytest.mark.parametrize("entry", [b"", b"{not json", b'{"schema": "other/1", "outputs": {}}',
                                   b'{"schema": "ttbuild.cache/1", "outputs": {"x": {"sha256": "zz", "size": 1}}}',
                                   b"\xff\xfe"])
def test_broken_ac_entry_is_reported_dropped_and_a_miss(cache, entry):
    k = key_of(1)
    cache.put(k, {"ptx": b"x"})
    (cache.root / "ac" / k).write_bytes(entry)
    with pytest.warns(CacheWarning, match="AC entry"):
        assert cache.get(k) is None
    assert not (cache.root / "ac" / k).exists()


def test_entry_whose_blob_vanished_is_a_quiet_miss(cache, recwarn):
    k = key_of(1)
    cache.put(k, {"ptx": b"gone"})
    _blob_path(cache, b"gone").unlink()
    assert cache.get(k) is None
    assert not [w for w in recwarn if issubclass(w.category, CacheWarning)]
    assert not (cache.root / "ac" / k).exists()


def test_readonly_never_writes(tmp_path):
    rw, ro = DirCache(tmp_path), DirCache(tmp_path, readonly=True)
    ro.put(key_of(1), {"ptx": b"x"})
    assert not (tmp_path / "ac").exists()
    rw.put(key_of(2), {"ptx": b"y"})
    os.utime(tmp_path / "ac" / key_of(2), (1000, 1000))
    assert ro.get(key_of(2)) == {"ptx": b"y"}
    assert (tmp_path / "ac" / key_of(2)).stat().st_mtime == 1000  # no last-use refresh either
    _blob_path(rw, b"y").write_bytes(b"z")
    with pytest.warns(CacheWarning, match="read-only"):
        assert ro.get(key_of(2)) is None
    assert (tmp_path / "ac" / key_of(2)).exists()


def test_unwritable_root_warns_once_and_never_raises(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    cache = DirCache(blocker / "sub")  # a path under a regular file: every mkdir fails
    with pytest.warns(CacheWarning, match="cannot write") as rec:
        cache.put(key_of(1), {"ptx": b"x"})
        cache.put(key_of(2), {"ptx": b"y"})
    assert len([w for w in rec if issubclass(w.category, CacheWarning)]) == 1
    assert cache.get(key_of(1)) is None
    assert cache.stats().errors == 3  # two puts, one unreadable get


def _hammer(root, barrier, seed, rounds, out_q):
    cache = DirCache(root)
    errors = 0
    for i in range(rounds):
        # Both workers store the same keys with the same large outputs at the same moment.
        data = {"cubin": bytes([i % 256]) * (1 << 18), "json": f'{{"i": {i}}}'.encode()}
        barrier.wait(timeout=60)
        cache.put(key_of(i), data)
        got = cache.get(key_of(i))
        errors += got != data
        other = cache.get(key_of((i + seed) % rounds))  # may be a miss, never a corrupt hit
        if other is not None:
            j = (i + seed) % rounds
            errors += other["json"] != f'{{"i": {j}}}'.encode()
    out_q.put(errors)


def test_two_processes_putting_the_same_keys_at_once(tmp_path, recwarn):
    ctx = multiprocessing.get_context("fork")
    barrier, q = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(tmp_path, barrier, s, 20, q)) for s in (1, 7)]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == [0, 0]
    cache = DirCache(tmp_path)
    report = cache.verify()
    assert report.ok and report.entries_checked == 20
    assert not list(tmp_path.rglob(".tmp-*"))  # no temp file left behind
    assert not [w for w in recwarn if issubclass(w.category, CacheWarning)]


def test_verify_drops_bad_blobs_and_the_entries_naming_them(cache):
    cache.put(key_of(1), {"ptx": b"good"})
    cache.put(key_of(2), {"ptx": b"bad", "json": b"{}"})
    _blob_path(cache, b"bad").write_bytes(b"BAD")
    (cache.root / "ac" / key_of(3)).write_bytes(b"junk")
    with pytest.warns(CacheWarning):
        rep = cache.verify()
    assert (rep.blobs_checked, rep.entries_checked) == (3, 3)
    assert (rep.blobs_dropped, rep.entries_dropped) == (1, 2)
    assert len(rep.problems) == 3 and not rep.ok
    assert cache.get(key_of(1)) == {"ptx": b"good"}
    assert cache.verify().ok


def _age(cache, key, seconds_ago):
    t = time.time() - seconds_ago
    os.utime(cache.root / "ac" / key, (t, t))


def test_prune_by_age_keeps_blobs_still_named(cache):
    cache.put(key_of(1), {"ptx": b"shared", "json": b"old only"})
    cache.put(key_of(2), {"ptx": b"shared"})
    _age(cache, key_of(1), 10 * 86400)
    for data in (b"shared", b"old only"):
        t = time.time() - 10 * 86400
        os.utime(_blob_path(cache, data), (t, t))
    rep = cache.prune(max_age=86400)
    assert (rep.entries_removed, rep.blobs_removed) == (1, 1)
    assert cache.get(key_of(1)) is None
    assert cache.get(key_of(2)) == {"ptx": b"shared"}
    assert rep.bytes_left == disk_bytes(cache.root)


def test_prune_to_size_drops_least_recently_used_first(cache):
    for i in range(4):
        cache.put(key_of(i), {"cubin": bytes([i]) * 10_000})
        _age(cache, key_of(i), 1000 - i)  # key 0 oldest ... key 3 newest
    assert cache.get(key_of(0)) is not None  # a hit refreshes last use: now the newest
    rep = cache.prune(max_bytes=25_000)
    assert rep.entries_removed == 2 and rep.blobs_removed == 2
    assert [cache.get(key_of(i)) is not None for i in range(4)] == [True, False, False, True]
    assert disk_bytes(cache.root) <= 25_000 and rep.bytes_left == disk_bytes(cache.root)


def test_prune_spares_fresh_orphans_and_removes_stale_ones_and_temps(tmp_path):
    cache = DirCache(tmp_path, grace=60)
    cache.put(key_of(1), {"ptx": b"fresh"})
    cache.put(key_of(2), {"ptx": b"stale"})
    (tmp_path / "ac" / key_of(1)).unlink()  # a put in flight: blob written, entry not yet
    (tmp_path / "ac" / key_of(2)).unlink()
    old = time.time() - 3600
    os.utime(_blob_path(cache, b"stale"), (old, old))
    tmp = tmp_path / "ac" / ".tmp-123-dead"
    tmp.write_bytes(b"half")
    os.utime(tmp, (old, old))
    rep = cache.prune()
    assert (rep.blobs_removed, rep.temps_removed) == (1, 1)
    assert _blob_path(cache, b"fresh").exists() and not _blob_path(cache, b"stale").exists()
    assert not tmp.exists()


def test_stats_and_prune_on_an_empty_or_absent_root(tmp_path):
    cache = DirCache(tmp_path / "never")
    s = cache.stats()
    assert (s.entries, s.blobs, s.bytes) == (0, 0, 0)
    assert cache.prune(max_bytes=0).entries_removed == 0
    assert cache.verify().ok


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(outputs=st.dictionaries(st.text(min_size=1, max_size=12), st.binary(max_size=2048), max_size=5),
       n=st.integers(0, 10**6))
def test_any_roles_and_bytes_round_trip(tmp_path, outputs, n):
    cache = DirCache(tmp_path / "prop")
    cache.put(key_of(n), outputs)
    assert cache.get(key_of(n)) == outputs
    assert cache.verify().ok


def test_prune_refuses_read_only_and_http_caches(tmp_path):
    from ttbuild.cache import CacheError, HttpCache

    with pytest.raises(CacheError, match="read-only"):
        DirCache(tmp_path, readonly=True).prune(max_bytes=0)
    with pytest.raises(CacheError, match="server"):
        HttpCache("http://127.0.0.1:9/x").prune(max_bytes=0)  # no request is made
