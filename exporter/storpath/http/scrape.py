"""One scrape shared by every request that arrives while it is computed (single flight).

A scrape of a large host costs a few hundred milliseconds of CPU; 200 scrapers asking at
once would queue 200 of them behind the exporter's lock. Instead the first request computes
the scrape and the others that arrive meanwhile wait for it and get the same result. Each
result is put together at most once per format and per encoding, whoever asks first.

gzip (what Prometheus asks for) is put together from the families' text as kept, deflated
(storpath.deflate): nothing is compressed on the way out but what changed since the last
scrape, and the whole uncompressed text is never joined.
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from storpath import deflate, exposition


class Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.pieces: List[exposition.Piece] = []
        self.error: Optional[BaseException] = None
        self._bodies: Dict[Tuple[bool, bool], List[bytes]] = {}
        self._lock = threading.Lock()

    def body(self, openmetrics: bool, compressed: bool) -> List[bytes]:
        """The response body as a list of bytes to send one after another."""
        key = (openmetrics, compressed)
        with self._lock:
            body = self._bodies.get(key)
            if body is None:
                if compressed:
                    body = deflate.gzip_parts(exposition.packed(self.pieces, openmetrics))
                else:
                    body = [(exposition.openmetrics if openmetrics else exposition.text)(self.pieces)]
                self._bodies[key] = body
            return body


class Scraper:
    """`collect(timeout)` yields the families of one scrape; `scrape(timeout)` returns the
    flight that holds them, shared with every request that asked meanwhile."""

    def __init__(self, collect: Callable[[Optional[float]], Iterable[exposition.SeriesFamily]]):
        self.collect = collect
        self.writer = exposition.Writer()
        self._current: Optional[Flight] = None
        self._lock = threading.Lock()
        self.flights = 0  # scrapes computed (for tests and the load benchmark)

    def busy(self) -> bool:
        with self._lock:
            return self._current is not None

    def scrape(self, timeout: Optional[float] = None) -> Flight:
        with self._lock:
            flight = self._current
            leader = flight is None
            if leader:
                flight = self._current = Flight()
        if not leader:
            flight.done.wait()
            return flight
        try:
            flight.pieces = self.writer.pieces(self.collect(timeout))
        except Exception as exc:  # handed to every waiting request
            flight.error = exc
        finally:
            with self._lock:
                self._current = None
                self.flights += 1
            flight.done.set()
        return flight
