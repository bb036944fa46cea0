"""A cache client for Bazel's HTTP remote-cache protocol: GET/HEAD/PUT `<base>/ac/<key>`, `<base>/cas/<sha256>`.

Works against bazel-remote (run it with `--disable_http_ac_validation`, since our AC bodies are
ttbuild JSON, not ActionResult protobufs) and against any WebDAV server that accepts PUT, such as
nginx with `dav_methods PUT DELETE; create_full_put_path on; client_max_body_size 0;`. CAS paths
are the body's sha256, as bazel-remote checks. Only the standard library is used (http.client),
with one keep-alive connection per thread. Credentials come from the URL, `$TTBUILD_CACHE_AUTH`
or netrc, and are never shown. Proxies come from the environment as urllib and curl read them.

An unreachable server (refused, DNS failure, no answer within `timeout` seconds) marks the cache
down for the rest of the process with ONE warning per base URL: every later call is an immediate
miss or no-op, so a dead remote costs one timeout per process, not one per task.
"""

from __future__ import annotations

import base64
import http.client
import netrc
import os
import socket
import threading
import urllib.parse
import urllib.request
from typing import Mapping

from ttbuild.cache.base import (
    MAX_AC_BYTES,
    Cache,
    CacheError,
    CacheStats,
    check_blob,
    check_key,
    decode_entry,
    encode_entry,
    entry_secret,
    log,
    warn,
)

_warned_down: set[str] = set()
_warned_lock = threading.Lock()


class _Down(Exception):
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
    honoured: urllib.request.getproxies / proxy_bypass), or None."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme)
    if not proxy or urllib.request.proxy_bypass(url.hostname or ""):
        return None
    parsed = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parsed if parsed.hostname else None


class HttpCache(Cache):
    """Bazel-protocol HTTP(S) cache at `base_url` (`http://host:port/prefix`; `user:pass@` in the
    URL, `$TTBUILD_CACHE_AUTH` or the host's netrc entry becomes basic auth and is never printed;
    `http_proxy` / `https_proxy` / `no_proxy` are honoured). `timeout` (seconds) bounds connect and each read;
    `deadline` (seconds, default `$TTBUILD_CACHE_DEADLINE` or 10) bounds a whole request: a server
    that answers, but too slowly (a byte every half second), is cut off there and marked down for
    the rest of the process like an unreachable one (one warning).

    Raises CacheError for a URL that is not http(s)."""

    def __init__(self, base_url: str, *, readonly: bool = False, timeout: float = 2.0,
                 deadline: float | None = None):
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise CacheError(f"not an http(s) cache URL: {_redact(url) if url.hostname else base_url!r}")
        self.url = url
        self.base_path = url.path.rstrip("/")
        self.readonly = readonly
        self.timeout = timeout
        if deadline is None:
            text = os.environ.get("TTBUILD_CACHE_DEADLINE", "")
            try:
                deadline = float(text) if text else 10.0
            except ValueError:
                deadline = 10.0
        self.deadline = max(deadline, timeout)
        self.name = _redact(url)
        self._headers = {"User-Agent": "ttbuild-cache"}
        cred = credentials(url)
        if cred is not None:
            self._headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
        # An http(s)_proxy from the environment (no_proxy honoured), as urllib and curl read them:
        # plain http goes through it with absolute URLs, https through a CONNECT tunnel.
        self.proxy = proxy_for(url)
        if self.proxy is not None and self.proxy.username is not None:
            pcred = f"{urllib.parse.unquote(self.proxy.username)}:{urllib.parse.unquote(self.proxy.password or '')}"
            self._proxy_auth = {"Proxy-Authorization": "Basic " + base64.b64encode(pcred.encode()).decode()}
        else:
            self._proxy_auth = {}
        if self.proxy is not None and url.scheme == "http":
            self._headers.update(self._proxy_auth)
        self._local = threading.local()
        self._stats = CacheStats(self.name)
        self.down = False
        self._put_warned = False
        self.secret = entry_secret()  # entries signed on put, checked on get (base.entry_secret)

    # -- transport -----------------------------------------------------------------------------
    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) != os.getpid():
            # Inherited through fork (doit -n): the parent owns that socket; never share it.
            conn = None
        if conn is None:
            cls = http.client.HTTPSConnection if self.url.scheme == "https" else http.client.HTTPConnection
            if self.proxy is None:
                conn = cls(self.url.hostname, self.url.port, timeout=self.timeout)
            else:
                conn = cls(self.proxy.hostname, self.proxy.port or 8080, timeout=self.timeout)
                if self.url.scheme == "https":
                    conn.set_tunnel(self.url.hostname, self.url.port or 443, headers=self._proxy_auth)
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _hostport(self) -> str:
        host = self.url.hostname or ""
        host = f"[{host}]" if ":" in host else host
        return host + (f":{self.url.port}" if self.url.port else "")

    def _drop_conn(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            conn.close()

    def _request(self, method: str, path: str, body: bytes | None = None,
                 limit: int = MAX_AC_BYTES) -> tuple[int, bytes, int | None]:
        """(status, body read up to `limit` + 1 bytes, Content-Length) or raise _Down.

        A keep-alive connection the server closed in the meantime gets one fresh retry; two
        attempts is the whole loop, so a failing server is never hammered.
        """
        if self.down:
            raise _Down(self.name)
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/octet-stream"
        for attempt in (0, 1):
            reused = (getattr(self._local, "conn", None) is not None
                      and getattr(self._local, "pid", None) == os.getpid())
            conn = self._conn()
            # The overall deadline: a watchdog shuts the socket down when it passes, which ends
            # whatever read is blocked (socket timeouts only bound each read).
            expired = threading.Event()

            def cut(conn=conn, expired=expired):
                expired.set()
                sock = getattr(conn, "sock", None)
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

            watchdog = threading.Timer(self.deadline, cut)
            watchdog.daemon = True
            watchdog.start()
            try:
                target = self.base_path + path
                if self.proxy is not None and self.url.scheme == "http":  # a proxy takes the absolute URL
                    target = f"http://{self._hostport()}{target}"
                conn.request(method, target, body=body, headers=headers)
                resp = conn.getresponse()
                length = resp.getheader("Content-Length")
                length = int(length) if length and length.isdigit() else None
                if method == "HEAD" or (length is not None and length <= limit):
                    data = resp.read()
                else:
                    data = resp.read(limit + 1)
                if expired.is_set():
                    raise socket.timeout(f"no complete answer within the {self.deadline:g} s deadline")
                if not resp.isclosed() or resp.will_close:
                    self._drop_conn()  # body left unread, or server closing: cannot reuse
                return resp.status, data, length
            except (OSError, http.client.HTTPException) as exc:
                self._drop_conn()
                cause: BaseException = exc
                if expired.is_set():
                    cause = socket.timeout(f"no complete answer within the {self.deadline:g} s deadline")
                elif attempt == 0 and reused and not isinstance(exc, (socket.timeout, ConnectionRefusedError)):
                    continue
                self._mark_down(cause)
            finally:
                watchdog.cancel()
        raise _Down(self.name)  # pragma: no cover - the loop always returns or marks down

    def _mark_down(self, exc: BaseException) -> None:
        self.down = True
        self._stats.errors += 1
        with _warned_lock:
            first = self.name not in _warned_down
            _warned_down.add(self.name)
        if first:
            warn(f"cache {self.name} is unreachable ({type(exc).__name__}: {exc}); "
                 f"going on without it for the rest of this process")
        raise _Down(self.name) from exc

    def close(self) -> None:
        self._drop_conn()

    # -- Cache API -----------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, bytes] | None:
        check_key(key)
        st = self._stats
        try:
            status, raw, _ = self._request("GET", f"/ac/{key}")
            if status == 404:
                st.misses += 1
                return None
            if status != 200:
                return self._error(f"GET ac/{key[:16]}... answered HTTP {status}")
            try:
                refs = decode_entry(raw, key, self.secret)
            except ValueError as exc:
                return self._drop(key, [], f"AC entry {key[:16]}... is corrupt ({exc})")
            outputs = {}
            for role, ref in refs.items():
                status, data, _ = self._request("GET", f"/cas/{ref.sha256}", limit=ref.size)
                if status == 404:
                    log.info("cache %s: entry %s... names missing blob %s...", self.name, key[:16],
                             ref.sha256[:16])
                    st.misses += 1
                    return None
                if status != 200:
                    return self._error(f"GET cas/{ref.sha256[:16]}... answered HTTP {status}")
                why = check_blob(ref, data)
                if why:
                    return self._drop(key, [ref.sha256], f"blob {ref.sha256[:16]}... ({role!r} of "
                                      f"entry {key[:16]}...) is corrupt: {why}")
                outputs[role] = data
        except _Down:
            st.misses += 1
            return None
        st.hits += 1
        return outputs

    def _error(self, why: str) -> None:
        self._stats.errors += 1
        self._stats.misses += 1
        log.info("cache %s: %s; treated as a miss", self.name, why)
        return None

    def forget(self, key: str, why: str) -> bool:
        check_key(key)
        self._drop(key, [], why)
        return not self.readonly

    def _drop(self, key: str, blobs: list[str], why: str) -> None:
        self._stats.corrupt += 1
        self._stats.misses += 1
        if self.readonly:
            warn(f"cache {self.name}: {why}; treated as a miss (read-only: not deleted)")
            return None
        warn(f"cache {self.name}: {why}; deleted, treated as a miss")
        # Best effort: nginx WebDAV honours DELETE, bazel-remote answers 405 and keeps the entry
        # (it already refuses blobs whose sha256 does not match, so it rarely has any to drop).
        for path in [f"/ac/{key}", *(f"/cas/{s}" for s in blobs)]:
            try:
                self._request("DELETE", path)
            except _Down:
                break
        return None

    def put(self, key: str, outputs: Mapping[str, bytes]) -> None:
        check_key(key)
        if self.readonly or self.down:
            return
        entry, refs = encode_entry(outputs, key, self.secret)
        try:
            for role, ref in refs.items():
                status, _, length = self._request("HEAD", f"/cas/{ref.sha256}")
                if status == 200 and length == ref.size:
                    continue
                status, _, _ = self._request("PUT", f"/cas/{ref.sha256}", bytes(outputs[role]))
                if status not in (200, 201, 204):
                    return self._put_refused(f"PUT cas/{ref.sha256[:16]}...", status)
            status, _, _ = self._request("PUT", f"/ac/{key}", entry)
            if status not in (200, 201, 204):
                return self._put_refused(f"PUT ac/{key[:16]}...", status)
        except _Down:
            return
        self._stats.puts += 1

    def _put_refused(self, what: str, status: int) -> None:
        self._stats.errors += 1
        if not self._put_warned:
            self._put_warned = True
            warn(f"cache {self.name}: {what} answered HTTP {status}; results are not uploaded")

    def stats(self) -> CacheStats:
        return self._stats
