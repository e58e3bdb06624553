"""A lean writer of the Prometheus text format (0.0.4) and of OpenMetrics 1.0 for the
families collectors build.

prometheus_client's own writer validates and escapes every label name of every sample,
which on a host with thousands of PCI devices costs more than reading sysfs. storpath's
label names are fixed in code, so only label values need escaping here. The output is
the same text prometheus_client writes (labels sorted, Go-style floats, counters with
`_total`), and `promtool check metrics` is run on it in the tests. OpenMetrics (what
Prometheus asks for first) shares every sample line with the text format: only the
family headers differ, so serving it costs no second rendering.

Families with a series per device (thousands on a large host) are `SeriesFamily`: a
collector renders a device's label part once per device instance (`label_text`) and each
sample becomes its line of text as it is added, with no Sample or label dict in between.
Such a family still offers `samples` (parsed back from its text) to code that wants them.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


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
    """The text format 0.0.4 of `families`."""
    return text(Writer().pieces(families))


def generate_openmetrics(families: Iterable[Metric]) -> bytes:
    """OpenMetrics 1.0 text of `families`."""
    return openmetrics(Writer().pieces(families))


class Piece(NamedTuple):
    """One family in both formats. The sample lines are the same bytes in both (same
    label escaping, same Go-style floats, counters' samples end in `_total` in both);
    only the headers differ, and the body where a sample carries a timestamp
    (milliseconds in 0.0.4, seconds in OpenMetrics)."""

    name: str
    text_header: bytes
    om_header: bytes
    body: bytes
    om_body: bytes


def text(pieces: Sequence[Piece]) -> bytes:
    return b"".join([part for p in pieces for part in (p.text_header, p.body)])


def openmetrics(pieces: Sequence[Piece]) -> bytes:
    return b"".join([part for p in pieces for part in (p.om_header, p.om_body)] + [b"# EOF\n"])


class Writer:
    """Writes families as pieces of text, one per family, for either format.

    A SeriesFamily given with the same token as on the last call (`set_text`) is not
    rendered, joined or encoded again: its piece from the last call is reused, so an
    unchanged host costs neither the work nor the memory of a second copy. One writer
    serves all scrapes of a server, one scrape at a time (the single flight in
    storpath.scrape sees to that).
    """

    def __init__(self) -> None:
        self._kept: Dict[str, Tuple[bytes, object, Piece]] = {}  # family -> (text header, token, piece)

    def pieces(self, families: Iterable[Metric]) -> List[Piece]:
        kept, keep = self._kept, {}
        out: List[Piece] = []
        for family in families:
            name = family.name
            text_header = _header(family).encode("utf-8")
            if not isinstance(family, SeriesFamily):
                body, om_body = _sample_text(family)
                piece = Piece(name, text_header, _om_header(family), body, om_body)
            elif family.token is not None:
                previous = kept.get(name)
                if previous is not None and previous[1] is family.token and previous[0] == text_header:
                    piece = previous[2]
                else:
                    body = "".join(family.lines).encode("utf-8")
                    piece = Piece(name, text_header, _om_header(family), body, body)
                keep[name] = (text_header, family.token, piece)
            else:
                body = "".join(family.lines).encode("utf-8")
                piece = Piece(name, text_header, _om_header(family), body, body)
            out.append(piece)
        self._kept = keep
        return out


def _header(family: Metric) -> str:
    kind = family.type
    exposed = family.name + "_total" if kind == "counter" else family.name
    if kind == "unknown":
        kind = "untyped"
    return f"# HELP {exposed} {_escape_help(family.documentation)}\n# TYPE {exposed} {kind}\n"


# Units OpenMetrics can name from the project's metric suffixes (DESIGN.md's base units);
# the longest that ends a family name is its unit.
_UNITS = ("bytes_per_second", "bits_per_second", "transfers_per_second", "seconds", "bytes", "ratio", "celsius",
          "volts", "watts")


def unit_of(family: Metric) -> str:
    if family.unit:
        return family.unit
    for unit in _UNITS:
        if family.name.endswith("_" + unit):
            return unit
    return ""


def _om_header(family: Metric) -> bytes:
    """OpenMetrics names a counter family without `_total` (its samples keep it) and gives
    the unit."""
    name = family.name
    # HELP escapes as in the text format: OpenMetrics parsers (Prometheus', prometheus_client's)
    # take a bare double quote there, and promtool's text-format check rejects an escaped one.
    head = f"# HELP {name} {_escape_help(family.documentation)}\n# TYPE {name} {family.type}\n"
    unit = unit_of(family)
    if unit:
        head += f"# UNIT {name} {unit}\n"
    return head.encode("utf-8")


# Per label-key set (in the collector's order): the keys sorted, as the exposition lists
# them, and a %-template of the label part. Label-key sets are fixed in code: few.
_TEMPLATES: Dict[tuple, tuple] = {}


def _sample_text(family: Metric) -> Tuple[bytes, bytes]:
    """A family of prometheus_client Samples as text: (0.0.4 body, OpenMetrics body).
    The two differ only where a sample has a timestamp."""
    out: List[str] = []
    om: Optional[List[str]] = None
    append = out.append
    for sample in family.samples:
        text_value = value_text(sample.value)
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
            line = f"{sample.name}{{{entry[1] % values}}} {text_value}"
        else:
            line = f"{sample.name} {text_value}"
        if sample.timestamp is not None:
            if om is None:
                om = list(out)
            om.append(f"{line} {_om_timestamp(sample.timestamp)}\n")
            line += f" {int(float(sample.timestamp) * 1000)}"
        elif om is not None:
            om.append(line + "\n")
        append(line)
        append("\n")
    body = "".join(out).encode("utf-8")
    return body, body if om is None else "".join(om).encode("utf-8")


def _om_timestamp(timestamp) -> str:
    return floatToGoString(float(timestamp))
