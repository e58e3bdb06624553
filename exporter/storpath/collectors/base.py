"""What every collector is given and must provide.

A collector declares its metric families once, in a module-level table
(storpath.scrape.families.Family, in exposition order), names the parts of the snapshot its rows
come from (`reads`: fields of storpath.scrape.snapshot.Snapshot) and provides `values(snapshot)`:
the rows of each family, from the snapshot and the analysis of it. It never opens a file
and keeps no rendered text: the framework (StorpathExporter.collect, with the collector's
`texts`) renders a family again only when its rows change. Slow or privileged work is a slow
source declared in storpath.scrape.slow for the collector: enabling the collector enables it
(`Context.slow`), and the collector reads its latest result from the snapshot like any other
part. See CONTRIBUTING.md for a worked example.
"""

from __future__ import annotations

import logging
from dataclasses import field
from typing import Any, Dict, Optional, Sequence, Tuple

from storpath.base.records import datarecord
from storpath.base import log
from storpath.base.background import Scheduler
from storpath.scrape.exposition import FamilyTexts
from storpath.scrape.families import Family, Rows
from storpath.base.roots import Roots
from storpath.scrape.slow import SlowRunner
from storpath.scrape.snapshot import Snapshot, Source


@datarecord
class Context:
    """What one collector is given: the roots, its config section, the scheduler, the whole
    config and the slow sources' runner."""

    roots: Roots
    config: Dict[str, Any] = field(default_factory=dict)  # its config section (Collector.settings adds defaults)
    scheduler: Scheduler = field(default_factory=Scheduler)
    full_config: Dict[str, Any] = field(default_factory=dict)  # the whole validated config (probes etc.)
    # The slow sources' runner, shared by the collectors of one configuration (one of its own
    # over `scheduler` when not given).
    slow: Optional[SlowRunner] = None


class Collector:
    name = "unnamed"
    # The collector's metric families, in the order they are exposed: its module's table.
    families: Tuple[Family, ...] = ()
    # The snapshot fields its rows come from: when one could not be read, the collector
    # fails the scrape (storpath_scrape_collector_success 0) with that as the reason.
    reads: Tuple[str, ...] = ()
    # Snapshot fields that only add to some of its rows (an md member's NUMA node from the PCI
    # tree): read when the collector is enabled, but one that could not be read leaves those
    # rows out (the field is None), never the collector's other series.
    enriches: Tuple[str, ...] = ()
    # Keys a collector accepts in its `collectors.<name>` config section, with defaults.
    # The type of each default is the type the config loader checks.
    config_defaults: Dict[str, Any] = {}

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.roots = ctx.roots
        self.config = self.settings(ctx.config)
        self.log: logging.Logger = log.get(self.name)
        self.texts = FamilyTexts(self.families)  # the framework's: renders the rows of `values()`
        if ctx.slow is None:
            ctx.slow = SlowRunner(ctx.roots, ctx.scheduler, ctx.full_config)
        ctx.slow.enable(self.name, self.config)  # the slow sources declared for it (storpath.scrape.slow)

    @classmethod
    def settings(cls, section: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """The collector's settings: its `collectors.<name>` config section over its
        defaults (`enabled` is the exporter's, not the collector's). The one place defaults
        are applied: the exporter, `storpath check` and tests alike."""
        settings = dict(cls.config_defaults)
        settings.update({k: v for k, v in (section or {}).items() if k != "enabled"})
        return settings

    def sources(self) -> Sequence[Source]:
        """Snapshot sources of the collector's own (reading them must not block): the slow
        sources declared for it, and a sampler's window (gpu) or the probes' results."""
        return self.ctx.slow.sources(self.name)

    def values(self, snapshot: Snapshot) -> Optional[Rows]:
        """The rows of each family on this scrape; a family left out has no series. None:
        the collector has nothing to export on this host (no family headers either)."""
        raise NotImplementedError


class SourceFailed(Exception):
    """A part of the snapshot a collector needs could not be read."""
