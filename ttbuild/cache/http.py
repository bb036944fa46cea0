"""A cache client for Bazel's HTTP remote-cache protocol: `HttpStore` (GET/HEAD/PUT/DELETE `<base>/ac/<key>`, `<base>/cas/<sha256>`) under `HttpCache`, an EntryCache.

Works against bazel-remote (run it with `--disable_http_ac_validation`, since our AC bodies are
ttbuild JSON, not ActionResult protobufs) and against any WebDAV server that accepts PUT, such as
nginx with `dav_methods PUT DELETE; create_full_put_path on; client_max_body_size 0;`. CAS paths
are the body's sha256, as bazel-remote checks. Requests go through urllib3: a thread-safe pool
of keep-alive connections per server (`connections` of them, as many as the prefetch runs
threads: ttbuild.graph.prefetch), TLS verified against the system's certificates. What urllib3
leaves to its caller is here: the proxy the environment names (`http_proxy`, `https_proxy`,
`no_proxy`, upper or lower case, as curl and urllib read them), credentials from the URL,
`$TTBUILD_CACHE_AUTH` or netrc (never shown: names and log lines carry the URL without them),
an overall deadline per request, a size cap before reading a body, and one fresh retry of a
keep-alive connection the server dropped.

An unreachable server (refused, DNS failure, no answer within `timeout` seconds, or no complete
answer within `deadline`) marks the cache down for the rest of the process with ONE warning per
base URL: every later call is an immediate miss or no-op, so a dead remote costs one timeout per
process, not one per task.
"""

from __future__ import annotations

import base64
import functools
import heapq
import itertools
import netrc
import os
import socket
import threading
import time
import urllib.parse
import urllib.request
from types import SimpleNamespace
from typing import Mapping

from ttbuild.cache.base import MAX_AC_BYTES, BlobRef, CacheError, warn
from ttbuild.cache.base import fetch_budget as env_fetch_budget
from ttbuild.cache.entry import EntryCache
from ttbuild.cache.store import BlobStore, StoreDown, StoreError

_warned_down: set[str] = set()
_warned_lock = threading.Lock()
# Keep-alive connections per server: the prefetch's thread count (ttbuild.graph.prefetch), so no
# thread ever opens a connection the pool then has to throw away.
DEFAULT_CONNECTIONS = 32
# Corrupt answers (entries or blobs that fail their checks) after which a server is marked down:
# one that sends wrong bytes costs a build a few blobs and one warning, not one per stage.
CORRUPT_LIMIT = 3
_FROM_ENV = -1  # HttpCache(fetch_budget=...) default: ttbuild.cache.base.fetch_budget()


class _Down(StoreDown):
    """The server could not be reached (connection-level failure, not an HTTP status)."""


def _redact(url: urllib.parse.SplitResult) -> str:
    host = url.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{url.port}" if url.port else "")
    return urllib.parse.urlunsplit((url.scheme, netloc, url.path, "", ""))


def credentials(url: urllib.parse.SplitResult, env: Mapping[str, str] | None = None) -> str | None:
    """"user:password" for basic auth: the URL's userinfo, else `$TTBUILD_CACHE_AUTH`, else the
    netrc entry of the host (`$NETRC`, else ~/.netrc, as curl and pip read it); None without any.
    Never printed: the cache's name is the URL without them."""
    env = os.environ if env is None else env
    if url.username is not None:
        return f"{urllib.parse.unquote(url.username)}:{urllib.parse.unquote(url.password or '')}"
    if env.get("TTBUILD_CACHE_AUTH"):
        return env["TTBUILD_CACHE_AUTH"]
    path = env.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    if not os.path.isfile(path):
        return None
    try:
        entry = netrc.netrc(path).authenticators(url.hostname or "")
    except (OSError, netrc.NetrcParseError) as exc:
        warn(f"cache credentials: cannot read {path} ({exc}); going on without them")
        return None
    if entry is None:
        return None
    login, _, password = entry
    return f"{login}:{password or ''}"


def proxy_for(url: urllib.parse.SplitResult) -> urllib.parse.SplitResult | None:
    """The proxy the environment names for `url` (`http_proxy` / `https_proxy`, `no_proxy`
    honoured, either case: urllib.request.getproxies / proxy_bypass), or None."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme)
    if not proxy or urllib.request.proxy_bypass(url.hostname or ""):
        return None
    parsed = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parsed if parsed.hostname else None


# -- the overall deadline -------------------------------------------------------------------------
# urllib3's timeouts bound each socket operation (connect, every read), so a server dripping a
# byte per read timeout would hold a request for ever. One watchdog thread per process shuts the
# socket of a request down when its deadline passes, which ends whatever read is blocked.

_current = threading.local()  # .slot: the _Slot of the request this thread is making


class _Slot:
    """One request's deadline: the connection it runs on (set by _Cutting) and whether it expired."""

    __slots__ = ("conn", "expired", "lock")

    def __init__(self):
        self.conn = None
        self.expired = False
        self.lock = threading.Lock()

    def attach(self, conn) -> None:
        """Record the connection this request runs on; shut it down at once when the deadline already passed."""
        with self.lock:
            self.conn = conn
            expired = self.expired
        if expired:  # connected after the deadline passed: cut at once
            _shutdown(conn)

    def expire(self) -> None:
        """The deadline passed: mark the slot expired and shut its connection down, which ends a blocked read."""
        # Under the lock: once `detach` has returned, this slot never touches the connection
        # again (the pool may already have handed it to another request).
        with self.lock:
            self.expired = True
            if self.conn is not None:
                _shutdown(self.conn)

    def detach(self) -> None:
        """The request finished: forget its connection (the pool may reuse it), so expire never touches it."""
        with self.lock:
            self.conn = None


def _shutdown(conn) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Watchdog:
    """Expires `_Slot`s at their deadlines (time.monotonic seconds) from one daemon thread,
    started on first use (and again in a forked child, where the parent's does not run). It
    wakes at most every `tick` seconds: a deadline of seconds needs no finer grain, and a
    thousand requests a second must not mean a thousand wake-ups."""

    tick = 0.05

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):  # a lock held by a parent's thread at fork is never released
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Slot]] = []
        self._seq = itertools.count()
        self._started = False

    def arm(self, when: float) -> _Slot:
        """A new _Slot that expires at `when` (time.monotonic seconds), starting the watchdog thread on first use and
        waking it only when this deadline is the earliest pending."""
        slot = _Slot()
        with self._cond:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, args=(self._cond, self._heap),
                                 name="ttbuild-cache-deadline", daemon=True).start()
            # Only a deadline earlier than every pending one needs the thread awake (with one
            # deadline for all requests, that is the first after an idle spell).
            earliest = not self._heap or when < self._heap[0][0]
            heapq.heappush(self._heap, (when, next(self._seq), slot))
            if earliest:
                self._cond.notify()
        return slot

    def _run(self, cond: threading.Condition, heap: list) -> None:
        while True:
            with cond:
                while not heap or heap[0][0] > time.monotonic():
                    cond.wait(None if not heap else max(heap[0][0] - time.monotonic(), self.tick))
                now, due = time.monotonic(), []
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap)[2])
            for slot in due:
                slot.expire()


_watchdog = _Watchdog()


class _Cutting:
    """Connection mixin: attaches itself to the calling thread's request slot when it connects
    or sends a request, so the watchdog can shut exactly that socket down."""

    def connect(self):
        """urllib3's connect, attached first to the calling thread's request slot."""
        slot = getattr(_current, "slot", None)
        if slot is not None:
            slot.attach(self)
        return super().connect()

    def request(self, *args, **kwargs):
        """urllib3's request, attached first to the calling thread's request slot (a reused connection does not
        connect again)."""
        slot = getattr(_current, "slot", None)
        if slot is not None:
            slot.attach(self)
        return super().request(*args, **kwargs)


@functools.cache
def _transport() -> SimpleNamespace:
    """urllib3, imported on the first request (`import ttbuild.cache` stays standard library
    only: a build without a remote never loads it), with pool classes whose connections are
    _Cutting: `.urllib3`, `.pools` (scheme -> pool class), `.Error` (its base exception),
    `.ProtocolError` (a connection dropped or broken mid-answer)."""
    import urllib3
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class _HTTPConnection(_Cutting, HTTPConnection):
        pass

    class _HTTPSConnection(_Cutting, HTTPSConnection):
        pass

    class _HTTPPool(HTTPConnectionPool):
        ConnectionCls = _HTTPConnection

    class _HTTPSPool(HTTPSConnectionPool):
        ConnectionCls = _HTTPSConnection

    return SimpleNamespace(urllib3=urllib3, pools={"http": _HTTPPool, "https": _HTTPSPool},
                           Error=urllib3.exceptions.HTTPError, ProtocolError=urllib3.exceptions.ProtocolError)


def _basic(cred: str) -> str:
    return "Basic " + base64.b64encode(cred.encode()).decode()


class HttpStore(BlobStore):
    """The Bazel HTTP layout as a BlobStore: GET/HEAD/PUT/DELETE `<base>/ac/<key>` and
    `<base>/cas/<sha256>` over a urllib3 pool; see HttpCache for the arguments."""

    def __init__(self, base_url: str, *, timeout: float = 2.0, deadline: float | None = None,
                 connections: int = DEFAULT_CONNECTIONS, on_error=None):
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise CacheError(f"not an http(s) cache URL: {_redact(url) if url.hostname else base_url!r}")
        self.url = url
        self.base_path = url.path.rstrip("/")
        self.timeout = timeout
        if deadline is None:
            text = os.environ.get("TTBUILD_CACHE_DEADLINE", "")
            try:
                deadline = float(text) if text else 10.0
            except ValueError:
                deadline = 10.0
        self.deadline = max(deadline, timeout)
        self.connections = max(1, connections)
        self.name = _redact(url)
        # Requests name the server without userinfo (urllib3 logs the URL it requests at DEBUG).
        self._origin = f"{url.scheme}://{self._hostport()}"
        self._headers = {"User-Agent": "ttbuild-cache"}
        cred = credentials(url)
        if cred is not None:
            self._headers["Authorization"] = _basic(cred)
        # An http(s)_proxy from the environment (no_proxy honoured), as urllib and curl read them:
        # urllib3 sends plain http through it with absolute URLs, https through a CONNECT tunnel.
        self.proxy = proxy_for(url)
        self._proxy_headers = {}
        if self.proxy is not None and self.proxy.username is not None:
            pcred = f"{urllib.parse.unquote(self.proxy.username)}:{urllib.parse.unquote(self.proxy.password or '')}"
            self._proxy_headers = {"Proxy-Authorization": _basic(pcred)}
        self._pool_lock = threading.Lock()
        self._manager = None  # urllib3.PoolManager of this process (_pool)
        self._pid: int | None = None
        self.down = False
        self._on_error = on_error or (lambda: None)  # counts a connection-level failure

    # -- transport -----------------------------------------------------------------------------
    def _hostport(self) -> str:
        host = self.url.hostname or ""
        host = f"[{host}]" if ":" in host else host
        return host + (f":{self.url.port}" if self.url.port else "")

    def _pool(self):
        """This process's pool manager. One inherited through fork (doit -n workers) is left
        alone: its sockets are the parent's, and sharing one would interleave two requests."""
        with self._pool_lock:
            if self._manager is None or self._pid != os.getpid():
                t = _transport()
                urllib3 = t.urllib3
                kw = dict(num_pools=4, maxsize=self.connections, block=True, retries=False,
                          timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout))
                if self.proxy is None:
                    manager = urllib3.PoolManager(**kw)
                else:
                    p = self.proxy
                    host = f"[{p.hostname}]" if ":" in (p.hostname or "") else p.hostname
                    manager = urllib3.ProxyManager(f"{p.scheme}://{host}:{p.port or 8080}",
                                                   proxy_headers=self._proxy_headers, **kw)
                manager.pool_classes_by_scheme = dict(t.pools)
                self._manager, self._pid = manager, os.getpid()
            return self._manager

    def _request(self, method: str, path: str, body: bytes | None = None,
                 limit: int = MAX_AC_BYTES) -> tuple[int, bytes, int | None]:
        """(status, body read up to `limit` + 1 bytes, Content-Length) or raise _Down.

        A keep-alive connection the server dropped gets one fresh retry (urllib3 already
        replaces one it finds closed before sending); two attempts is the whole loop, so a
        failing server is never hammered. Timeouts and refused connections are not retried.
        """
        if self.down:
            raise _Down(self.name)
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/octet-stream"
        url = self._origin + self.base_path + path
        pool = self._pool()
        t = _transport()
        slot = _watchdog.arm(time.monotonic() + self.deadline)
        _current.slot = slot
        try:
            for attempt in (0, 1):
                resp = None
                try:
                    resp = pool.urlopen(method, url, body=body, headers=headers, redirect=False,
                                        preload_content=False, decode_content=False)
                    length = resp.headers.get("Content-Length")
                    length = int(length) if length and length.isdigit() else None
                    if method == "HEAD" or (length is not None and length <= limit):
                        data = resp.read()
                    else:  # unknown or too long: read just enough to tell, then drop the connection
                        data = resp.read(limit + 1)
                        resp.close()
                    if slot.expired:
                        raise TimeoutError(f"no complete answer within the {self.deadline:g} s deadline")
                    return resp.status, data, length
                except (OSError, t.Error) as exc:
                    if resp is not None:
                        resp.close()  # a half-read connection never goes back to the pool
                    cause: BaseException = exc
                    if slot.expired:
                        cause = TimeoutError(f"no complete answer within the {self.deadline:g} s deadline")
                    elif attempt == 0 and isinstance(exc, t.ProtocolError):
                        continue  # dropped by the server (reset, closed; timeouts are not): once more
                    self._mark_down(cause)
                finally:
                    slot.detach()  # before the connection goes back to the pool
                    if resp is not None:
                        resp.release_conn()
        finally:
            # A finished slot stays in the watchdog's heap until its time: expiring it is a no-op.
            _current.slot = None
        raise _Down(self.name)  # pragma: no cover - the loop always returns or marks down

    def _mark_down(self, exc: BaseException) -> None:
        self.down = True
        self._on_error()
        with _warned_lock:
            first = self.name not in _warned_down
            _warned_down.add(self.name)
        if first:
            warn(f"cache {self.name} is unreachable ({type(exc).__name__}: {exc}); "
                 f"going on without it for the rest of this process")
        raise _Down(self.name) from exc

    def close(self) -> None:
        """Close the pooled connections (in the process that made them: a forked child leaves its parent's sockets
        alone)."""
        with self._pool_lock:
            manager, self._manager = self._manager, None
        if manager is not None and self._pid == os.getpid():
            manager.clear()

    # -- BlobStore ----------------------------------------------------------------------------
    def _get(self, what: str, path: str, limit: int) -> bytes | None:
        status, data, _ = self._request("GET", path, limit=limit)
        if status == 404:
            return None
        if status != 200:
            raise StoreError(f"GET {what} answered HTTP {status}")
        return data

    def read_ac(self, key: str, limit: int) -> bytes | None:
        """GET ac/<key>: the body (at most `limit` + 1 bytes), None on 404, StoreError on any other status."""
        return self._get(f"ac/{key[:16]}...", f"/ac/{key}", limit)

    def read_cas(self, ref: BlobRef) -> bytes | None:
        """GET cas/<sha>: the body (at most `ref.size` + 1 bytes), None on 404, StoreError on any other status."""
        return self._get(f"cas/{ref.sha256[:16]}...", f"/cas/{ref.sha256}", ref.size)

    def has_cas(self, ref: BlobRef) -> bool:
        """HEAD cas/<sha>: True when the server holds it with `ref`'s size."""
        status, _, length = self._request("HEAD", f"/cas/{ref.sha256}")
        return status == 200 and length == ref.size

    def _put(self, what: str, path: str, data: bytes) -> None:
        status, _, _ = self._request("PUT", path, data)
        if status not in (200, 201, 204):
            raise StoreError(f"PUT {what} answered HTTP {status}; results are not uploaded")

    def write_cas(self, sha: str, data: bytes) -> None:
        """PUT cas/<sha>; StoreError unless the server answers 200, 201 or 204."""
        self._put(f"cas/{sha[:16]}...", f"/cas/{sha}", data)

    def write_ac(self, key: str, data: bytes) -> None:
        """PUT ac/<key>; StoreError unless the server answers 200, 201 or 204."""
        self._put(f"ac/{key[:16]}...", f"/ac/{key}", data)

    # Best effort: nginx WebDAV honours DELETE, bazel-remote answers 405 and keeps the entry
    # (it already refuses blobs whose sha256 does not match, so it rarely has any to drop).
    def delete_ac(self, key: str) -> bool:
        """DELETE ac/<key>; True when the server says it deleted it."""
        return self._request("DELETE", f"/ac/{key}")[0] in (200, 204)

    def delete_cas(self, sha: str) -> bool:
        """DELETE cas/<sha>; True when the server says it deleted it."""
        return self._request("DELETE", f"/cas/{sha}")[0] in (200, 204)


class HttpCache(EntryCache):
    """Bazel-protocol HTTP(S) cache at `base_url` (`http://host:port/prefix`; `user:pass@` in the
    URL, `$TTBUILD_CACHE_AUTH` or the host's netrc entry becomes basic auth and is never printed;
    `http_proxy` / `https_proxy` / `no_proxy` are honoured): EntryCache over an HttpStore.
    `timeout` (seconds) bounds connect and each read; `deadline` (seconds, default
    `$TTBUILD_CACHE_DEADLINE` or 10) bounds a whole request: a server that answers, but too
    slowly (a byte every half second), is cut off there and marked down for the rest of the
    process like an unreachable one (one warning). So is one that gives `corrupt_limit` corrupt
    answers. `connections`: keep-alive connections kept open per server (threads beyond it wait
    for one). `fetch_budget`: bytes of blobs it may fetch in all (default
    ttbuild.cache.base.fetch_budget).

    Raises CacheError for a URL that is not http(s)."""

    def __init__(self, base_url: str, *, readonly: bool = False, timeout: float = 2.0,
                 deadline: float | None = None, connections: int = DEFAULT_CONNECTIONS,
                 corrupt_limit: int | None = CORRUPT_LIMIT, fetch_budget: int | None = _FROM_ENV):
        store = HttpStore(base_url, timeout=timeout, deadline=deadline, connections=connections,
                          on_error=self._count_error)
        super().__init__(store, readonly=readonly, corrupt_limit=corrupt_limit,
                         fetch_budget=env_fetch_budget() if fetch_budget == _FROM_ENV else fetch_budget)
        self.url, self.timeout, self.deadline = store.url, store.timeout, store.deadline
        self.connections, self.proxy, self.base_path = store.connections, store.proxy, store.base_path

    def _count_error(self) -> None:
        self._stats.errors += 1

    @property
    def down(self) -> bool:
        """True once the server is marked down for the rest of this process."""
        return self.store.down

    @property
    def _headers(self) -> dict:
        return self.store._headers

    def _pool(self):
        return self.store._pool()

    def _request(self, method: str, path: str, body: bytes | None = None, limit: int = MAX_AC_BYTES):
        """HttpStore._request: (status, body, Content-Length) or raise StoreDown."""
        return self.store._request(method, path, body, limit)
