"""Load on the HTTP side (a benchmark, not a test; loopback only, bounded in count and time).

On the 2048-PCI-device synthetic host of benchmarks/scrape.py (1024 drives, `ports` layout),
with one NVMe namespace's `queue/logical_block_size` replaced by a FIFO (a read that blocks, as
a hung driver attribute does), the real `storpath serve` is put under, all at once:
- 800 idle connections, opened first and held open to the end (TLS: never handshaken), from
  four addresses other than the scrapes' (one address may hold 256 connections);
- bursts of 200 scrapes that start together (a barrier), as Prometheus asks (OpenMetrics
  first, gzip), each over its own connection;
- requests with large headers: 24 KiB (under the limit, answered) and 200 KiB (refused).

Reported: latency of the burst scrapes (p50, p99, max), their status codes, scrapes computed
(single flight), the nvme collector's success (0: its blocked read is reported, not waited
for), the exporter's threads before and after, peak RSS.

    python -m benchmarks.load [--bursts 3] [--idle 800] [--concurrent 200] [--tls]
                              [--no-fifo] [--source DIR] [--max-requests 0]

A bounded run: at most bursts x concurrent scrapes, each with a 30 s timeout.

`--tls` serves TLS with basic auth (bcrypt cost 10). `--source DIR` runs the exporter from
another checkout (DIR/exporter), to compare servers; `--no-fifo` leaves the blocking
attribute out (a server without a scrape deadline would hang on it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.scrape import ACCEPT, host_tree  # noqa: E402
from tests.conftest import run_exporter  # noqa: E402
from tests.processes import memory_bytes  # noqa: E402

REQUEST_TIMEOUT = 30.0


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Threads:"))


class Client:
    def __init__(self, port: int, tls_ca: str = "", auth: str = ""):
        self.port = port
        self.context = ssl.create_default_context(cafile=tls_ca) if tls_ca else None
        self.auth = auth

    def connection(self) -> http.client.HTTPConnection:
        if self.context is not None:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT, context=self.context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)

    def get(self, path: str = "/metrics", headers: dict = None) -> tuple:
        """(status or error name, seconds, body)."""
        headers = dict(headers or {})
        if self.auth:
            headers["Authorization"] = self.auth
        conn = self.connection()
        start = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            return response.status, time.perf_counter() - start, body
        except (OSError, http.client.HTTPException) as exc:
            return type(exc).__name__, time.perf_counter() - start, b""
        finally:
            conn.close()


def _burst(client: Client, count: int) -> list:
    barrier = threading.Barrier(count)
    results = [None] * count
    headers = {"Accept": ACCEPT["openmetrics"], "Accept-Encoding": "gzip",
               "X-Prometheus-Scrape-Timeout-Seconds": "10"}

    def one(i):
        barrier.wait()
        status, seconds, _ = client.get(headers=headers)
        results[i] = (status, seconds)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(REQUEST_TIMEOUT * 2)
    return [r for r in results if r is not None]


def _large_headers(client: Client, out: list) -> None:
    for size in [24 * 1024] * 10 + [200 * 1024] * 10:
        status, _, _ = client.get("/-/healthy", headers={"X-Filler": "x" * size})
        out.append((size, status))


IDLE_SOURCES = 4  # idle connections come from 127.0.0.2-5: under the per-address cap, apart from the scrapes'


def _idle(port: int, count: int) -> tuple:
    """(open sockets, connections that failed)."""
    sockets, failed = [], 0
    for index in range(count):
        try:
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5,
                                                    source_address=(f"127.0.0.{2 + index % IDLE_SOURCES}", 0)))
        except OSError:
            failed += 1
    return sockets, failed


# A namespace's LBA size is read on every scrape (by the nvme collector): a FIFO there blocks
# a scrape's read as a hung driver attribute would.
BLOCKING_ATTRIBUTE = ("sys", "class", "block", "nvme0n1", "queue", "logical_block_size")
ATTRIBUTE_TEXT = "4096\n"  # what build_host writes there


def _fifo(host: str) -> str:
    path = os.path.realpath(os.path.join(host, *BLOCKING_ATTRIBUTE))
    if os.path.exists(path) and not os.path.isfile(path):
        return path  # left from an interrupted run
    os.unlink(path)
    os.mkfifo(path)
    return path


def _unfifo(path: str) -> None:
    try:  # release a reader still blocked in it, then put the attribute back
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass
    os.unlink(path)
    with open(path, "w") as handle:
        handle.write(ATTRIBUTE_TEXT)


def run(args) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host = os.path.join(args.workdir, "host-ports-1024")
    host_tree(host, 1024, "ports")
    fifo = None if args.no_fifo else _fifo(host)
    extra = [f"--path.sysfs={host}/sys", f"--path.procfs={host}/proc", f"--path.captured={host}/captured"]
    if args.max_requests >= 0:
        extra.append(f"--web.max-requests={args.max_requests}")
    ca, auth, tls_auth = "", "", None
    if args.tls:
        from tests.tls import make_certs, write_web_config

        certs = make_certs(os.path.join(args.workdir, "certs"))
        extra.append("--web.config.file=" + write_web_config(os.path.join(args.workdir, "web.yml"), certs,
                                                             users={"prometheus": "s3cret"}))
        ca, tls_auth = certs.ca, ("prometheus", "s3cret")
        import base64

        auth = "Basic " + base64.b64encode(b"prometheus:s3cret").decode()
    env = {"PYTHONPATH": os.path.join(os.path.abspath(args.source), "exporter")} if args.source else None
    try:
        with run_exporter(extra, args.workdir, env=env, ca=ca or None, auth=tls_auth) as exporter:
            pid = exporter.proc.pid
            client = Client(exporter.port, ca, auth)
            first = client.get(headers={"Accept-Encoding": "gzip"})
            threads_before = _threads(pid)
            idle, idle_failed = _idle(exporter.port, args.idle)
            large: list = []
            header_thread = threading.Thread(target=_large_headers, args=(client, large))
            header_thread.start()
            bursts = []
            for _ in range(args.bursts):
                bursts.extend(_burst(client, args.concurrent))
            header_thread.join(120)
            still_idle = sum(1 for s in idle if _alive(s))
            status, _, body = client.get(headers={"Accept-Encoding": "identity"})
            text = body.decode("utf-8", "replace")
            nvme = [line.rsplit(" ", 1)[1] for line in text.splitlines()
                    if line.startswith('storpath_scrape_collector_success{collector="nvme"}')]
            threads_after = _threads(pid)
            rss = memory_bytes(pid, "VmHWM")
            for s in idle:
                s.close()
            log = exporter.log()
    finally:
        if fifo:
            _unfifo(fifo)
    latencies = sorted(seconds for status, seconds in bursts if status == 200)
    codes: dict = {}
    for status, _ in bursts:
        codes[str(status)] = codes.get(str(status), 0) + 1
    return {
        "tls": bool(args.tls),
        "first_scrape_s": round(first[1], 2),
        "burst_requests": len(bursts),
        "statuses": codes,
        "p50_ms": round(statistics.median(latencies) * 1000) if latencies else None,
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000) if latencies else None,
        "max_ms": round(latencies[-1] * 1000) if latencies else None,
        "idle_connections_failed": idle_failed,
        "idle_connections_open_at_end": still_idle,
        "large_headers": {f"{size // 1024}KiB": sorted({str(s) for sz, s in large if sz == size})
                          for size in sorted({sz for sz, _ in large})},
        "nvme_collector_success": nvme[0] if nvme else None,
        "threads_before": threads_before,
        "threads_after": threads_after,
        "peak_rss_mb": round(rss / 1e6, 1),
        "final_status": status,
        "log_errors": sum(1 for line in log.splitlines() if "level=error" in line),
    }


def _alive(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--idle", type=int, default=800)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--no-fifo", action="store_true")
    parser.add_argument("--max-requests", type=int, default=0,
                        help="--web.max-requests of the exporter (-1: leave the flag out)")
    parser.add_argument("--source", help="run the exporter from this checkout")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "storpath-bench"))
    args = parser.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    print(json.dumps(run(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
