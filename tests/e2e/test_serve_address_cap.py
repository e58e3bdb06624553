"""One address at its connection cap against the real `storpath serve`: a local client that
opens connections and sends nothing must not lock its own address out. kubelet's probes, a
local agent or Prometheus on the same host share 127.0.0.1 with it; past the cap the
address's oldest idle connections are closed for the new one, not the new one
(docs/serving.md, storpath.http.cheroot_patches._ConnectionManager).
"""

from __future__ import annotations

import http.client
import time

from storpath.http import server
from tests.e2e.test_serve_abuse import PROMPT
from tests.e2e.test_serve_descriptors import close_all, health_from, open_idle

HOGGED = 300  # past PER_CLIENT_CONNECTIONS (256): what the reproduction held


def scrape_from(port: int, source: str) -> float:
    """Seconds a plain-HTTP scrape from address `source` took; it must answer 200 with a body."""
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        assert b"storpath_build_info{" in response.read()
    finally:
        conn.close()
    return time.monotonic() - start


def test_an_address_holding_its_cap_with_silent_connections_still_gets_scrapes_and_health_checks(exporter_on):
    assert HOGGED > server.PER_CLIENT_CONNECTIONS
    with exporter_on("am4-x570-firecuda", "healthy", open_files=(4096, 4096)) as exporter:
        opened = open_idle(exporter.port, HOGGED, ["127.0.0.1"])
        try:
            time.sleep(0.5)  # the server has accepted them all
            # The same address that holds its cap with connections that sent nothing: both
            # answered (the old code closed each of them unanswered as soon as it was accepted).
            health = [health_from(exporter.port, "127.0.0.1") for _ in range(5)]
            scrape = [scrape_from(exporter.port, "127.0.0.1") for _ in range(3)]
            print(f"{HOGGED} silent connections from 127.0.0.1: health from it {max(health):.3f} s at most, "
                  f"scrape from it {max(scrape):.3f} s at most")
            assert max(health) < PROMPT
            # The silent ones are what was closed: the oldest, and only as many as the new
            # connections needed (the cap is still a bound on the address).
            still_open = 0
            for sock, _ in opened:
                sock.setblocking(False)
                try:
                    still_open += sock.recv(1) != b""
                except BlockingIOError:
                    still_open += 1
                except ConnectionError:
                    pass
            assert still_open <= server.PER_CLIENT_CONNECTIONS
            assert still_open >= server.PER_CLIENT_CONNECTIONS - 16
            assert health_from(exporter.port, "127.0.0.2") < PROMPT  # another address is served too
        finally:
            close_all(opened)
        assert exporter.log().count("connections from one address past its cap") == 1


def test_the_cap_closes_the_oldest_silent_connections_first(exporter_on):
    with exporter_on("am4-x570-firecuda", "healthy", open_files=(4096, 4096)) as exporter:
        opened = open_idle(exporter.port, server.PER_CLIENT_CONNECTIONS + 10, ["127.0.0.1"])
        try:
            time.sleep(1.5)  # past the loop's rounds: the ten past the cap closed the ten oldest
            closed = []
            for index, (sock, _) in enumerate(opened):
                sock.setblocking(False)
                try:
                    if sock.recv(1) == b"":
                        closed.append(index)
                except BlockingIOError:
                    pass
                except ConnectionError:
                    closed.append(index)
            assert closed == list(range(10)), closed
        finally:
            close_all(opened)


def test_silent_connections_go_before_a_kept_alive_one(exporter_on):
    """A scraper's idle keep-alive connection outlives the silent ones opened after it."""
    with exporter_on("am4-x570-firecuda", "healthy", open_files=(4096, 4096)) as exporter:
        keep = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=10, source_address=("127.0.0.1", 0))
        keep.request("GET", "/-/healthy")
        assert keep.getresponse().read() == b"Healthy\n"
        opened = open_idle(exporter.port, server.PER_CLIENT_CONNECTIONS + 20, ["127.0.0.1"])
        try:
            time.sleep(1.5)
            keep.request("GET", "/-/healthy")  # the same connection: never closed
            assert keep.getresponse().read() == b"Healthy\n"
        finally:
            keep.close()
            close_all(opened)
