"""One scrape shared by every request that arrives while it is computed (single flight).

A scrape of a large host costs a few hundred milliseconds of CPU; 200 scrapers asking at
once would queue 200 of them behind the exporter's lock. Instead the first request computes
the scrape and the others that arrive meanwhile wait for it and get the same result. Each
result is written at most once per format and gzipped at most once, whoever asks first.
"""

from __future__ import annotations

import threading
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from storpath import exposition

# gzip level 1. Measured on the 4 MB text of the 1024-drive benchmark host: level 1 takes
# 6.5 ms of CPU for 161 KB, level 6 27 ms for 139 KB.
GZIP_LEVEL = 1


class Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.families: List = []
        self.error: Optional[BaseException] = None
        self._bodies: Dict[Tuple[bool, bool], List[bytes]] = {}
        self._lock = threading.Lock()

    def chunks(self, openmetrics: bool, compressed: bool) -> List[bytes]:
        """The response body in one format, gzipped or not, as pieces to send one after
        another; made once per flight."""
        with self._lock:
            return self._chunks(openmetrics, compressed)

    def body(self, openmetrics: bool, compressed: bool) -> bytes:
        """The same, joined."""
        chunks = self.chunks(openmetrics, compressed)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _chunks(self, openmetrics: bool, compressed: bool) -> List[bytes]:
        body = self._bodies.get((openmetrics, compressed))
        if body is None:
            if compressed:
                # One gzip stream (wbits 31: gzip header and trailer) fed piece by piece.
                packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
                body = [packer.compress(piece) for piece in self._chunks(openmetrics, False)]
                body = [b"".join(body) + packer.flush()]
            else:
                body = exposition.pieces(self.families, openmetrics)
            self._bodies[(openmetrics, compressed)] = body
        return body


class Scraper:
    """`collect(timeout)` yields the families of one scrape; `scrape(timeout)` returns the
    flight that holds them, shared with every request that asked meanwhile."""

    def __init__(self, collect: Callable[[Optional[float]], Iterable[exposition.SeriesFamily]]):
        self.collect = collect
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
            flight.families = list(self.collect(timeout))
        except Exception as exc:  # handed to every waiting request
            flight.error = exc
        finally:
            with self._lock:
                self._current = None
                self.flights += 1
            flight.done.set()
        return flight
