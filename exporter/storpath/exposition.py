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

from typing import Dict, Iterable, List, Optional, Sequence

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
    (`label_text`, kept per device instance) and adds values with `add_text`. `samples`
    parses the text back, for tests and prometheus_client's own writer.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str], kind: str = "gauge"):
        # Metric.__init__ would set `samples`, which is derived here.
        self.name = name
        self.documentation = documentation
        self.unit = ""
        self.type = kind
        self.label_names = tuple(labels)
        self.sample_name = name + "_total" if kind == "counter" else name
        self.lines: List[str] = []

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
    out: List[str] = []
    append = out.append
    # Per label-key set (in the collector's order): the keys sorted, as the exposition
    # lists them, and a %-template of the label part, built once per scrape.
    templates: Dict[tuple, tuple] = {}
    for family in families:
        name = family.name
        kind = family.type
        exposed = name + "_total" if kind == "counter" else name
        if kind == "unknown":
            kind = "untyped"
        append(f"# HELP {exposed} {_escape_help(family.documentation)}\n# TYPE {exposed} {kind}\n")
        if isinstance(family, SeriesFamily):
            out.extend(family.lines)
            continue
        for sample in family.samples:
            text = value_text(sample.value)
            labels = sample.labels
            if labels:
                keys = tuple(labels)
                entry = templates.get(keys)
                if entry is None:
                    ordered = tuple(sorted(keys))
                    entry = templates[keys] = (ordered, ",".join(f'{k}="%s"' for k in ordered))
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
