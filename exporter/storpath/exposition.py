"""A lean writer of the Prometheus text format (0.0.4) for the families collectors build.

prometheus_client's own writer validates and escapes every label name of every sample,
which on a host with thousands of PCI devices costs more than reading sysfs. storpath's
label names are fixed in code, so only label values need escaping here. The output is
the same text prometheus_client writes (labels sorted, Go-style floats, counters with
`_total`), and `promtool check metrics` is run on it in the tests.
"""

from __future__ import annotations

from typing import Dict, Iterable, List

from prometheus_client.core import Metric
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


def generate(families: Iterable[Metric]) -> bytes:
    out: List[str] = []
    append = out.append
    # The same values (16 GT/s, x4, 1.0) recur thousands of times: format each once.
    value_text: Dict[float, str] = {}
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
        for sample in family.samples:
            value = sample.value
            text = value_text.get(value)
            if text is None:
                text = value_text[value] = _float(value)
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
