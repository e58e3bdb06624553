"""Clients that misbehave on purpose, against the real `storpath serve`: each must cost the
exporter little, and Prometheus' scrapes and the health check must go on being answered
promptly meanwhile (the bounds are generous for a shared machine; a server that lets the
attack through answers in tens of seconds or not at all)."""

from __future__ import annotations

import base64
import socket
import threading
import time
from typing import Callable, List

import pytest

from storpath.http.server import LANDING_LANE
from tests.conftest import run_exporter
from tests.tls import bcrypt_hash

PROMETHEUS = {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
              "Accept-Encoding": "gzip", "X-Prometheus-Scrape-Timeout-Seconds": "10"}
PROMPT = 2.0  # seconds: "within a second" asked, with room for a shared 2-core machine


def timed(get: Callable[[], object]) -> float:
    """Seconds `get()` took; it must answer 200."""
    start = time.monotonic()
    response = get()
    assert response.status_code == 200, response.status_code
    return time.monotonic() - start


class Flood:
    """`count` threads each running `request()` over and over until stopped."""

    def __init__(self, count: int, request: Callable[[], object]):
        self.stop = threading.Event()
        self.answers: List[object] = []
        self.threads = [threading.Thread(target=self._run, args=(request,), daemon=True) for _ in range(count)]

    def _run(self, request) -> None:
        while not self.stop.is_set():
            try:
                self.answers.append(request())
            except Exception as exc:  # a refused or reset connection is an answer too
                self.answers.append(exc)

    def __enter__(self) -> "Flood":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(2)
    try:
        return sock.recv(4096) == b""
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def _trickle(socks: List[socket.socket], head: bytes, stop: threading.Event) -> threading.Thread:
    """Send `head` a byte every half second on each of `socks` until `stop`, in a thread."""
    def trickle():
        for byte in range(len(head)):
            for sock in socks:
                try:
                    sock.send(head[byte:byte + 1])
                except OSError:  # closed by the server
                    pass
            if stop.wait(0.5):
                return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    return thread


def _assert_all_closed(socks: List[socket.socket], stop: threading.Event, trickler: threading.Thread) -> None:
    stop.set()
    trickler.join(5)
    still_open = [sock for sock in socks if not closed_by_server(sock)]
    assert not still_open, f"{len(still_open)} trickling connections still open"


def test_slowloris_costs_no_worker(exporter_on):
    """60 connections (more than the 44 workers of --web.max-requests=40) that trickle their
    request headers a byte at a time: scrapes and the health check are still answered at once,
    and the server closes the trickling connections once their request is overdue."""
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        slow = [socket.create_connection(("127.0.0.1", exporter.port), timeout=5) for _ in range(60)]
        stop = threading.Event()
        trickler = _trickle(slow, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 1000, stop)
        try:
            time.sleep(1.5)  # every slow connection has sent its first bytes
            took = []
            end = time.monotonic() + 8
            while time.monotonic() < end:
                took.append(timed(lambda: exporter.get("/metrics", headers=PROMETHEUS, timeout=PROMPT + 3)))
                took.append(timed(lambda: exporter.get("/-/healthy", timeout=PROMPT + 3)))
                time.sleep(0.3)
            print(f"slowloris: slowest scrape or health check {max(took):.3f} s")  # docs/serving.md quotes it
            assert max(took) < PROMPT, took
            # Each request is overdue by now: the server has closed its connection.
            _assert_all_closed(slow, stop, trickler)
        finally:
            stop.set()
            trickler.join(5)
            for sock in slow:
                sock.close()


@pytest.fixture(scope="module")
def big_host(synthetic_host):
    """The 2048-PCI-device host of benchmarks/scrape.py (1024 drives below root ports)."""
    return synthetic_host(2048)


def test_landing_page_flood_does_not_delay_scrapes(big_host, tmp_path):
    args = [f"--path.sysfs={big_host}/sys", f"--path.procfs={big_host}/proc", f"--path.captured={big_host}/captured"]
    with run_exporter(args, str(tmp_path)) as exporter:
        timed(lambda: exporter.get("/metrics", headers=PROMETHEUS, timeout=60))  # the page draws the last scrape
        baseline = min(timed(lambda: exporter.get("/metrics", headers=PROMETHEUS, timeout=60)) for _ in range(3))
        draw = timed(lambda: exporter.get("/", timeout=60))  # one page drawn, alone
        with Flood(10, lambda: exporter.get("/", timeout=60)) as flood:
            time.sleep(1)
            took = [timed(lambda: exporter.get("/metrics", headers=PROMETHEUS, timeout=60)) for _ in range(4)]
            health = timed(lambda: exporter.get("/-/healthy", timeout=60))
        print(f"landing flood: scrape alone {baseline:.3f} s, a page alone {draw:.3f} s, slowest scrape "
              f"during {max(took):.3f} s")
        pages = [a for a in flood.answers if getattr(a, "status_code", None) == 200]
    assert pages and "<ul class=\"tree\">" in pages[0].text
    # A scrape shares the interpreter with the landing lane's pages in flight, never waits behind
    # the flood: at most (lane + 1) times its own time and a page's, beside PROMPT. (Measured, not a
    # fixed bound: a VM that runs Python 2.5 times slower takes 2-3.3 s here; a server that queued
    # the scrape behind the flood's pages would take tens of seconds.)
    allowed = PROMPT + (LANDING_LANE + 1) * (baseline + draw)
    assert max(took) < allowed and health < PROMPT, (baseline, draw, took, health)
    # Pages past the landing page's own lane are refused at once, never queued.
    assert {getattr(a, "status_code", None) for a in flood.answers} <= {200, 503}


def test_wrong_password_flood_does_not_delay_the_scraper(exporter_on, tmp_path):
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{bcrypt_hash('s3cret', rounds=12)}'\n")
    with exporter_on("am4-x570-firecuda", "healthy", f"--web.config.file={web}", auth=("prometheus", "s3cret")) \
            as exporter:
        timed(lambda: exporter.get("/metrics", timeout=30))  # the scraper's password is checked once, then cached
        wrong = "Basic " + base64.b64encode(b"prometheus:guess").decode()
        statuses = []
        start = threading.Barrier(101)

        def guess():
            start.wait(30)
            try:
                statuses.append(exporter.get("/metrics", auth=None, headers={"Authorization": wrong},
                                             timeout=120).status_code)
            except Exception as exc:
                statuses.append(repr(exc))

        guessers = [threading.Thread(target=guess, daemon=True) for _ in range(100)]
        for thread in guessers:
            thread.start()
        start.wait(30)
        time.sleep(0.3)  # the guesses are in
        try:
            took = [timed(lambda: exporter.get("/metrics", headers=PROMETHEUS, timeout=60)) for _ in range(3)]
            health = timed(lambda: exporter.get("/-/healthy", timeout=60))
        finally:
            for thread in guessers:
                thread.join(120)
    print(f"wrong-password flood: slowest scrape {max(took):.3f} s")
    assert max(took) < PROMPT and health < PROMPT, (took, health)
    # No guess got in; those past the few bcrypt checks at a time were refused without one.
    assert set(statuses) <= {401, 429}, set(statuses)


@pytest.mark.parametrize("framing", [b"Content-Length: 0\r\nContent-Length: 5",
                                     b"Content-Length: 0\r\nContent-Length: 0",
                                     b"Transfer-Encoding: chunked\r\nContent-Length: 5",
                                     b"Content-Length: 5\r\nTransfer-Encoding: chunked",
                                     b"Transfer-Encoding: chunked",
                                     b"Content-Length: 5"])
def test_a_request_body_or_ambiguous_framing_is_refused(exporter_on, framing):
    """Nothing takes a body: one that cheroot left unread on a kept-alive connection was
    parsed as the next request (here a smuggled scrape), which a proxy in front would not
    expect."""
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        with socket.create_connection(("127.0.0.1", exporter.port), timeout=10) as sock:
            smuggled = b"GET /-/ready HTTP/1.1\r\nHost: x\r\n\r\n"
            body = b"0\r\n\r\n" + smuggled if b"chunked" in framing else smuggled
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + framing + b"\r\n\r\n" + body)
            answer = b""
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"Content-Length" in answer.split(b"\r\n\r\n", 1)[1][:200]
        assert b"Ready" not in answer, "the body was answered as a request of its own"
        assert exporter.get("/metrics").status_code == 200


def test_an_empty_body_is_accepted(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy") as exporter:
        with socket.create_connection(("127.0.0.1", exporter.port), timeout=10) as sock:
            sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_tls_slowloris_costs_its_own_address_only(exporter_on, tmp_path):
    """Over TLS the handshake is read by a worker, so trickling connections do take workers,
    but only until their request's deadline, and never all of them: one address holds at most
    all but two, and Prometheus from another address is answered meanwhile."""
    import http.client
    import ssl

    from tests.tls import make_certs, write_web_config

    certs = make_certs(str(tmp_path / "certs"))
    web = write_web_config(str(tmp_path / "web.yml"), certs)
    with exporter_on("am4-x570-firecuda", "healthy", f"--web.config.file={web}", ca=certs.ca) as exporter:
        # A TLS record header announcing a large ClientHello, then its body a byte at a time.
        head = b"\x16\x03\x01\x40\x00" + b"\x01" * 200
        slow = [socket.create_connection(("127.0.0.1", exporter.port), timeout=5) for _ in range(60)]
        stop = threading.Event()

        def get(path: str) -> float:
            context = ssl.create_default_context(cafile=certs.ca)
            conn = http.client.HTTPSConnection("127.0.0.1", exporter.port, timeout=PROMPT + 3, context=context,
                                               source_address=("127.0.0.2", 0))
            start = time.monotonic()
            try:
                conn.request("GET", path, headers=PROMETHEUS)
                response = conn.getresponse()
                response.read()
                assert response.status == 200
            finally:
                conn.close()
            return time.monotonic() - start

        trickler = _trickle(slow, head, stop)
        try:
            time.sleep(1.5)
            took = [get(path) for _ in range(4) for path in ("/metrics", "/-/healthy")]
            print(f"TLS slowloris: slowest scrape or health check from another address {max(took):.3f} s")
            assert max(took) < PROMPT, took
            # Past the deadline of every trickling request: those past the address's share of the
            # workers (60 - 42) got theirs only when the first ones were closed, 5 s after taking them.
            time.sleep(10)
            _assert_all_closed(slow, stop, trickler)
        finally:
            stop.set()
            for sock in slow:
                sock.close()
