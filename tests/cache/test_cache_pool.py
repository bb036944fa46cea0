"""The HTTP cache's transport (urllib3): keep-alive connections reused across requests and threads, proxies from the environment in either case, credentials never logged, a server that drops a kept-alive connection retried once."""

import logging
import socket
import threading
import warnings

import pytest
from cache_server import ForwardProxy, NginxDav, ScriptedServer, find_nginx

from ttbuild.cache import HttpCache, action_key, digest
from ttbuild.cache import http as http_mod

NGINX = find_nginx()


def key_of(n) -> str:
    return action_key("cubin", 1, {"ptx": digest(str(n).encode())}, {"arch": "sm_90a"}, {})


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    monkeypatch.setattr(http_mod, "_warned_down", set())
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                "no_proxy", "NO_PROXY", "TTBUILD_CACHE_AUTH", "TTBUILD_CACHE_HMAC_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")


@pytest.fixture
def scripted():
    server = ScriptedServer(404).start()
    yield server
    server.stop()


def test_sequential_requests_share_one_keep_alive_connection(scripted):
    c = HttpCache(scripted.url)
    for n in range(40):
        assert c.get(key_of(n)) is None
    c.close()
    assert len(scripted.requests) == 40
    assert len(set(scripted.peers)) == 1, scripted.peers  # one TCP connection for all 40


def test_threads_share_a_pool_of_at_most_connections(scripted):
    """The prefetch's threads: each request takes a pooled connection and gives it back; no
    more than `connections` are ever opened, and none is thrown away with a warning."""
    c = HttpCache(scripted.url, connections=4)
    barrier = threading.Barrier(8)

    def work(t):
        barrier.wait(timeout=30)
        for n in range(25):
            assert c.get(key_of(f"{t}-{n}")) is None

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    c.close()
    assert len(scripted.requests) == 200 and not c.down
    assert 1 <= len(set(scripted.peers)) <= 4, set(scripted.peers)
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.parametrize("case", ["upper", "lower"])
def test_proxy_and_no_proxy_from_the_environment_in_either_case(case, monkeypatch, scripted):
    """HTTP_PROXY / http_proxy carry every request, with Proxy-Authorization from the proxy
    URL's userinfo; NO_PROXY / no_proxy naming the host goes direct (curl's reading)."""
    proxy = ForwardProxy().start()
    try:
        name = str.upper if case == "upper" else str.lower
        monkeypatch.setenv(name("http_proxy"), proxy.url.replace("http://", "http://pu:pw@"))
        c = HttpCache(scripted.url)
        assert c.get(key_of(1)) is None and c.get(key_of(2)) is None
        c.close()
        assert [m for m, _, _ in proxy.requests] == ["GET", "GET"]
        assert all(url.startswith(scripted.url + "/ac/") for _, url, _ in proxy.requests)
        assert all(a == "Basic cHU6cHc=" for _, _, a in proxy.requests)  # pu:pw
        monkeypatch.setenv(name("no_proxy"), "localhost,127.0.0.1")
        direct = HttpCache(scripted.url)
        assert direct.get(key_of(3)) is None
        direct.close()
        assert len(proxy.requests) == 2 and len(scripted.requests) == 3
    finally:
        proxy.stop()


def test_credentials_never_reach_the_logs(monkeypatch, caplog, scripted):
    """urllib3 logs each request at DEBUG: the URL it logs carries neither the cache's nor the
    proxy's credentials, and neither does the cache's name."""
    proxy = ForwardProxy().start()
    try:
        monkeypatch.setenv("http_proxy", proxy.url.replace("http://", "http://proxyuser:proxysecret@"))
        caplog.set_level(logging.DEBUG)
        c = HttpCache(scripted.url.replace("http://", "http://ci:cachesecret@"))
        assert c.get(key_of(1)) is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the scripted server refuses the upload: one warning
            c.put(key_of(1), {"ptx": b"x"})
        c.close()
        assert proxy.requests and caplog.records
        text = caplog.text + c.name + repr(c.stats())
        assert "cachesecret" not in text and "proxysecret" not in text, text
    finally:
        proxy.stop()


class DropsFirstKeptAlive:
    """Answers 404 with keep-alive, but closes each connection without answering its second
    request: what a server's keep-alive timeout does to a client that sends just then."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/c"
        self.connections = 0
        self.answered = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            conn.settimeout(10)
            if not conn.recv(65536):
                return
            self.answered += 1
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            conn.recv(65536)  # the second request on this connection: dropped unanswered

    def close(self):
        self.sock.close()


def test_a_kept_alive_connection_the_server_dropped_is_retried_once_on_a_new_one():
    server = DropsFirstKeptAlive()
    try:
        c = HttpCache(server.url)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "unreachable" warning: the retry succeeds
            for n in range(3):
                assert c.get(key_of(n)) is None
        assert not c.down and server.answered == 3 and server.connections == 3
    finally:
        server.close()


@pytest.mark.skipif(NGINX is None, reason="no nginx with the WebDAV module")
def test_a_forked_child_opens_its_own_connections(tmp_path):
    """doit -n workers inherit the build's cache: a child never sends on the parent's sockets
    (two processes writing one connection would interleave their requests)."""
    import multiprocessing

    server = NginxDav(NGINX, tmp_path / "nginx").start()
    try:
        c = HttpCache(server.url)
        c.put(key_of("fork"), {"ptx": b"parent"})
        parent_pool = c._pool()
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()

        def child():
            q.put((c.get(key_of("fork")), c._pool() is parent_pool))

        p = ctx.Process(target=child)
        p.start()
        got, same_pool = q.get(timeout=60)
        p.join(timeout=60)
        assert got == {"ptx": b"parent"} and not same_pool and p.exitcode == 0
        assert c.get(key_of("fork")) == {"ptx": b"parent"} and c._pool() is parent_pool
    finally:
        server.stop()
