"""Metric families, declared once per collector, and the rows a scrape fills in.

Each collector module declares its families at module level, in the order they are
exposed, as node_exporter declares its descriptors once:

    CURRENT_SPEED = Family("storpath_pcie_current_link_speed_transfers_per_second", GAUGE,
                           "Speed the link trained to (current_link_speed).", ("address",),
                           unit="transfers_per_second")

and its `values()` returns `Rows`: per family, the label values and the value of each
series. storpath.scrape.exposition turns those into text (`FamilyTexts`: a family is rendered
again only when its series differ from the last scrape's).

A family's series are kept as two columns (label tuples, values) rather than a tuple per
series: on a host with thousands of devices a scrape then allocates one label tuple per
device instead of one object per series, which keeps Python's cyclic garbage collector
from running through the heap dozens of times per scrape (measured: a third of the
pcie collector's time with a tuple per series).
`docs/metrics.md` is generated from the same tables (`storpath.report.metricsdoc`).
"""

from __future__ import annotations

from dataclasses import field
from typing import List, Optional, Tuple

from storpath.base.records import datarecord



GAUGE = "gauge"
COUNTER = "counter"
# Quantiles only, as a probe's latency percentiles: promtool accepts `quantile` on summaries only.
SUMMARY = "summary"


class SeriesColumns:
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
        return isinstance(other, SeriesColumns) and self.values == other.values and self.labels == other.labels

    def __len__(self) -> int:
        return len(self.values)


@datarecord(frozen=True, eq=False)
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

    def __post_init__(self) -> None:
        if self.type not in (GAUGE, COUNTER, SUMMARY):
            raise ValueError(f"{self.name}: unknown family type {self.type!r}")
        set_ = object.__setattr__
        set_(self, "labels", tuple(self.labels))
        set_(self, "sample_name", self.name + "_total" if self.type == COUNTER else self.name)


class Rows(dict):
    """A scrape's series, family by family, as a collector fills them in."""

    def add(self, family: Family, labels: Tuple[str, ...], value: Optional[float]) -> None:
        series = self.get(family)
        if series is None:
            series = self[family] = SeriesColumns()
        series.labels.append(labels)
        series.values.append(value)
