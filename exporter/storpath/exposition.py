"""A lean writer of the Prometheus text format (0.0.4) for the families collectors build.

prometheus_client's own writer validates and escapes every label name of every sample,
which on a host with thousands of PCI devices costs more than reading sysfs. storpath's
label names are fixed in code, so only label values need escaping here. The output is
the same text prometheus_client writes (labels sorted, Go-style floats, counters with
`_total`), and `promtool check metrics` is run on it in the tests.
"""

from __future__ import annotations

import threading
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


class _LabelTextCache:
    """Rendered label sets, by identity of the label dict. Collectors keep one label dict
    per device instance across scrapes, so most label sets are rendered once for the
    life of a device. Entries not used in a scrape are dropped at its end; each entry
    holds its dict, so an id is never reused while its entry lives."""

    def __init__(self) -> None:
        self._previous: Dict[int, tuple] = {}
        self._current: Dict[int, tuple] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        self._lock.acquire()
        self._previous, self._current = self._current, {}

    def finish(self) -> None:
        self._previous = {}
        self._lock.release()

    def get(self, labels: dict) -> str:
        key = id(labels)
        entry = self._current.get(key)
        if entry is None:
            entry = self._previous.get(key)
            if entry is None or entry[0] is not labels:
                text = ",".join(f'{k}="{_escape_value(labels[k])}"' for k in sorted(labels))
                entry = (labels, text)
            self._current[key] = entry
        return entry[1]


_LABELS = _LabelTextCache()


def generate(families: Iterable[Metric]) -> bytes:
    _LABELS.start()
    try:
        return _generate(families, _LABELS.get)
    finally:
        _LABELS.finish()


def _generate(families: Iterable[Metric], label_text) -> bytes:
    out: List[str] = []
    append = out.append
    # The same values (16 GT/s, x4) recur thousands of times: format each once.
    value_text: Dict[float, str] = {}
    for family in families:
        name = family.name
        kind = family.type
        exposed = name + "_total" if kind == "counter" else name
        if kind == "unknown":
            kind = "untyped"
        append(f"# HELP {exposed} {_escape_help(family.documentation)}\n# TYPE {exposed} {kind}\n")
        for sample in family.samples:
            labels = sample.labels
            value = sample.value
            text = value_text.get(value)
            if text is None or value != value:
                text = value_text[value] = _float(value)
            if labels:
                line = f"{sample.name}{{{label_text(labels)}}} {text}"
            else:
                line = f"{sample.name} {text}"
            if sample.timestamp is not None:
                line += f" {int(float(sample.timestamp) * 1000)}"
            append(line + "\n")
    return "".join(out).encode("utf-8")
