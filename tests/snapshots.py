"""Tests take snapshots the way the exporter does (storpath.scrape.snapshot.snapshotter_for)."""

from __future__ import annotations

from typing import List

from storpath.collectors.base import Collector, SourceFailed
from storpath.scrape.exposition import SeriesFamily
from storpath.readers.pci import PciDevice
from storpath.base.roots import Roots
from storpath.scrape.snapshot import Snapshot, snapshotter_for, take_once


def snapshot_for(collector: Collector, timeout: float = 30.0) -> Snapshot:
    """One snapshot of what `collector` reads, from the sources a scrape would use for it."""
    snapshotter = snapshotter_for(collector.roots, collector.reads + collector.enriches, collector.sources())
    try:
        return snapshotter.take(timeout)
    finally:
        snapshotter.close()


def collect(collector: Collector, timeout: float = 30.0) -> List[SeriesFamily]:
    """A collector's families on one scrape; SourceFailed when a source it reads failed (as
    the exporter reports storpath_scrape_collector_success 0)."""
    snapshot = snapshot_for(collector, timeout)
    why = snapshot.why_missing(collector.reads)
    if why is not None:
        raise SourceFailed(why)
    values = collector.values(snapshot)
    return [] if values is None else collector.texts.families(values)


class Scraped:
    """A collector as prometheus_client's registry takes one: each `collect()` a scrape of
    its own snapshot."""

    def __init__(self, collector: Collector):
        self.collector = collector

    def collect(self) -> List[SeriesFamily]:
        return collect(self.collector)


def pci_tree(roots: Roots) -> List[PciDevice]:
    """The PCI devices with their port types, as a snapshot reads them."""
    snapshot = take_once(roots, ["pci"])
    assert snapshot.pci is not None, snapshot.failed
    return snapshot.pci
