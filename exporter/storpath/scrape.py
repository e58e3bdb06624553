"""One scrape shared by every request that arrives while it is computed (single flight).

A scrape of a large host costs a few hundred milliseconds of CPU; 200 scrapers asking at
once would queue 200 of them behind the exporter's lock. Instead the first request computes
the scrape and the others that arrive meanwhile wait for it and get the same result. Each
result is rendered at most once per format and per encoding, whoever asks first.

gzip (what Prometheus asks for) is deflated family by family (ChunkedGzip): a family whose
piece is the one of the last scrape (exposition.Writer reuses it while the family's text is
the same) is not compressed again, and the whole uncompressed text is never joined.
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from storpath import exposition

# gzip level 1. Measured on the 3 MB text of the 1024-drive benchmark host: level 1 takes
# 6.5 ms of CPU for 161 KB, level 6 27 ms for 139 KB.
GZIP_LEVEL = 1
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # magic, deflate, no flags, no mtime, OS unknown
_FINAL_BLOCK = b"\x03\x00"  # an empty final block with fixed Huffman codes


def _deflated(first: exposition.BytesLike, level: int, second: exposition.BytesLike = b"") -> bytes:
    """Raw deflate of first + second, ended with a full flush (no final block)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return compressor.compress(first) + compressor.compress(second) + compressor.flush(zlib.Z_FULL_FLUSH)


class ChunkedGzip:
    """gzip (RFC 1952) of a list of pieces that deflates again only the pieces that are new.

    Each piece is deflated on its own and ended with a full flush, which leaves the output
    byte-aligned and free of references to earlier data; such pieces put one after another
    and closed with an empty final block are one valid deflate stream (as parallel gzip
    tools build theirs). The CRC-32 still runs over every byte (zlib's, a few ms for 4 MB)."""

    def __init__(self, level: int = GZIP_LEVEL):
        self.level = level
        self._eof = _deflated(b"# EOF\n", level)
        self._kept: Dict[Tuple[str, bool], Tuple[exposition.Piece, bytes]] = {}
        self._lock = threading.Lock()

    def compress(self, pieces: List[exposition.Piece], openmetrics: bool) -> List[bytes]:
        out = [_GZIP_HEADER]
        crc = size = 0
        with self._lock:
            kept = self._kept
            for piece in pieces:
                key = (piece.name, openmetrics)
                previous = kept.get(key)
                header, body = piece.parts(openmetrics)
                if previous is not None and previous[0] is piece:
                    deflated = previous[1]
                else:
                    deflated = _deflated(header, self.level, body)
                    kept[key] = (piece, deflated)
                out.append(deflated)
                crc = zlib.crc32(body, zlib.crc32(header, crc))
                size += len(header) + len(body)
            if openmetrics:
                out.append(self._eof)
                crc = zlib.crc32(b"# EOF\n", crc)
                size += 6
            names = {piece.name for piece in pieces}
            for key in [k for k in kept if k[0] not in names]:
                del kept[key]  # families gone from the exposition
        out.append(_FINAL_BLOCK)
        out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
        return out


class Flight:
    def __init__(self, deflate: Optional[ChunkedGzip] = None) -> None:
        self.done = threading.Event()
        self.pieces: List[exposition.Piece] = []
        self.error: Optional[BaseException] = None
        self._deflate = deflate or ChunkedGzip()
        self._bodies: Dict[Tuple[bool, bool], List[bytes]] = {}
        self._lock = threading.Lock()

    def body(self, openmetrics: bool, compressed: bool) -> List[bytes]:
        """The response body as a list of bytes to send one after another."""
        key = (openmetrics, compressed)
        with self._lock:
            body = self._bodies.get(key)
            if body is None:
                if compressed:
                    body = self._deflate.compress(self.pieces, openmetrics)
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
        self.deflate = ChunkedGzip()
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
                flight = self._current = Flight(self.deflate)
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
