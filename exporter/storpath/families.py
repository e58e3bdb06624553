"""Metric families, declared once per collector, and the text they render to.

Each collector module declares its families at module level, in the order they are
exposed, as node_exporter declares its descriptors once:

    CURRENT_SPEED = Family("storpath_pcie_current_link_speed_transfers_per_second", GAUGE,
                           "Speed the link trained to (current_link_speed).", ("address",),
                           unit="transfers_per_second")

and its `values()` returns `Rows`: per family, the label values and the value of each
series. `FamilyTexts` turns those into text. It keeps, per family, the series it last
rendered and their text, and renders a family again only when its series differ from
those (compared by value): what a scrape serves is always what its rows say, so no
collector needs caching code of its own, and none can serve stale values.

A family's series are kept as two columns (label tuples, values) rather than a tuple per
series: on a host with thousands of devices a scrape then allocates one label tuple per
device instead of one object per series, which keeps Python's cyclic garbage collector
from running through the heap dozens of times per scrape (measured: a third of the
pcie collector's time with a tuple per series).
`docs/metrics.md` is generated from the same tables (`storpath.metricsdoc`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from storpath.exposition import SeriesFamily, escape_value, header, value_text


GAUGE = "gauge"
COUNTER = "counter"
# Quantiles only, as a probe's latency percentiles: promtool accepts `quantile` on summaries only.
SUMMARY = "summary"


class Series:
    """One family's series on one scrape: label values (a tuple, in the order of the
    family's `labels`) and values, side by side. A None value is left out of the text
    (the kernel did not give it)."""

    __slots__ = ("labels", "values")

    def __init__(self) -> None:
        self.labels: List[Tuple[str, ...]] = []
        self.values: List[Optional[float]] = []

    def add(self, labels: Tuple[str, ...], value: Optional[float]) -> None:
        self.labels.append(labels)
        self.values.append(value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Series) and self.values == other.values and self.labels == other.labels

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True, eq=False)
class Family:
    """One metric family: what `# HELP`/`# TYPE` say, its label names and its unit
    (the base unit its name ends with, for the docs; empty for ratios of things, info
    metrics and counts). `doc` is the longer meaning docs/metrics.md gives, when it says
    more than `help`. Compared by identity: each is declared once."""

    name: str  # as exposed, without a counter's `_total`
    type: str
    help: str
    labels: Tuple[str, ...] = ()
    unit: str = ""
    doc: str = ""
    sample_name: str = field(init=False)
    header: str = field(init=False)
    _order: Tuple[int, ...] = field(init=False)  # label positions in the exposition's (sorted) order
    _template: str = field(init=False)

    def __post_init__(self) -> None:
        if self.type not in (GAUGE, COUNTER, SUMMARY):
            raise ValueError(f"{self.name}: unknown family type {self.type!r}")
        set_ = object.__setattr__
        set_(self, "labels", tuple(self.labels))
        set_(self, "sample_name", self.name + "_total" if self.type == COUNTER else self.name)
        set_(self, "header", header(self.sample_name, self.type, self.help))
        order = tuple(sorted(range(len(self.labels)), key=lambda i: self.labels[i]))
        set_(self, "_order", order)
        set_(self, "_template", self.sample_name + "{" + ",".join(f'{self.labels[i]}="%s"' for i in order) + "} ")

    def render(self, series: Series) -> bytes:
        """The family's sample lines: one per series with a value, in order (the header is
        `header`)."""
        lines: List[str] = []
        append = lines.append
        rows = zip(series.labels, series.values)
        if not self.labels:
            for _, value in rows:
                if value is not None:
                    append(f"{self.sample_name} {value_text(value)}\n")
        elif len(self.labels) == 1:
            prefix = f'{self.sample_name}{{{self.labels[0]}="'
            for (label,), value in rows:
                if value is not None:
                    append(f'{prefix}{escape_value(label)}"}} {value_text(value)}\n')
        else:
            # On a host of thousands of devices this runs for every series of a family whose
            # values all move (AER counters): plain string building, escaping only when needed.
            template, order = self._template, self._order
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
        return "".join(lines).encode("utf-8")


class Rows(dict):
    """A scrape's series, family by family, as a collector fills them in."""

    def add(self, family: Family, labels: Tuple[str, ...], value: Optional[float]) -> None:
        series = self.get(family)
        if series is None:
            series = self[family] = Series()
        series.labels.append(labels)
        series.values.append(value)

    def series(self, family: Family) -> Series:
        series = self.get(family)
        if series is None:
            series = self[family] = Series()
        return series


class FamilyTexts:
    """The text of each family of a table, rendered again only when its rows change.

    Keyed on the series themselves: a family whose label values and values equal those
    of the last call (Python's list equality checks identity first, so series built from
    the same objects compare at almost no cost) is served from the text kept for it.
    Used by one collector, one scrape at a time."""

    def __init__(self, table: Sequence[Family]):
        self.table = tuple(table)
        self._members = frozenset(self.table)
        self._kept: Dict[Family, Tuple[Series, bytes]] = {}

    def families(self, rows: Mapping[Family, Series]) -> List[SeriesFamily]:
        unknown = [f.name for f in rows if f not in self._members]
        if unknown:
            raise KeyError(f"families not in the collector's table: {', '.join(unknown)}")
        out = []
        kept = self._kept
        for family in self.table:
            series = rows.get(family)
            if series is None:
                series = _NONE
            last = kept.get(family)
            if last is None or last[0] != series:
                last = kept[family] = (series, family.render(series))
            out.append(SeriesFamily(family, last[1]))
        return out


_NONE = Series()  # a family without series; never filled
