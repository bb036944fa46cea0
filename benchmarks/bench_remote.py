"""A fresh checkout built from a remote HTTP cache with added round-trip time: with the parallel prefetch (ttbuild.graph.prefetch) and without it (TTBUILD_PREFETCH=0).

    python benchmarks/bench_remote.py [--variants 1000] [--rtt-ms 10] [--stages fake|real]

Starts nginx (WebDAV, as the tests do: tests/cache_server.py) behind a TCP proxy that delays
every chunk by half the round-trip time each way, fills the remote from one checkout, then
times `ttbuild build` in fresh checkouts (no artifacts, empty local cache) that compile
nothing. Prints the wall times and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))

from bench_build import generate, ttbuild  # noqa: E402
from cache_server import NginxDav, find_nginx, free_port  # noqa: E402


def delay_proxy(target_port: int, delay: float) -> int:
    """A TCP proxy on a free loopback port to 127.0.0.1:target_port that sleeps `delay`
    seconds before forwarding each chunk, in both directions (one round trip costs 2x)."""
    port = free_port()
    server = socket.create_server(("127.0.0.1", port))

    def pipe(src, dst):
        try:
            while data := src.recv(65536):
                time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept():
        while True:
            client, _ = server.accept()
            upstream = socket.create_connection(("127.0.0.1", target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return port


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--rtt-ms", type=float, default=10.0)
    ap.add_argument("--stages", choices=("fake", "real"), default="fake")
    args = ap.parse_args(argv)
    exe = find_nginx()
    if exe is None:
        sys.exit("no nginx with the WebDAV module on PATH (apt-get install -y nginx)")
    root = Path(tempfile.mkdtemp(prefix="ttbuild-remote-"))
    nginx = NginxDav(exe, root / "nginx").start()
    try:
        port = int(nginx.url.split(":")[2].split("/")[0])
        proxied = f"http://127.0.0.1:{delay_proxy(port, args.rtt_ms / 2000)}/cache/bench"
        package = "fake_stages" if args.stages == "fake" else "ttbuild.stages"
        env = dict(os.environ, CI="1", PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
        env.pop("TTBUILD_CACHE", None)
        files = max(1, -(-args.variants // 40))
        seed = root / "seed"
        generate(seed, args.variants, files)
        env_a = dict(env, TTBUILD_CACHE_DIR=str(root / "cache-a"), TTBUILD_CACHE=f"{nginx.url}/bench")
        ttbuild(seed, env_a, "build", "-j", "2", stage_package=package)  # fills the remote directly
        rows = []
        for label, prefetch in (("with prefetch", "1"), ("without (TTBUILD_PREFETCH=0)", "0")):
            job = root / f"job-{prefetch}"
            shutil.copytree(seed / "kernels", job / "kernels")
            env_b = dict(env, TTBUILD_CACHE_DIR=str(root / f"cache-{prefetch}"), TTBUILD_CACHE=proxied,
                         TTBUILD_PREFETCH=prefetch)
            secs, proc = ttbuild(job, env_b, "build", "-j", "2", stage_package=package)
            summary = next((line for line in proc.stdout.splitlines() if line.startswith("ttbuild: ") and
                            "stages ran" in line), "?")
            fetched = next((line[len("ttbuild: "):] for line in proc.stdout.splitlines()
                            if line.startswith("ttbuild: prefetched")), "")
            rows.append((label, secs, summary + (f" ({fetched})" if fetched else "")))
        print(f"fresh checkout from a remote cache, {args.variants} variants ({args.stages} stages), "
              f"+{args.rtt_ms:g} ms round trip, -j 2, {os.cpu_count()} CPUs")
        for label, secs, summary in rows:
            print(f"{label:30s} {secs:7.2f} s   {summary}")
        print(f"without / with: {rows[1][1] / rows[0][1]:.1f}x")
    finally:
        nginx.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
