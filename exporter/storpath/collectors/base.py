"""What every collector is given and must provide.

A collector declares its metric families once, in a module-level table
(storpath.families.Family, in exposition order), and provides `values()`: the rows of
each family on this scrape, from facts that readers read and analysis derived. It
never opens files and keeps no rendered text: the framework (`collect()`) renders a
family again only when its rows change. `values()` runs on the scrape path and must be
fast: slow or privileged work belongs in a background task (`Context.scheduler`) whose
latest result `values()` serves. See CONTRIBUTING.md for a worked example.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from storpath.background import Scheduler
from storpath.exposition import SeriesFamily
from storpath.facts import SharedReads
from storpath.families import Family, FamilyTexts, Rows
from storpath.roots import Roots


@dataclass
class Context:
    roots: Roots
    config: Dict[str, Any] = field(default_factory=dict)  # this collector's section, defaults applied
    scheduler: Scheduler = field(default_factory=Scheduler)
    full_config: Dict[str, Any] = field(default_factory=dict)  # the whole validated config (probes etc.)
    facts: Optional[SharedReads] = None  # shared by all collectors of one exporter; see storpath.facts
    # Whether the collector has `facts` to itself (none given): then each collect() is a
    # scrape of its own. An exporter's collectors share theirs and it starts each scrape.
    own_facts: bool = False

    def __post_init__(self) -> None:
        if self.facts is None:
            self.facts = SharedReads(self.roots)
            self.own_facts = True


class Collector:
    name = "unnamed"
    # The collector's metric families, in the order they are exposed: its module's table.
    families: Tuple[Family, ...] = ()
    # Keys a collector accepts in its `collectors.<name>` config section, with defaults.
    # The type of each default is the type the config loader checks.
    config_defaults: Dict[str, Any] = {}

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.roots = ctx.roots
        self.config = ctx.config
        from storpath import log

        self.log: logging.Logger = log.get(self.name)
        self._texts = FamilyTexts(self.families)

    def values(self) -> Optional[Rows]:
        """The rows of each family on this scrape; a family left out has no series. None:
        the collector has nothing to export on this host (no family headers either)."""
        raise NotImplementedError

    def collect(self) -> List[SeriesFamily]:
        """Every family of the table with its text for this scrape."""
        if self.ctx.own_facts:
            self.ctx.facts.new_scrape()
        values = self.values()
        return [] if values is None else self._texts.families(values)
