"""The HTTP side: /metrics (or --web.telemetry-path), /-/healthy, /-/ready, a landing page and
the runbooks (/runbooks/).

The server is cheroot (Debian: python3-cheroot), chosen over the standard library's
ThreadingHTTPServer by measurement (benchmarks/load.py, 2 cores, loopback; figures in
docs/serving.md): the standard library starts a thread per connection and keeps it for as
long as the client keeps the connection open, so 800 idle keep-alive connections are 800
threads, and it has no limit on the size of a request's headers. cheroot has a fixed pool
of worker threads, parks idle keep-alive connections in a selector (no thread), answers
HTTP/1.1 with keep-alive, and caps the header size. A scrape costs the same with either
(benchmarks/scrape.py at 1024 drives).

Where storpath changes how cheroot works, it does so in storpath.http.cheroot_patches, the
one module that reaches into cheroot's internals.
"""

from __future__ import annotations

import base64
import logging
import resource
import socket
import threading
import time
from dataclasses import field
from typing import Any, List, Optional, Sequence, Tuple, Union

from storpath.base.records import datarecord
from storpath import __version__
from storpath.scrape import exposition
from storpath.base import log
from storpath.base.config import DEFAULTS
from storpath.report.exporter import send_margin
from storpath.http import negotiation, runbooks
from storpath.http.cheroot_patches import TLSAdapter, WSGIServer
from storpath.http.scrape import STALE_AFTER, Scraper
from storpath.http.webconfig import Authenticator, AuthenticatorBusy, WebConfig

LOG = log.get("web")

# Bounds on what one client can make the server hold (see docs/serving.md).
MAX_HEADER_BYTES = 32 * 1024  # request line and headers; Prometheus sends well under 1 KiB
MAX_BODY_BYTES = 4 * 1024  # cheroot's own bound; cheroot_patches._Headers refuses any body before it
SOCKET_TIMEOUT = 10.0  # per read or write on a connection, and how long an idle keep-alive connection is kept
# A request's line and headers must have arrived within this of their first byte (plain HTTP,
# read ahead without a worker) or of a worker taking the connection (TLS: handshake included).
# Prometheus sends its request in one packet.
REQUEST_READ_TIMEOUT = 5.0
ANSWER_WRITE_TIMEOUT = 30.0  # an answer not taken by then is of no use to a scraper (Prometheus' default: 10 s)
PER_CLIENT_READING = 64  # requests from one address read ahead at once (each up to MAX_HEADER_BYTES)
ALL_READING = 256  # requests read ahead at once from all addresses: at most 8 MiB of half-sent heads
PER_CLIENT_SPARE = 2  # workers one address can never hold: left for the others
LANDING_LANE = 2  # landing pages drawn or sent at once; more get 503
KEEP_ALIVE_IDLE_MAX = 64  # idle keep-alive connections kept open; more are closed after their answer
# Connections open at once from one address; past it, the address's oldest idle connection
# (those that never sent a whole request first) is closed for each new one, so an address
# cannot lock itself out (cheroot_patches._ConnectionManager). Far
# above what a Prometheus pair, a health checker and a proxy in front need (each scrape or
# page holds one, and at most --web.max-requests + 4 are served at once), far below a
# descriptor table: one client cannot take every descriptor.
PER_CLIENT_CONNECTIONS = 256
# Descriptors kept from client connections for the scrape's own reads, the background tasks'
# pipes and fio: past (RLIMIT_NOFILE - this) open connections, the oldest idle ones are closed.
RESERVED_DESCRIPTORS = 128
EXTRA_THREADS = 4  # workers beyond --web.max-requests, for health checks, 401s and 503s
UNLIMITED_THREADS = 64  # workers when --web.max-requests is 0
START_THREADS = 4  # workers started at once; more are started when a request finds none idle
TEXT = "text/plain; charset=utf-8"  # the content type of every answer but the metrics and the landing page


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


def _ipv6_available() -> bool:
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


def max_connections(addresses: int = 1) -> int:
    """Client connections open at once on each of `addresses` listen addresses: their share of
    what the descriptor limit (as raised at start) leaves after RESERVED_DESCRIPTORS, and at
    least a few."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(16, (soft - RESERVED_DESCRIPTORS) // addresses)


@datarecord
class Site:
    """Everything a reload may change, swapped as one object so a request sees one version."""

    scraper: Scraper
    collector_names: List[str]
    web: WebConfig = field(default_factory=WebConfig)
    telemetry_path: str = "/metrics"
    max_requests: int = 40
    timeout: float = 10.0  # the server's scrape deadline (web.scrape_timeout): the scraper was made with it
    exporter: Any = None  # what the landing page draws: its last_snapshot()
    runbook_base: str = DEFAULTS["web"]["runbook_url_base"]
    config: dict = field(default_factory=dict)  # the validated config: which findings subsystems are enabled

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.web.users) if self.web.users else None
        self.slots = threading.BoundedSemaphore(self.max_requests) if self.max_requests > 0 else None
        # The landing page has a lane of its own, apart from the scrapes' slots: visitors never
        # take what /metrics needs, and more than LANDING_LANE at once are refused, not queued.
        self.landing_lane = threading.BoundedSemaphore(LANDING_LANE)
        self._landing = None
        self._landing_lock = threading.Lock()

    def landing(self):
        """The landing page's maker (storpath.http.landing.Landing), which keeps the page of the last
        scrape. Made on the first visit: the page's modules (tree, findings) cost about 1 MB a
        scrape-only exporter need not hold."""
        with self._landing_lock:
            if self._landing is None:
                from storpath.http import landing

                self._landing = landing.Landing(self.collector_names, metrics_path=self.telemetry_path.lstrip("/"),
                                                runbook_base=self.runbook_base, config=self.config)
            return self._landing


def client_wait(header: Optional[str], deadline: float) -> float:
    """How long one request waits for the scrape: its own deadline, never anyone else's.
    Prometheus sends its scrape timeout (X-Prometheus-Scrape-Timeout-Seconds); the answer must
    still be sent within it, so a tenth (at most half a second) is kept for that. Without a
    usable header: the server's scrape deadline and the same margin again."""
    try:
        value = float(header) if header else 0.0
    except ValueError:
        value = 0.0
    if not value > 0 or value != value or value == float("inf"):
        return deadline + send_margin(deadline) + 1.0
    return max(value - send_margin(value), 0.0)


class App:
    """The WSGI application."""

    def __init__(self, site: Site):
        self.site = site

    def __call__(self, environ, start_response):
        site = self.site
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        answer = None  # (status, body: bytes or a list of pieces, content type, extra headers)
        if path in ("/-/healthy", "/-/ready") and path != site.telemetry_path:
            # No password for these: they say nothing about the host, and a kubelet's or load
            # balancer's health check has none to send.
            answer = ("200 OK", b"Healthy\n" if path == "/-/healthy" else b"Ready\n", TEXT, ())
        elif site.auth is not None:
            try:
                if not self._authorized(site, environ.get("HTTP_AUTHORIZATION")):
                    answer = ("401 Unauthorized", b"Unauthorized\n", TEXT,
                              [("WWW-Authenticate", 'Basic realm="storpath", charset="UTF-8"')])
            except AuthenticatorBusy:
                answer = ("429 Too Many Requests", b"Too many password checks at once\n", TEXT, [("Retry-After", "1")])
        if answer is None:
            if method not in ("GET", "HEAD"):
                answer = ("405 Method Not Allowed", b"Method not allowed\n", TEXT, [("Allow", "GET, HEAD")])
            elif path == site.telemetry_path:
                answer = self._metrics(site, environ)
            elif path == "/" and site.telemetry_path != "/":
                # The topology of the last scrape (storpath.http.landing); never a scrape of its own.
                number = _page_number(environ.get("QUERY_STRING", ""))
                if number is None:
                    answer = ("400 Bad Request", b"page: a whole number from 1, as in /?page=2\n", TEXT, ())
                elif not site.landing_lane.acquire(blocking=False):
                    answer = ("503 Service Unavailable", b"Too many landing page requests at once\n", TEXT,
                              [("Retry-After", "1")])
                else:
                    try:
                        answer = ("200 OK", site.landing().page(site.exporter, number), "text/html; charset=utf-8",
                                  ())
                    finally:
                        site.landing_lane.release()
            elif path.startswith(runbooks.PREFIX) or path == runbooks.PREFIX.rstrip("/"):
                answer = runbooks.answer(path)  # the runbooks the alerts link to (storpath.http.runbooks)
            else:
                answer = ("404 Not Found", f"Not found. Try {site.telemetry_path}\n".encode(), TEXT, ())
        status, body, content_type, extra = answer
        chunks = [body] if isinstance(body, bytes) else body
        length = sum(len(chunk) for chunk in chunks)
        start_response(status, list(site.web.headers) + [("Content-Type", content_type),
                                                         ("Content-Length", str(length))] + list(extra))
        return [b""] if method == "HEAD" else chunks

    @staticmethod
    def _authorized(site: Site, header: Optional[str]) -> bool:
        if not header or not header[:6].lower() == "basic ":
            return False
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return bool(sep) and site.auth.check(user, password)

    @staticmethod
    def _metrics(site: Site, environ) -> Tuple[str, Any, str, List[Tuple[str, str]]]:
        """The answer to a scrape: (status, body, content type, extra headers)."""
        if site.slots is not None and not site.slots.acquire(blocking=False):
            log.once(LOG, logging.WARNING, ("max-requests",), "more concurrent scrapes than --web.max-requests: "
                     "answering 503", max_requests=site.max_requests)
            return ("503 Service Unavailable", b"Too many concurrent scrapes (--web.max-requests)\n", TEXT,
                    [("Retry-After", "1")])
        try:
            wait = client_wait(environ.get("HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS"), site.timeout)
            flight = site.scraper.scrape(wait)
            if flight is None:
                # This client's deadline ended before the scrape in progress landed, and there is no
                # recent answer to give: it is told so; the scrape goes on for everyone else.
                return ("503 Service Unavailable",
                        f"The scrape in progress did not finish within this request's deadline ({wait:.3g} s) "
                        f"and no answer of the last {STALE_AFTER:g} s is kept\n".encode(), TEXT, [("Retry-After", "1")])
            if flight.error is not None:  # never expected: collectors are fenced off in StorpathExporter
                log.kv(LOG, logging.ERROR, "metrics exposition failed", err=str(flight.error))
                return "500 Internal Server Error", b"exposition failed\n", TEXT, []
            openmetrics = negotiation.wants_openmetrics(environ.get("HTTP_ACCEPT"))
            compressed = negotiation.wants_gzip(environ.get("HTTP_ACCEPT_ENCODING"))
            body = flight.chunks(openmetrics, compressed)
            extra = [("Vary", "Accept, Accept-Encoding")]
            age = time.monotonic() - flight.landed
            if age >= 1.0:  # the last complete answer, given to a client whose deadline ended first
                extra.append(("Age", str(int(age))))
            if compressed:
                extra.append(("Content-Encoding", "gzip"))
            content_type = exposition.OPENMETRICS_CONTENT_TYPE if openmetrics else exposition.CONTENT_TYPE
            return "200 OK", body, content_type, extra
        finally:
            if site.slots is not None:
                site.slots.release()


class Server:
    """The listening servers, one per listen address (as exporter-toolkit listens on every
    --web.listen-address given), in front of one App; `app.site` is what a reload swaps.
    Each address has its own workers and connection bounds; the scrape slots
    (--web.max-requests) are the Site's, shared by all."""

    def __init__(self, listen: Union[str, Sequence[str]], site: Site, threads: Optional[int] = None):
        addresses = [listen] if isinstance(listen, str) else list(listen)
        if not addresses:
            raise ValueError("no listen address")
        self.app = App(site)
        # START_THREADS workers at first, more as requests need them (WSGIServer.process_conn), up to
        # `threads`; a request that finds all of those busy waits in the queue. One more worker
        # than --web.max-requests is what lets the limit answer 503 at all.
        self.threads = threads or (site.max_requests + EXTRA_THREADS if site.max_requests > 0 else UNLIMITED_THREADS)
        self.adapter: Optional[TLSAdapter] = None
        if site.web.tls:
            self.adapter = TLSAdapter(site.web.ssl_context)  # one for every address: a reload re-keys them all
        self.https: List[WSGIServer] = []
        self._max_connections = max_connections(len(addresses))
        try:
            for address in addresses:
                self.https.append(self._listen(address))
        except (OSError, ValueError):
            for http in self.https:  # the addresses bound before the one that failed
                http.stop()
            raise
        self._threads: List[threading.Thread] = []

    def _listen(self, address: str) -> WSGIServer:
        """A WSGIServer bound to `address` now, so "cannot listen" is reported at start."""
        host, port = parse_listen_address(address)
        if host == "":
            host = "::" if _ipv6_available() else "0.0.0.0"
        http = WSGIServer((host, port), self.app, numthreads=min(START_THREADS, self.threads), max=self.threads,
                          request_queue_size=socket.SOMAXCONN, timeout=SOCKET_TIMEOUT, shutdown_timeout=5,
                          server_name=f"storpath/{__version__}")
        http.max_request_header_size = MAX_HEADER_BYTES
        http.max_request_body_size = MAX_BODY_BYTES
        http.keep_alive_conn_limit = KEEP_ALIVE_IDLE_MAX
        http.request_read_timeout = REQUEST_READ_TIMEOUT
        http.answer_write_timeout = ANSWER_WRITE_TIMEOUT
        http.clients.reading = PER_CLIENT_READING
        http.clients.all_reading = ALL_READING
        http.clients.workers = max(1, self.threads - PER_CLIENT_SPARE)
        http.clients.connections = PER_CLIENT_CONNECTIONS
        http.max_connections = self._max_connections
        if self.adapter is not None:
            http.ssl_adapter = self.adapter
        try:
            http.prepare()
        except OSError as exc:
            raise OSError(exc.errno, f"{address}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ValueError(f"{address}: {exc}") from None
        return http

    @property
    def http(self) -> WSGIServer:
        """The first address's server."""
        return self.https[0]

    @property
    def port(self) -> int:
        return self.https[0].bind_addr[1]

    @property
    def tls(self) -> bool:
        return self.adapter is not None

    def swap(self, site: Site) -> None:
        """Serve `site` from the next request on. TLS can be re-keyed, not turned on or off."""
        if site.web.tls != self.tls:
            raise ValueError("turning TLS on or off needs a restart")
        if self.adapter is not None:
            self.adapter.context = site.web.ssl_context
        self.app.site = site

    def start(self) -> List[threading.Thread]:
        for index, http in enumerate(self.https):
            thread = threading.Thread(target=http.serve, name=f"http-{index}" if index else "http", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self._threads

    def stop(self) -> None:
        for http in self.https:
            http.stop()
        for thread in self._threads:
            thread.join(10)


def _page_number(query: str) -> Optional[int]:
    """The landing page's `page` parameter (1 when absent); None when it is not a whole number
    from 1 (the other parameters are ignored)."""
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "page":
            if not (value.isascii() and value.isdigit()) or len(value) > 9 or int(value) < 1:
                return None
            return int(value)
    return 1
