"""A lean writer of the Prometheus text format (0.0.4) and of OpenMetrics 1.0.

prometheus_client's own writer validates and escapes every label name of every sample,
which on a host with thousands of PCI devices costs more than reading sysfs (an order of
magnitude slower than this writer for the 40 000 series of the 1024-drive benchmark host).
storpath's label names are fixed in its family tables (storpath.scrape.families), so only label
values need escaping here. The output is the same text prometheus_client writes (labels
sorted, Go-style floats, counters with `_total`): tests compare the two, and
`promtool check metrics` runs on every golden.

A label value may hold a name the kernel gave as bytes that are not UTF-8 (a lone
surrogate in Python's str, storpath.base.safetext): that family's text is made again with its
label values through storpath.base.safetext.utf8 (`sdh\xff`), so the body is always valid
UTF-8 and one name costs no collector. Only a family whose text fails to encode pays.

A collector's families reach the writer as `SeriesFamily`: a family spec and its sample
lines, rendered by FamilyTexts below (the exporter's own process and Python families too:
storpath.http.runtime). Families of prometheus_client's own types (tests comparing the two
writers) are written from their samples.

OpenMetrics (what Prometheus asks for first) shares every sample line with the text
format: only the family headers differ, so serving it costs no second rendering.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from storpath.base.records import datarecord
from storpath.base import safetext
from storpath.scrape.families import Family, SeriesColumns

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


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


value_text = go_float


def header(sample_name: str, kind: str, documentation: str) -> str:
    """`# HELP` and `# TYPE` of a family; `sample_name` with a counter's `_total`."""
    if kind == "unknown":
        kind = "untyped"
    return f"# HELP {sample_name} {_escape_help(documentation)}\n# TYPE {sample_name} {kind}\n"


@datarecord(frozen=True)
class SeriesFamily:
    """A family of a collector's table (storpath.scrape.families.Family) and its sample lines, as
    FamilyTexts rendered them. It offers what prometheus_client's registry and writer read
    of a family (`name`, `type`, `documentation`, `samples`), so tests can hand it to them;
    `samples` parses the text back."""

    __slots__ = ("spec", "body")
    spec: Family
    body: bytes

    name = property(lambda self: self.spec.name)
    type = property(lambda self: self.spec.type)
    documentation = property(lambda self: self.spec.help)
    unit = ""

    @property
    def piece(self) -> bytes:
        """The family's whole text in the text format, header included."""
        return _headers(self.spec)[0] + self.body

    @property
    def samples(self) -> list:
        # Tests only: the serve path never parses its own text.
        from prometheus_client.parser import text_string_to_metric_families

        text = self.piece.decode("utf-8")
        return [s for family in text_string_to_metric_families(text) for s in family.samples]


def pieces(families: Iterable, openmetrics: bool = False) -> List[bytes]:
    """The text format 0.0.4 of `families` (OpenMetrics 1.0 with `openmetrics`) as the pieces
    it is made of, in order: the families' kept text is not copied into one body (a host of
    thousands of devices answers 4 MB)."""
    out: List[bytes] = []
    for family in families:
        if isinstance(family, SeriesFamily):
            out.append(_headers(family.spec)[openmetrics])
            out.append(family.body)
        else:
            kind = family.type
            exposed = family.name + "_total" if kind == "counter" else family.name
            if openmetrics:
                out.append(_om_header(family.name, kind, family.documentation, _unit(family)))
            else:
                out.append(header(exposed, kind, family.documentation).encode("utf-8"))
            out.append(_sample_text(family)[openmetrics])
    if openmetrics:
        out.append(b"# EOF\n")
    return out


def sample_lines(family: Family, series: SeriesColumns) -> bytes:
    """A table family's sample lines: one per series with a value, in order (the header
    is `_headers(family)`). A label value that is no text of Unicode (a file name's
    undecodable bytes) is shown as safetext.utf8 makes it."""
    lines: List[str] = []
    append = lines.append
    rows = zip(series.labels, series.values)
    if not family.labels:
        for _, value in rows:
            if value is not None:
                append(f"{family.sample_name} {value_text(value)}\n")
    elif len(family.labels) == 1:
        prefix = f'{family.sample_name}{{{family.labels[0]}="'
        for (label,), value in rows:
            if value is not None:
                append(f'{prefix}{escape_value(label)}"}} {value_text(value)}\n')
    else:
        # On a host of thousands of devices this runs for every series of a family whose
        # values all move (AER counters): plain string building, escaping only when needed.
        order = tuple(sorted(range(len(family.labels)), key=lambda i: family.labels[i]))
        template = family.sample_name + "{" + ",".join(f'{family.labels[i]}="%s"' for i in order) + "} "
        in_order = order == tuple(range(len(order)))
        for labels, value in rows:
            if value is None:
                continue
            if not in_order:
                labels = tuple([labels[i] for i in order])
            joined = "".join(labels)
            if "\\" in joined or "\n" in joined or '"' in joined:
                labels = tuple([escape_value(label) for label in labels])
            append(template % labels + value_text(value) + "\n")
    text = "".join(lines)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        shown = SeriesColumns()
        for labels, value in zip(series.labels, series.values):
            shown.add(tuple([safetext.utf8(label) for label in labels]), value)
        return sample_lines(family, shown)


class FamilyTexts:
    """The text of each family of a table, rendered again only when its rows change.

    A family's series are compared with the last call's by their values (kept: Python's list
    equality checks identity first, so values taken from the same objects compare at almost
    no cost) and by a hash of their label values (the interpreter's 64-bit hash of the tuple of
    label tuples), not by the label tuples themselves: keeping those held a second
    copy of every label tuple of a scrape (about 2 MB on the 2048-function benchmark host, and
    twice that while the next scrape's rows were built beside it). A family whose series compare
    equal is served from the text kept for it. Used by one collector, one scrape at a time."""

    def __init__(self, table: Sequence[Family]):
        self.table = tuple(table)
        self._members = frozenset(self.table)
        # family -> (hash of its label tuples, its values, its text) as of the last call
        self._kept: Dict[Family, Tuple[int, List[Optional[float]], bytes]] = {}

    def families(self, rows: Mapping[Family, SeriesColumns]) -> List[SeriesFamily]:
        unknown = [f.name for f in rows if f not in self._members]
        if unknown:
            raise KeyError(f"families not in the collector's table: {', '.join(unknown)}")
        out = []
        kept = self._kept
        for family in self.table:
            series = rows.get(family)
            if series is None:
                series = _NONE
            labels = hash(tuple(series.labels))
            last = kept.get(family)
            if last is None or last[0] != labels or last[1] != series.values:
                last = kept[family] = (labels, series.values, sample_lines(family, series))
            if last[2]:
                # A family with no samples is left out, HELP and TYPE too, as node_exporter
                # leaves it out: the text format and OpenMetrics ask for none, and
                # prometheus_client's parser and `promtool check metrics` accept its absence.
                out.append(SeriesFamily(family, last[2]))
        return out


_NONE = SeriesColumns()  # a family without series (left out of the text); never filled


# A table family's headers in both formats, (text format, OpenMetrics), made once: the
# families are declared once, at module level, so this holds a few hundred entries at most.
_HEADERS: Dict[object, Tuple[bytes, bytes]] = {}


def _headers(spec) -> Tuple[bytes, bytes]:
    headers = _HEADERS.get(spec)
    if headers is None:
        headers = _HEADERS[spec] = (header(spec.sample_name, spec.type, spec.help).encode("utf-8"), _om_header(spec.name, spec.type, spec.help,
                                                                            _unit(spec)))
    return headers


# Units OpenMetrics can name from the project's metric suffixes (the base units of docs/metrics.md's conventions);
# the longest that ends a family name is its unit.
_UNITS = ("bytes_per_second", "bits_per_second", "transfers_per_second", "seconds", "bytes", "ratio", "celsius",
          "volts", "watts")


def _unit(family) -> str:
    unit = getattr(family, "unit", "") or ""
    if unit:
        return unit
    for candidate in _UNITS:
        if family.name.endswith("_" + candidate):
            return candidate
    return ""


def _om_header(name: str, kind: str, documentation: str, unit: str) -> bytes:
    """OpenMetrics names a counter family without `_total` (its samples keep it) and gives
    the unit."""
    if kind == "untyped":
        kind = "unknown"
    # HELP escapes as in the text format: OpenMetrics parsers (Prometheus', prometheus_client's)
    # take a bare double quote there, and promtool's text-format check rejects an escaped one.
    head = f"# HELP {name} {_escape_help(documentation)}\n# TYPE {name} {kind}\n"
    if unit:
        head += f"# UNIT {name} {unit}\n"
    return head.encode("utf-8")


def _sample_text(family) -> Tuple[bytes, bytes]:
    """A family of prometheus_client Samples as text: (0.0.4 body, OpenMetrics body).
    The two differ only where a sample has a timestamp."""
    out: List[str] = []
    om: Optional[List[str]] = None
    append = out.append
    for sample in family.samples:
        text_value = value_text(sample.value)
        labels = sample.labels
        if labels:
            pairs = ",".join(f'{k}="{escape_value(safetext.utf8(labels[k]))}"' for k in sorted(labels))
            line = f"{sample.name}{{{pairs}}} {text_value}"
        else:
            line = f"{sample.name} {text_value}"
        if sample.timestamp is not None:
            if om is None:
                om = list(out)
            om.append(f"{line} {go_float(float(sample.timestamp))}\n")
            line += f" {int(float(sample.timestamp) * 1000)}"
        elif om is not None:
            om.append(line + "\n")
        append(line)
        append("\n")
    body = "".join(out).encode("utf-8")
    return body, body if om is None else "".join(om).encode("utf-8")
