"""One scrape shared by every request that arrives while it is computed (single flight).

A scrape of a large host costs a few hundred milliseconds of CPU; 200 scrapers asking at
once would queue 200 of them behind the exporter's lock. Instead the first request starts
the scrape and every request that arrives meanwhile waits for the same one. Each result is
written at most once per format and gzipped at most once, whoever asks first.
"""

from __future__ import annotations

import queue
import struct
import threading
import time
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from storpath.scrape import exposition

# gzip level 1. Measured on the 4 MB text of the 1024-drive benchmark host: level 1 takes
# 6.5 ms of CPU for 161 KB, level 6 27 ms for 139 KB.
GZIP_LEVEL = 1

# RFC 1952: the member header (deflate, no flags, no time, no extra flags, OS unknown) and,
# after the pieces' deflate blocks, an empty final block of fixed codes (RFC 1951 3.2.6: BFINAL
# 1, BTYPE 01, the end-of-block code 0000000), which the trailer's CRC-32 and size follow.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_BLOCK = b"\x03\x00"


class Deflated:
    """The gzip of an answer, made of each piece's deflate blocks, kept while the piece is served.

    An answer is the families' pieces (storpath.scrape.exposition.pieces), and a family whose
    series did not change is served from the very bytes object it was last time (its headers
    always are). Each piece is deflated on its own (a fresh compressor flushed to a byte
    boundary, Z_SYNC_FLUSH, never final), so the blocks of the pieces kept from the last answer
    are used again as they are; one gzip member holds them all, and only its CRC-32 is computed
    over the whole text each time. A piece of bytes the last answer did not hold is deflated;
    what the last answer held and this one does not is let go."""

    def __init__(self) -> None:
        self._kept: Dict[int, Tuple[bytes, bytes]] = {}  # id(piece) -> (piece, its deflate blocks)
        self._lock = threading.Lock()

    def gzip(self, pieces: List[bytes]) -> bytes:
        with self._lock:
            kept: Dict[int, Tuple[bytes, bytes]] = {}
            last = self._kept
            out = [_GZIP_HEADER]
            crc = size = 0
            for piece in pieces:
                entry = last.get(id(piece))
                if entry is None or entry[0] is not piece:
                    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15)
                    entry = (piece, packer.compress(piece) + packer.flush(zlib.Z_SYNC_FLUSH))
                kept[id(piece)] = entry
                out.append(entry[1])
                crc = zlib.crc32(piece, crc)
                size += len(piece)
            self._kept = kept
            out.append(_FINAL_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF))
            return b"".join(out)


# How old the last complete answer may be when a client's deadline ends before the scrape in
# progress: Prometheus' default lookback (query.lookback-delta). Older samples would read as
# stale anyway, so such a client gets 503 instead.
STALE_AFTER = 300.0


class Flight:
    def __init__(self, deflated: Dict[bool, Deflated]) -> None:
        self.deflated = deflated  # per format (OpenMetrics or not): the gzip's kept blocks, the scraper's
        self.done = threading.Event()
        self.families: List = []
        self.error: Optional[BaseException] = None
        self.landed = 0.0  # time.monotonic() when its scrape ended
        self._bodies: Dict[Tuple[bool, bool], List[bytes]] = {}
        self._lock = threading.Lock()

    def chunks(self, openmetrics: bool, compressed: bool) -> List[bytes]:
        """The response body in one format, gzipped or not, as pieces to send one after
        another; made once per flight."""
        with self._lock:
            plain = self._bodies.get((openmetrics, False))
            if plain is None:
                plain = self._bodies[(openmetrics, False)] = exposition.pieces(self.families, openmetrics)
            if not compressed:
                return plain
            body = self._bodies.get((openmetrics, True))
            if body is None:
                body = self._bodies[(openmetrics, True)] = [self.deflated[openmetrics].gzip(plain)]
            return body


class Scraper:
    """`collect(deadline)` yields the families of one scrape, `more()` (when given) those that
    follow them in the same answer. `scrape(wait)` returns the flight that holds them, shared
    with every request that asked meanwhile.

    The deadline model (docs/serving.md): a flight runs on the scraper's one long-lived
    thread (never a request's) under the server's deadline (`deadline`, web.scrape_timeout), whoever asked for it. A client's
    deadline (Prometheus' X-Prometheus-Scrape-Timeout-Seconds) bounds only its own wait: a
    client whose wait ends before the flight lands gets the last complete flight when it
    landed within STALE_AFTER (its answer says its age), and otherwise none (the server
    answers 503). Nobody's scrape is shortened by another client's header."""

    def __init__(self, collect: Callable[[float], Iterable[exposition.SeriesFamily]], deadline: float = 10.0,
                 more: Optional[Callable[[], Iterable[exposition.SeriesFamily]]] = None):
        self.collect = collect
        self.more = more
        self.deadline = deadline
        self._current: Optional[Flight] = None
        self._last: Optional[Flight] = None  # the last flight that landed
        self._lock = threading.Lock()
        self._flights: "queue.SimpleQueue[Flight]" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self.flights = 0  # scrapes computed (for tests and the load benchmark)
        self._deflated = {False: Deflated(), True: Deflated()}  # each format's gzip: unchanged pieces' blocks kept

    def busy(self) -> bool:
        with self._lock:
            return self._current is not None

    def scrape(self, wait: Optional[float] = None) -> Optional[Flight]:
        """The flight in progress, or a new one, once it has landed within `wait` seconds
        (None: as long as it takes); otherwise the last one that landed within STALE_AFTER,
        or None."""
        with self._lock:
            flight = self._current
            if flight is None:
                flight = self._current = Flight(self._deflated)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="scrape", daemon=True)
                    self._thread.start()
                self._flights.put(flight)
        if flight.done.wait(wait):
            return flight
        last = self._last
        if last is not None and time.monotonic() - last.landed <= STALE_AFTER:
            return last
        return None

    def _loop(self) -> None:
        """The scraper's one long-lived thread: every flight, one after another, each the
        families of `collect(deadline)` and then of `more()`. A daemon, so a scrape still
        reading never holds up shutdown."""
        while True:
            flight = self._flights.get()
            try:
                flight.families = list(self.collect(self.deadline))
                if self.more is not None:
                    flight.families.extend(self.more())
            except Exception as exc:  # handed to every waiting request
                flight.error = exc
            finally:
                flight.landed = time.monotonic()
                with self._lock:
                    self._current = None
                    if flight.error is None:
                        self._last = flight
                    self.flights += 1
                flight.done.set()
