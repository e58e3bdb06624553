"""A lean writer of the Prometheus text format (0.0.4).

prometheus_client's own writer validates and escapes every label name of every sample,
which on a host with thousands of PCI devices costs more than reading sysfs; and merely
importing prometheus_client costs 13 MB of resident memory (it imports its HTTP server,
`ssl`, `email` and more: measured with VmRSS after `import prometheus_client.core`, 23 MB
against 10 MB for the bare interpreter), a quarter of the exporter's 50 MB budget. So
the serve path does not import it. storpath's label names are fixed in its family
tables (storpath.families), so only label values need escaping here. The output is the
same text prometheus_client writes (labels sorted, Go-style floats, counters with
`_total`): tests compare the two, and `promtool check metrics` runs on every golden.

A collector's families reach the writer as `SeriesFamily`: a family spec and its text,
rendered by storpath.families.FamilyTexts. Families of prometheus_client's own types
(tests build some) are written from their samples.
"""

from __future__ import annotations

import math
import struct
import threading
import zlib
from typing import Dict, Iterable, List, Tuple

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def go_float(value: float) -> str:
    """A sample value as Go's strconv formats it, as Prometheus's own exporters write it:
    `+Inf`, `NaN`, and an exponent from 1e+07 on (Python's repr switches at 1e16)."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # 12345678.0 -> 1.2345678e+07
        digits = (text[1:dot] + text[dot + 1:]).rstrip("0")
        mantissa = (text[0] + "." + digits) if digits else text[0]
        return f"{mantissa}e+{dot - 1:02d}"
    return text


# The same values (16 GT/s, x4, 1.0, 4096) recur thousands of times on every scrape:
# each is formatted once. Bounded, since counters and timestamps keep taking new values.
_VALUE_TEXT: Dict[float, str] = {}
_VALUE_TEXT_MAX = 4096


def value_text(value: float) -> str:
    text = _VALUE_TEXT.get(value)
    if text is None:
        if len(_VALUE_TEXT) >= _VALUE_TEXT_MAX:
            _VALUE_TEXT.clear()
        text = _VALUE_TEXT[value] = go_float(value)
    return text


def label_text(names, values) -> str:
    """The label part of a sample line, `{a="1",b="2"}`: names sorted, values escaped."""
    pairs = sorted(zip(names, values))
    return "{" + ",".join(f'{name}="{escape_value(value)}"' for name, value in pairs) + "}"


def header(sample_name: str, kind: str, documentation: str) -> str:
    """`# HELP` and `# TYPE` of a family; `sample_name` with a counter's `_total`."""
    if kind == "unknown":
        kind = "untyped"
    return f"# HELP {sample_name} {_escape_help(documentation)}\n# TYPE {sample_name} {kind}\n"


class SeriesFamily:
    """A family of a collector's table (storpath.families.Family) and its whole text,
    header included, as FamilyTexts rendered it. It offers what prometheus_client's
    registry and writer read of a family (`name`, `type`, `documentation`, `samples`),
    so tests can hand it to them; `samples` parses the text back."""

    __slots__ = ("spec", "piece")

    def __init__(self, spec, piece: bytes):
        self.spec = spec
        self.piece = piece

    name = property(lambda self: self.spec.name)
    type = property(lambda self: self.spec.type)
    documentation = property(lambda self: self.spec.help)
    unit = ""

    @property
    def samples(self) -> list:
        # Tests only: the serve path never parses its own text.
        from prometheus_client.parser import text_string_to_metric_families

        text = self.piece.decode("utf-8")
        return [s for family in text_string_to_metric_families(text) for s in family.samples]


def generate(families: Iterable) -> bytes:
    return b"".join(text for _, text in TextWriter().chunks(families))


class TextWriter:
    """Writes families as text, one piece per family: (family name, its text) in order,
    so that a family whose text did not change need not be compressed again
    (ChunkedGzip). A SeriesFamily is its own text; a family of prometheus_client's types
    is written from its samples."""

    def chunks(self, families: Iterable) -> List[Tuple[str, bytes]]:
        chunks: List[Tuple[str, bytes]] = []
        for family in families:
            if isinstance(family, SeriesFamily):
                chunks.append((family.spec.name, family.piece))
            else:
                kind = family.type
                exposed = family.name + "_total" if kind == "counter" else family.name
                chunks.append((family.name, _sample_text(family, header(exposed, kind, family.documentation))))
        return chunks


# Per label-key set (in the collector's order): the keys sorted, as the exposition lists
# them, and a %-template of the label part. Label-key sets are fixed in code: few.
_TEMPLATES: Dict[tuple, tuple] = {}


def _sample_text(family, header_text: str) -> bytes:
    """A family of prometheus_client Samples, as text."""
    out = [header_text]
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
            values = tuple([escape_value(labels[k]) for k in entry[0]])
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
