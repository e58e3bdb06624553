"""The HTTP side: /metrics, /-/healthy, /-/ready and a landing page."""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Tuple
from urllib.parse import urlsplit

from storpath import __version__, exposition, landing, log

LOG = log.get("web")


def parse_listen_address(text: str) -> Tuple[str, int]:
    """':9866' -> ('', 9866); '127.0.0.1:9866'; '[::1]:9866'."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"listen address {text!r} has no port (expected e.g. :9866 or 127.0.0.1:9866)")
    host = host.strip("[]")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"listen address {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"listen address {text!r}: port {number} out of range")
    return host, number


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, handler, registry, collector_names: List[str]):
        host = address[0]
        if ":" in host or host == "":
            self.address_family = socket.AF_INET6
        super().__init__(address, handler, bind_and_activate=False)
        if self.address_family == socket.AF_INET6:
            # Listen on IPv4 too when bound to all addresses (':9866' as node_exporter does).
            try:
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            except OSError:
                pass
        try:
            self.server_bind()
            self.server_activate()
        except OSError:
            self.server_close()
            raise
        self.registry = registry
        self.collector_names = collector_names
        self.runbook_base = landing.DEFAULT_RUNBOOK_BASE  # serve sets web.runbook_url_base
        self.config: dict = {}  # the validated config: which findings subsystems are enabled
        # Both keep the last scrape's pieces: an unchanged family costs no work twice.
        self.writer = exposition.TextWriter()
        self.gzip = exposition.ChunkedGzip()


def _ipv6_available() -> bool:
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


class Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = f"storpath/{__version__}"

    def log_message(self, fmt, *args):  # route http.server's access log to debug
        LOG.debug(fmt % args)

    def _send(self, code: int, body: bytes, content_type: str, extra=()) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        for key, value in extra:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/metrics":
            # Always the text format 0.0.4 (as node_exporter serves by default); Prometheus
            # accepts it whatever it asks for first.
            content_type = exposition.CONTENT_TYPE
            try:
                chunks = self.server.writer.chunks(self.server.registry.collect())
            except Exception as exc:  # never expected: collectors are fenced off in StorpathExporter
                log.kv(LOG, logging.ERROR, "metrics exposition failed", err=str(exc))
                self._send(500, b"exposition failed\n", "text/plain; charset=utf-8")
                return
            extra = []
            if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                body = self.server.gzip.compress(chunks)
                extra.append(("Content-Encoding", "gzip"))
            else:
                body = b"".join(text for _, text in chunks)
            self._send(200, body, content_type, extra)
        elif path in ("/-/healthy", "/-/ready"):
            self._send(200, b"Healthy\n" if path == "/-/healthy" else b"Ready\n", "text/plain; charset=utf-8")
        elif path == "/":
            # The topology of the last scrape (storpath.landing); never a scrape of its own.
            page = landing.page(getattr(self.server.registry, "exporter", None), self.server.collector_names,
                                runbook_base=self.server.runbook_base, config=self.server.config)
            self._send(200, page.encode(), "text/html; charset=utf-8")
        else:
            self._send(404, b"Not found. Try /metrics\n", "text/plain; charset=utf-8")


def make_server(listen: str, registry, collector_names: List[str]) -> _Server:
    host, port = parse_listen_address(listen)
    if host == "" and not _ipv6_available():
        host = "0.0.0.0"
    return _Server((host, port), Handler, registry, collector_names)


def serve_in_thread(server: _Server) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return thread
