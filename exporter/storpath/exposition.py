"""A lean writer of the Prometheus text format (0.0.4) for the families collectors build.

prometheus_client's own writer validates and escapes every label name of every sample,
which on a host with thousands of PCI devices costs more than reading sysfs. storpath's
label names are fixed in code, so only label values need escaping here. The output is
the same text prometheus_client writes (labels sorted, Go-style floats, counters with
`_total`), and `promtool check metrics` is run on it in the tests.

Families with a series per device (thousands on a large host) are `SeriesFamily`: a
collector renders a device's label part once per device instance (`label_text`) and each
sample becomes its line of text as it is added, with no Sample or label dict in between.
Such a family still offers `samples` (parsed back from its text) to code that wants them.
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _float(value: float) -> str:
    if value == 1.0:
        return "1.0"
    if value == 0.0:
        return "0.0"
    return floatToGoString(value)


# The same values (16 GT/s, x4, 1.0, 4096) recur thousands of times on every scrape:
# each is formatted once. Bounded, since counters and timestamps keep taking new values.
_VALUE_TEXT: Dict[float, str] = {}
_VALUE_TEXT_MAX = 4096


def value_text(value: float) -> str:
    text = _VALUE_TEXT.get(value)
    if text is None:
        if len(_VALUE_TEXT) >= _VALUE_TEXT_MAX:
            _VALUE_TEXT.clear()
        text = _VALUE_TEXT[value] = _float(value)
    return text


def label_text(names: Sequence[str], values: Sequence[str]) -> str:
    """The label part of a sample line, `{a="1",b="2"}`: names sorted, values escaped."""
    pairs = sorted(zip(names, values))
    return "{" + ",".join(f'{name}="{_escape_value(value)}"' for name, value in pairs) + "}"


class SeriesFamily(Metric):
    """A gauge or counter family whose samples are written as text when they are added.

    For families with a series per device: the collector renders a device's labels once
    (`label_text`, kept per device instance) and adds values with `add_text`. A
    collector that keeps rendered text between scrapes hands over the whole text with
    `set_text(token, make)`: the same token promises the same text as the last scrape,
    and a writer that still holds that text does not ask for it. `samples` parses the
    text back, for tests and prometheus_client's own writer.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str], kind: str = "gauge"):
        # Metric.__init__ would set `samples`, which is derived here.
        self.name = name
        self.documentation = documentation
        self.unit = ""
        self.type = kind
        self.label_names = tuple(labels)
        self.sample_name = name + "_total" if kind == "counter" else name
        self._lines: List[str] = []
        self.token: Optional[object] = None
        self._make: Optional[Callable[[], str]] = None

    @property
    def lines(self) -> List[str]:
        if self._make is not None:
            text, self._make = self._make(), None
            self._lines = [text] if text else []
        return self._lines

    @lines.setter
    def lines(self, lines: List[str]) -> None:
        self._lines, self._make, self.token = lines, None, None

    def set_text(self, token: object, make: Callable[[], str]) -> None:
        """The family's whole text: `make()` renders it, only when it is asked for; the
        same token (compared by identity) means the same text as when it was given last."""
        self._lines, self._make, self.token = [], make, token

    def label_text(self, values: Sequence[str]) -> str:
        return label_text(self.label_names, values)

    def add_text(self, labels: str, value: Optional[float]) -> None:
        """Add a sample whose label part is already rendered; a None value is left out."""
        if value is not None:
            self.lines.append(f"{self.sample_name}{labels} {value_text(value)}\n")

    def add(self, values: Sequence[str], value: Optional[float]) -> None:
        self.add_text(self.label_text(values), value)

    @property
    def samples(self) -> list:
        if not self.lines:
            return []
        text = f"# TYPE {self.sample_name} {self.type}\n" + "".join(self.lines)
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    @samples.setter
    def samples(self, _value) -> None:
        raise AttributeError("a SeriesFamily's samples are its text; use add() or add_text()")


def generate(families: Iterable[Metric]) -> bytes:
    return b"".join(text for _, text in TextWriter().chunks(families))



class TextWriter:
    """Writes families as text, one piece per family.

    A SeriesFamily given with the same token as on the last call (`set_text`) is not
    rendered, joined or encoded again: its piece from the last call is reused, so an
    unchanged host costs neither the work nor the memory of a second copy. Used by one
    server for all scrapes; collection is one scrape at a time.
    """

    def __init__(self) -> None:
        self._kept: Dict[str, Tuple[str, object, bytes]] = {}  # family -> (header, token, piece)

    def chunks(self, families: Iterable[Metric]) -> List[Tuple[str, bytes]]:
        """(family name, its text) per family, in order: the exposition in pieces, so that
        a family whose text did not change need not be compressed again (ChunkedGzip)."""
        kept, keep = self._kept, {}
        chunks: List[Tuple[str, bytes]] = []
        for family in families:
            name = family.name
            header = _header(family)
            if not isinstance(family, SeriesFamily):
                piece = _sample_text(family, header)
            elif family.token is not None:
                previous = kept.get(name)
                if previous is not None and previous[1] is family.token and previous[0] == header:
                    piece = previous[2]
                else:
                    piece = (header + "".join(family.lines)).encode("utf-8")
                keep[name] = (header, family.token, piece)
            else:
                piece = (header + "".join(family.lines)).encode("utf-8")
            chunks.append((name, piece))
        self._kept = keep
        return chunks


def _header(family: Metric) -> str:
    kind = family.type
    exposed = family.name + "_total" if kind == "counter" else family.name
    if kind == "unknown":
        kind = "untyped"
    return f"# HELP {exposed} {_escape_help(family.documentation)}\n# TYPE {exposed} {kind}\n"


# Per label-key set (in the collector's order): the keys sorted, as the exposition lists
# them, and a %-template of the label part. Label-key sets are fixed in code: few.
_TEMPLATES: Dict[tuple, tuple] = {}


def _sample_text(family: Metric, header: str) -> bytes:
    """A family of prometheus_client Samples, as text."""
    out = [header]
    append = out.append
    for sample in family.samples:
        text = value_text(sample.value)
        labels = sample.labels
        if labels:
            keys = tuple(labels)
            entry = _TEMPLATES.get(keys)
            if entry is None:
                ordered = tuple(sorted(keys))
                entry = _TEMPLATES[keys] = (ordered, ",".join(f'{k}="%s"' for k in ordered))
            values = tuple([labels[k] for k in entry[0]])
            joined = "".join(values)
            if "\\" in joined or '"' in joined or "\n" in joined:
                values = tuple(_escape_value(v) for v in values)
            line = f"{sample.name}{{{entry[1] % values}}} {text}"
        else:
            line = f"{sample.name} {text}"
        if sample.timestamp is not None:
            line += f" {int(float(sample.timestamp) * 1000)}"
        append(line)
        append("\n")
    return "".join(out).encode("utf-8")


# An empty final deflate block: what ends a stream of flushed pieces.
_FINAL_BLOCK = zlib.compressobj(1, zlib.DEFLATED, -15).flush()


class ChunkedGzip:
    """gzip (RFC 1952) of an exposition that compresses again only the families whose
    text changed since the last call.

    Each family is deflated on its own and ended with a full flush, which leaves the
    output byte-aligned and free of references to earlier data; pieces deflated this
    way can be put one after another and closed with an empty final block, which is one
    valid deflate stream (as parallel gzip tools build theirs). On a host whose state
    did not change, most families read the same as on the last scrape. Thread-safe.
    """

    def __init__(self, level: int = 1):
        self.level = level
        self._pieces: Dict[str, Tuple[bytes, bytes]] = {}  # family -> (text, deflated)
        self._lock = threading.Lock()

    def compress(self, chunks: List[Tuple[str, bytes]]) -> bytes:
        with self._lock:
            out = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"]  # magic, deflate, no flags/mtime, OS unknown
            crc = size = 0
            previous, pieces = self._pieces, {}
            for name, text in chunks:
                cached = previous.get(name)
                if cached is not None and cached[0] == text:
                    deflated = cached[1]
                else:
                    compressor = zlib.compressobj(self.level, zlib.DEFLATED, -15)
                    deflated = compressor.compress(text) + compressor.flush(zlib.Z_FULL_FLUSH)
                pieces[name] = (text, deflated)
                out.append(deflated)
                crc = zlib.crc32(text, crc)
                size += len(text)
            self._pieces = pieces
            out.append(_FINAL_BLOCK)
            out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
            return b"".join(out)
