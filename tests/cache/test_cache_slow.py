"""A slow or hostile remote cannot stall or bloat a build (issue 14, item 4): each request has an overall deadline (a server dripping a byte every 0.3 s is cut off and marked down, one warning, the build goes on), and an entry claiming a huge blob is refused before anything is read."""

import json
import socket
import threading
import time
import warnings

import pytest

from ttbuild.cache import DirCache, HttpCache, action_key, digest
from ttbuild.cache import http as http_mod


def key_of(n) -> str:
    return action_key("cubin", 1, {"ptx": digest(str(n).encode())}, {"arch": "sm_90a"}, {})


@pytest.fixture(autouse=True)
def fresh_warning_memory(monkeypatch):
    monkeypatch.setattr(http_mod, "_warned_down", set())
    monkeypatch.delenv("TTBUILD_CACHE_HMAC_KEY", raising=False)


class Dripper:
    """Answers every request with a valid status line, then one byte every `every` seconds."""

    def __init__(self, every=0.3):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/c"
        self.every, self.stop = every, threading.Event()
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not self.stop.is_set():
                conn.sendall(b"x")
                time.sleep(self.every)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


def test_a_dripping_server_is_cut_off_at_the_deadline_and_marked_down():
    server = Dripper()
    try:
        cache = HttpCache(server.url, timeout=1.0, deadline=1.5)
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert cache.get(key_of(1)) is None
            first = time.monotonic() - t0
            for n in range(2, 30):  # the rest of a build's stages: no request, no new warning
                assert cache.get(key_of(n)) is None
                cache.put(key_of(n), {"cubin": b"x"})
        total = time.monotonic() - t0
        assert first < 4.0, first            # one deadline, not 100000 bytes x 0.3 s
        assert total < first + 1.0, total    # down for the rest of the process
        assert cache.down and server.accepted == 1
        downs = [w for w in caught if "unreachable" in str(w.message)]
        assert len(downs) == 1 and "deadline" in str(downs[0].message), [str(w.message) for w in caught]
    finally:
        server.close()


def test_an_entry_claiming_a_huge_blob_is_refused_before_reading(tmp_path):
    c = DirCache(tmp_path / "c")
    c.put(key_of(1), {"cubin": b"small"})
    entry = json.loads(c.ac_path(key_of(1)).read_bytes())
    entry["outputs"]["cubin"]["size"] = 4 << 30  # "4 GiB"
    c.ac_path(key_of(1)).write_text(json.dumps(entry))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert c.get(key_of(1)) is None
    assert any("more than the" in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_the_cap_is_configurable(tmp_path, monkeypatch):
    monkeypatch.setenv("TTBUILD_CACHE_MAX_BLOB_BYTES", "4")
    c = DirCache(tmp_path / "c")
    c.put(key_of(1), {"cubin": b"12345"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert c.get(key_of(1)) is None
    monkeypatch.setenv("TTBUILD_CACHE_MAX_BLOB_BYTES", "5")
    c.put(key_of(2), {"cubin": b"12345"})
    assert c.get(key_of(2)) == {"cubin": b"12345"}
