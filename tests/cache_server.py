"""Test helpers for the HTTP cache: a real nginx WebDAV server on loopback, and a tiny scripted server.

`NginxDav` runs Debian's nginx (built `--with-http_dav_module`) as a foreground subprocess with
its config, logs, pid and document root in a temp directory: the real PUT-capable server the
HTTP cache is tested against. `ScriptedServer` is a small http.server that answers every request
with one fixed status, for failure paths nginx will not produce on demand (HTTP 500).
Both bind 127.0.0.1 only; callers stop them in fixture teardown.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now (bound, read, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_nginx() -> str | None:
    """Path of an nginx binary with the WebDAV module, or None."""
    exe = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                         if os.access(p, os.X_OK)), None)
    if not exe:
        return None
    proc = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=30)
    return exe if "--with-http_dav_module" in proc.stderr + proc.stdout else None


CONF = """\
{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {tmp}/www;
        client_max_body_size 0;
        location / {{
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
    }}
}}
"""


class NginxDav:
    """nginx serving `<tmp>/www` with PUT/DELETE on 127.0.0.1:<free port>; `url` is the base URL."""

    def __init__(self, exe: str, tmp: Path, prefix: str = "/cache"):
        self.exe, self.tmp = exe, Path(tmp)
        self.port = free_port()
        self.www = self.tmp / "www"
        self.root = self.www / prefix.strip("/")  # where the cache's ac/ and cas/ land
        self.url = f"http://127.0.0.1:{self.port}{prefix}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "NginxDav":
        self.www.mkdir(parents=True, exist_ok=True)
        # As root, nginx's workers would drop to `nobody` and could not write the temp root.
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        conf = self.tmp / "nginx.conf"
        conf.write_text(CONF.format(user=user, tmp=self.tmp, port=self.port))
        self.proc = subprocess.Popen(
            [self.exe, "-p", str(self.tmp), "-c", str(conf), "-e", str(self.tmp / "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # bounded: nginx starts in milliseconds
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace")
                raise RuntimeError(f"nginx exited with {self.proc.returncode}: {err}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not listen on 127.0.0.1:{self.port} within 15 s")

    def access_log(self) -> list[str]:
        path = self.tmp / "access.log"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()


class ScriptedServer:
    """A threaded http.server on 127.0.0.1 answering every request with `status`; records each
    request (method, path) and the client port it came from (`peers`: one per connection)."""

    def __init__(self, status: int):
        self.requests: list[tuple[str, str]] = []
        self.peers: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                outer.requests.append((self.command, self.path))
                outer.peers.append(self.client_address[1])
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_HEAD = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/prefix"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class LyingServer(ScriptedServer):
    """A server that answers every AC entry with an (unsigned) entry naming one `blob_size`-byte
    blob, and every blob with `blob_size` bytes: zeros that do not hash to the name the entry
    gave (`honest=False`, the review's server of wrong bytes), or the very bytes it named
    (`honest=True`: a big but valid cache). Counts the blob bytes it sent (`sent`)."""

    def __init__(self, blob_size: int, honest: bool = False):
        super().__init__(404)
        import hashlib
        import json

        outer, blob = self, bytes(blob_size)
        self.sent = 0
        sha = hashlib.sha256(blob if honest else b"not these bytes").hexdigest()
        entry = json.dumps({"schema": "ttbuild.cache/1", "outputs": {"cubin": {"sha256": sha, "size": blob_size}}},
                           sort_keys=True, separators=(",", ":")).encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                outer.requests.append((self.command, self.path))
                body = entry if "/ac/" in self.path else blob
                if "/cas/" in self.path:
                    outer.sent += len(body)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _refuse(self):  # it never takes anything, nor deletes what it lies about
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                outer.requests.append((self.command, self.path))
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_HEAD = do_DELETE = _refuse

            def log_message(self, *args):
                pass

        self.httpd.RequestHandlerClass = Handler


class ForwardProxy:
    """A threaded forwarding HTTP proxy on 127.0.0.1 (absolute-URI requests, as a client sends
    them to an http proxy): relays each request to its target and records (method, url,
    Proxy-Authorization header or None)."""

    def __init__(self):
        self.requests: list[tuple[str, str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self):
                import http.client
                import urllib.parse

                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                outer.requests.append((self.command, self.path, self.headers.get("Proxy-Authorization")))
                target = urllib.parse.urlsplit(self.path)
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "host")}
                conn.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body=body,
                             headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = _relay

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> "ForwardProxy":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
