"""The HTTP (Bazel remote-cache protocol) backend against a real nginx WebDAV server on loopback."""

import hashlib
import warnings

import pytest
from cache_server import ForwardProxy, NginxDav, ScriptedServer, find_nginx, free_port

from ttbuild.cache import CacheWarning, DirCache, HttpCache, LayeredCache, action_key, digest
from ttbuild.cache import http as http_mod

NGINX = find_nginx()


def key_of(n) -> str:
    return action_key("cubin", 1, {"ptx": digest(str(n).encode())}, {"arch": "sm_90a"}, {})


@pytest.fixture(autouse=True)
def fresh_warning_memory(monkeypatch):
    # "One warning per process" is process state; each test starts as a fresh process would.
    monkeypatch.setattr(http_mod, "_warned_down", set())
    # A proxy or credentials in the machine's environment must not reach these loopback tests.
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                "no_proxy", "NO_PROXY", "TTBUILD_CACHE_AUTH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    if NGINX is None:
        pytest.skip("no nginx with --with-http_dav_module on PATH (apt-get install -y nginx)")
    server = NginxDav(NGINX, tmp_path_factory.mktemp("nginx")).start()
    yield server
    server.stop()


@pytest.fixture
def remote(nginx):
    c = HttpCache(nginx.url)
    yield c
    c.close()


def test_round_trip_stores_bazel_layout_on_the_server(nginx, remote):
    k = key_of("layout")
    assert remote.get(k) is None
    outs = {"cubin": b"\x7fELF" + bytes(range(256)) * 64, "json": b'{"schema": "ttbuild.kernel/1"}'}
    remote.put(k, outs)
    assert remote.get(k) == outs
    assert (nginx.root / "ac" / k).is_file()
    for data in outs.values():
        blob = nginx.root / "cas" / hashlib.sha256(data).hexdigest()
        # bazel-remote's rule: a /cas/ path is the sha256 of its body.
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    s = remote.stats()
    assert (s.hits, s.misses, s.puts, s.errors) == (1, 1, 1, 0)


def test_blob_already_on_the_server_is_not_uploaded_again(nginx, remote):
    blob = b"shared cubin " * 1000
    remote.put(key_of("a"), {"cubin": blob})
    remote.put(key_of("b"), {"cubin": blob, "json": b"{}"})
    puts = [line for line in nginx.access_log() if f'"PUT /cache/cas/{digest(blob)}' in line]
    heads = [line for line in nginx.access_log() if f'"HEAD /cache/cas/{digest(blob)}' in line]
    assert len(puts) == 1 and len(heads) == 2
    assert remote.get(key_of("b")) == {"cubin": blob, "json": b"{}"}


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_blob_on_the_server_is_reported_deleted_and_a_miss(nginx, remote, damage):
    k, data = key_of(damage), damage.encode() * 500
    remote.put(k, {"ptx": data})
    blob = nginx.root / "cas" / digest(data)
    raw = blob.read_bytes()
    blob.write_bytes(raw[:-1] + b"?" if damage == "flip" else raw[:10])
    with pytest.warns(CacheWarning, match="corrupt"):
        assert remote.get(k) is None
    assert not (nginx.root / "ac" / k).exists() and not blob.exists()  # DELETEd
    remote.put(k, {"ptx": data})
    assert remote.get(k) == {"ptx": data}


def test_broken_ac_entry_on_the_server(nginx, remote):
    k = key_of("broken-ac")
    remote.put(k, {"ptx": b"x"})
    (nginx.root / "ac" / k).write_bytes(b"<html>proxy error</html>")
    with pytest.warns(CacheWarning, match="AC entry"):
        assert remote.get(k) is None
    assert remote.stats().corrupt == 1


def test_readonly_client_never_puts(nginx):
    ro = HttpCache(nginx.url, readonly=True)
    k = key_of("ro")
    before = len(nginx.access_log())
    ro.put(k, {"ptx": b"untrusted"})
    assert len(nginx.access_log()) == before  # not even a HEAD
    assert not (nginx.root / "ac" / k).exists()
    HttpCache(nginx.url).put(k, {"ptx": b"trusted"})
    assert ro.get(k) == {"ptx": b"trusted"}


def test_layered_remote_hit_is_written_back_to_local(nginx, remote, tmp_path):
    k = key_of("writeback")
    remote.put(k, {"cubin": b"from the fleet"})
    layered = LayeredCache(DirCache(tmp_path), HttpCache(nginx.url))
    assert layered.get(k) == {"cubin": b"from the fleet"}
    assert DirCache(tmp_path).get(k) == {"cubin": b"from the fleet"}
    before = len(nginx.access_log())
    assert layered.get(k) == {"cubin": b"from the fleet"}
    assert len(nginx.access_log()) == before  # second hit served locally
    s = layered.stats()
    assert s.hits == 2 and s.tiers[0].hits == 1 and s.tiers[1].hits == 1


def test_layered_readonly_fills_local_but_not_remote(nginx, tmp_path):
    k = key_of("pr-from-fork")
    layered = LayeredCache(DirCache(tmp_path), HttpCache(nginx.url, readonly=True), readonly=True)
    layered.put(k, {"cubin": b"built by an untrusted job"})
    assert not (nginx.root / "ac" / k).exists()
    assert DirCache(tmp_path).get(k) == {"cubin": b"built by an untrusted job"}


def test_unreachable_remote_warns_once_and_local_goes_on(tmp_path):
    port = free_port()  # bound then closed: connections are refused
    remote = HttpCache(f"http://127.0.0.1:{port}/cache", timeout=2.0)
    layered = LayeredCache(DirCache(tmp_path), remote)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for i in range(5):
            assert layered.get(key_of(i)) is None
            layered.put(key_of(i), {"ptx": str(i).encode()})
            assert layered.get(key_of(i)) == {"ptx": str(i).encode()}
        again = HttpCache(f"http://127.0.0.1:{port}/cache")  # same URL, same process
        assert again.get(key_of(0)) is None
    msgs = [str(w.message) for w in rec if issubclass(w.category, CacheWarning)]
    assert len(msgs) == 1 and "unreachable" in msgs[0]
    assert remote.down and remote.stats().errors == 1


def test_credentials_in_the_url_are_sent_but_never_shown(nginx):
    url = nginx.url.replace("http://", "http://ci:s3cret@")
    c = HttpCache(url)
    assert "s3cret" not in c.name and c._headers["Authorization"].startswith("Basic ")
    c.put(key_of("auth"), {"ptx": b"a"})  # nginx ignores the header; the request still works
    assert c.get(key_of("auth")) == {"ptx": b"a"}


def test_server_errors_are_misses_not_outages():
    server = ScriptedServer(500).start()
    try:
        c = HttpCache(server.url)
        with pytest.warns(CacheWarning, match="HTTP 500"):
            c.put(key_of(1), {"ptx": b"x"})
            c.put(key_of(2), {"ptx": b"y"})  # warned once only
        assert c.get(key_of(1)) is None
        assert not c.down
        s = c.stats()
        assert s.errors == 3 and s.misses == 1
        assert all(path.startswith("/prefix/") for _, path in server.requests)
        # Each put: one HEAD, one PUT refused, then stop; each get: one GET. Nothing retried.
        assert [m for m, _ in server.requests] == ["HEAD", "PUT", "HEAD", "PUT", "GET"]
    finally:
        server.stop()


def _put_get(url_or_cache, barrier, rounds, q):
    c = url_or_cache if isinstance(url_or_cache, HttpCache) else HttpCache(url_or_cache)
    bad = 0
    for i in range(rounds):
        data = {"cubin": bytes([i]) * 100_000, "json": str(i).encode()}
        barrier.wait(timeout=60)
        c.put(key_of(f"race{i}"), data)
        bad += c.get(key_of(f"race{i}")) != data
    q.put((bad, c.stats().errors))


def test_two_processes_putting_the_same_keys_at_once(nginx):
    import multiprocessing

    shared = HttpCache(nginx.url)
    shared.get(key_of("warm"))  # opens a keep-alive connection that the children inherit
    ctx = multiprocessing.get_context("fork")
    barrier, q = ctx.Barrier(2), ctx.Queue()
    # Both children inherit the same client (its socket included), as doit -n workers would.
    procs = [ctx.Process(target=_put_get, args=(shared, barrier, 10, q)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == [(0, 0), (0, 0)]
    assert shared.get(key_of("race3")) == {"cubin": bytes([3]) * 100_000, "json": b"3"}


def test_layered_local_hit_fills_the_remote_once(nginx, tmp_path):
    """Issue 14: what a machine holds in its local cache (built before a remote was configured)
    reaches the fleet on its next hit, once per process; a read-only job never writes it."""
    k = key_of("local-only")
    DirCache(tmp_path).put(k, {"cubin": b"built here"})
    ro = LayeredCache(DirCache(tmp_path), HttpCache(nginx.url, readonly=True), readonly=True)
    assert ro.get(k) == {"cubin": b"built here"}
    assert not (nginx.root / "ac" / k).exists()
    layered = LayeredCache(DirCache(tmp_path), HttpCache(nginx.url))
    assert layered.get(k) == {"cubin": b"built here"}
    assert HttpCache(nginx.url).get(k) == {"cubin": b"built here"}
    before = len(nginx.access_log())
    assert layered.get(k) == {"cubin": b"built here"}
    assert len(nginx.access_log()) == before  # filled once: the second hit stays local


def test_credentials_from_the_environment_or_netrc_are_sent_but_never_shown(tmp_path, monkeypatch):
    """The URL's userinfo first, then $TTBUILD_CACHE_AUTH, then the host's netrc entry (as curl and
    pip read it); the cache's name shows none of them."""
    import base64

    def auth(c):
        return base64.b64decode(c._headers["Authorization"].removeprefix("Basic ")).decode()

    rc = tmp_path / "netrc"
    rc.write_text("machine cache.example login ci password fromnetrc\n")
    rc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(rc))
    c = HttpCache("http://cache.example:9090/prefix")
    assert auth(c) == "ci:fromnetrc" and "fromnetrc" not in c.name
    assert "Authorization" not in HttpCache("http://other.example/prefix")._headers
    monkeypatch.setenv("TTBUILD_CACHE_AUTH", "bot:fromenv")
    assert auth(HttpCache("http://cache.example:9090/prefix")) == "bot:fromenv"
    assert auth(HttpCache("http://u:inurl@cache.example:9090/prefix")) == "u:inurl"


def test_an_http_proxy_from_the_environment_carries_every_request(nginx, monkeypatch):
    """http_proxy: requests go to the proxy with absolute URLs (and Proxy-Authorization from its
    userinfo); no_proxy naming the host goes direct."""
    proxy = ForwardProxy().start()
    try:
        monkeypatch.setenv("http_proxy", proxy.url.replace("http://", "http://pu:pw@"))
        c = HttpCache(nginx.url)
        c.put(key_of("proxied"), {"ptx": b"through the proxy"})
        assert c.get(key_of("proxied")) == {"ptx": b"through the proxy"}
        c.close()
        assert proxy.requests and all(url.startswith(nginx.url.rsplit("/", 1)[0]) for _, url, _ in proxy.requests)
        assert {m for m, _, _ in proxy.requests} >= {"PUT", "GET"}
        assert all(a == "Basic cHU6cHc=" for _, _, a in proxy.requests)  # pu:pw
        seen = len(proxy.requests)
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        direct = HttpCache(nginx.url)
        assert direct.get(key_of("proxied")) == {"ptx": b"through the proxy"}
        direct.close()
        assert len(proxy.requests) == seen
    finally:
        proxy.stop()
